"""SEM-10, SEM-11 at the edge, beyond the shared contract (tests/contract/test_search_semantic.py):
the project object's indexer against Vectorize's asynchronous visibility, its backoff on a
failing provider, the canonical re-read of hits, and the doubles' documented limits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.model import Scope
from durable_objects.vectors import FINGERPRINT, namespace, vector_id
from tests.edge.conftest import Edge, make_edge
from tests.edge.runtime.ai_vectorize import BindingError, VectorizeIndex, WorkersAI

T, PROJ, ACTOR = "t_sem", "p_sem", "a_sem"
P = f"/v1/projects/{PROJ}"


@pytest.fixture
def sem_edge(tmp_path: Path) -> Iterator[Edge]:
    yield from make_edge(tmp_path, semantic=True)


def _setup(edge: Edge, facts: dict[str, str]) -> int:
    assert edge.bootstrap(T, PROJ, ACTOR)[0] == 200
    token = edge.token(T, ACTOR)
    body = {"command_id": "c-s", "payload": {"session_id": "s", "topic": "t"}}
    assert edge.post(f"{P}/sessions", token, body)[0] == 200
    seq = 0
    for fid, text in facts.items():
        body = {"command_id": f"c-{fid}", "payload": {"fact_id": fid, "session_id": "s",
                                                     "content": text}}  # fmt: skip
        status, _, answer = edge.post(f"{P}/facts", token, body)
        assert status == 200, answer
        seq = int(answer["project_seq"])
    return seq


def _state(edge: Edge) -> Any:
    obj = edge.runtime.namespaces["PROJECTS"].instance(f"{T}/{PROJ}").obj
    store = obj._open(create=False)
    return store.read(lambda tx: tx.semantic_state(Scope(T, PROJ)))


def test_sem11_applied_sequence_waits_until_vectorize_shows_the_batch(sem_edge: Edge) -> None:
    seq = _setup(sem_edge, {"f1": "redis cluster timeout", "f2": "lunch on thursday"})
    rt = sem_edge.runtime
    rt.clock.advance(1)
    rt.fire_alarms()  # the step embeds and upserts; Vectorize has not applied it yet
    assert rt.ai.calls == 1 and rt.ai.texts == 2
    state = _state(sem_edge)
    assert state is not None and state.applied_seq == 0
    assert state.fingerprint == FINGERPRINT.text()
    for _ in range(3):  # still invisible: each try backs off, nothing advances
        rt.clock.advance(300)
        rt.fire_alarms()
        assert _state(sem_edge).applied_seq == 0
    rt.catch_up_index()
    assert _state(sem_edge).applied_seq == seq
    assert len(rt.vectorize.vector_ids()) == 2


def test_sem11_an_evicted_object_indexes_from_its_ledger(sem_edge: Edge) -> None:
    seq = _setup(sem_edge, {"f1": "redis cluster timeout", "f2": "lunch on thursday"})
    rt = sem_edge.runtime
    rt.clock.advance(1)
    rt.fire_alarms()  # the batch is sent, not yet visible
    rt.namespaces["PROJECTS"].evict(f"{T}/{PROJ}")  # the runtime drops the idle object
    rt.catch_up_index()  # a new instance wakes on the alarm and settles the batch
    assert _state(sem_edge).applied_seq == seq
    status, _, found = sem_edge.get(
        f"{P}/search", sem_edge.token(T, ACTOR), query={"q": "redis", "mode": "hybrid"}
    )
    assert status == 200 and found["results"][0]["fact_id"] == "f1", found


def test_sem11_a_failing_workers_ai_is_retried_with_backoff(sem_edge: Edge) -> None:
    seq = _setup(sem_edge, {"f1": "redis cluster timeout"})
    rt = sem_edge.runtime
    real = rt.ai.run
    failures: list[int] = []

    async def down(model: str, inputs: Any) -> Any:
        failures.append(rt.clock.now_ms())
        raise BindingError("AiError: capacity")

    rt.ai.run = down  # type: ignore[method-assign]
    for _ in range(4):
        rt.clock.advance(60_000)
        rt.fire_alarms()
    assert len(failures) == 4 and _state(sem_edge).applied_seq == 0
    storage = rt.namespaces["PROJECTS"].storages[f"{T}/{PROJ}"]
    assert storage.alarm_ms is not None  # the next try is scheduled
    rt.ai.run = real  # type: ignore[method-assign]
    rt.catch_up_index()
    assert _state(sem_edge).applied_seq == seq


def test_sem10_a_hit_the_project_no_longer_holds_never_surfaces(sem_edge: Edge) -> None:
    _setup(sem_edge, {"f1": "redis cluster timeout"})
    rt = sem_edge.runtime
    rt.catch_up_index()
    scope = Scope(T, PROJ)
    ghost = vector_id(scope, "f_ghost")
    values = asyncio.run(WorkersAI().run("@cf/baai/bge-small-en-v1.5", {"text": ["redis"]}))
    vector = {"id": ghost, "values": values["data"][0], "namespace": namespace(scope)}
    rt.run(rt.vectorize.upsert([vector]))
    obj = rt.namespaces["PROJECTS"].instance(f"{T}/{PROJ}").obj
    obj._ledger.begin(obj._ledger.batch() or _batch(), [(ghost, "f_ghost", 99)], [])
    obj._ledger.settle()
    rt.vectorize.settle()
    status, _, found = sem_edge.get(
        f"{P}/search", sem_edge.token(T, ACTOR), query={"q": "redis", "mode": "semantic"}
    )
    assert status == 200, found
    assert [r["fact_id"] for r in found["results"]] == ["f1"]


def _batch() -> Any:
    from durable_objects.vectors import Batch

    return Batch(0, 0, "e")


def test_sem10_the_doubles_keep_the_documented_limits() -> None:
    from aidememo.domain.clock import FixedClock

    ai = WorkersAI()
    with pytest.raises(BindingError):
        asyncio.run(ai.run("@cf/baai/bge-small-en-v1.5", {"text": ["x"] * 101}))
    with pytest.raises(BindingError):
        asyncio.run(ai.run("@cf/other", {"text": ["x"]}))
    index = VectorizeIndex(FixedClock(0))
    one = {"id": "a", "values": [1.0] + [0.0] * 383, "namespace": "n"}
    with pytest.raises(BindingError):
        asyncio.run(index.upsert([{**one, "id": "x" * 65}]))
    with pytest.raises(BindingError):
        asyncio.run(index.upsert([{**one, "values": [1.0] * 1537}]))
    with pytest.raises(BindingError):
        asyncio.run(index.upsert([{**one, "metadata": {"big": "x" * 11_000}}]))
    asyncio.run(index.upsert([one]))
    query = [1.0] + [0.0] * 383
    assert asyncio.run(index.query(query, {"topK": 5}))["count"] == 0  # not visible yet
    index.settle()
    assert asyncio.run(index.query(query, {"topK": 100}))["matches"][0]["id"] == "a"
    with pytest.raises(BindingError):
        asyncio.run(index.query(query, {"topK": 21, "returnMetadata": "all"}))
    with pytest.raises(BindingError):
        asyncio.run(index.query(query, {"topK": 101}))
    with pytest.raises(ValueError):
        VectorizeIndex(FixedClock(0), dimensions=1537)
