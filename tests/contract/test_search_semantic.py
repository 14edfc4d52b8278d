"""SEM-1..SEM-11: the search modes with a semantic provider, one contract on the origin (memory
and SQLite, its derived index) and on the edge in both storage modes (Workers AI and
Vectorize doubles, the project object's indexer). Every backend embeds with the same
deterministic test embedding (`tests.contract.semantic_backends`). The Pyodide tier runs the
same flow through the real SDK (tests/pyodide/test_edge_pyodide.py, step `semantic`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contract.semantic_backends import FACTORIES, SemanticBackend, open_semantic
from tests.contract.support import TENANT, Api, P

FACTS = [
    ("f_pool", "the database connection pool has 2 connections; raise it to 20"),
    ("f_tabs", "we indent python with four spaces, never tabs"),
    ("f_cert", "the TLS certificate of the gateway expired at midnight"),
    ("f_lunch", "team lunch moved to thursday"),
]


@pytest.fixture(params=sorted(FACTORIES))
def sem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SemanticBackend]:
    yield from open_semantic(request.param, tmp_path)


def _facts(api: Api, facts: list[tuple[str, str]] = FACTS, session: str = "s") -> int:
    if session not in api.__dict__.setdefault("_sessions", set()):
        api.session(session, source_id=f"src_{session}")
        api.__dict__["_sessions"].add(session)
    seq = 0
    for fid, text in facts:
        seq = int(api.fact(fid, session, text)["project_seq"])
    return seq


def _search(api: Api, q: str, **query: object) -> dict[str, object]:
    found: dict[str, object] = api.get(f"{P}/search", query={"q": q, **query}).expect(200)
    return found


def _ids(found: dict[str, object]) -> list[str]:
    return [str(r["fact_id"]) for r in found["results"]]  # type: ignore[attr-defined,index]


def test_sem3_auto_and_hybrid_fall_back_until_the_index_is_built(sem: SemanticBackend) -> None:
    seq = _facts(sem.api)
    for mode in ("auto", "hybrid"):
        found = _search(sem.api, "certificate", mode=mode)
        assert (found["mode"], found["fallback_reason"]) == ("lexical", "semantic_index_not_built")
        assert found["index_seq"] == seq and _ids(found) == ["f_cert"]
    refused = sem.api.get(f"{P}/search", query={"q": "certificate", "mode": "semantic"})
    assert refused.expect(409, "index_not_ready")["error"]["index_seq"] == 0


def test_sem1_sem3_sem4_semantic_and_hybrid_answer_with_scores_and_ranks(
    sem: SemanticBackend,
) -> None:
    seq = _facts(sem.api)
    sem.catch_up()
    found = _search(sem.api, "gateway certificates", mode="hybrid")
    assert found["mode"] == "hybrid" and found["fallback_reason"] is None
    assert (found["index_seq"], found["semantic_lag"]) == (seq, 0)
    model = found["semantic_model"]
    assert isinstance(model, dict) and model["dimensions"] == 384
    top = found["results"][0]  # type: ignore[index]
    assert top["fact_id"] == "f_cert" and top["semantic_rank"] == 1 and top["lexical_rank"] == 1
    assert isinstance(top["semantic_score"], float) and isinstance(top["lexical_score"], float)
    meaning = _search(sem.api, "connections of the database pool", mode="semantic")
    assert meaning["mode"] == "semantic" and _ids(meaning)[0] == "f_pool"
    first = meaning["results"][0]  # type: ignore[index]
    assert first["lexical_rank"] is None and first["score"] == first["semantic_score"]
    auto = _search(sem.api, "python indentation")
    assert auto["mode"] == "hybrid" and _ids(auto)[0] == "f_tabs"


def test_sem4_source_id_filters_the_semantic_list(sem: SemanticBackend) -> None:
    _facts(sem.api)
    _facts(sem.api, [("f_cert2", "the gateway certificate was renewed")], session="t")
    sem.catch_up()
    both = _search(sem.api, "gateway certificate", mode="semantic")
    assert set(_ids(both)[:2]) == {"f_cert", "f_cert2"}
    only = _search(sem.api, "gateway certificate", mode="semantic", source_id="src_t")
    assert _ids(only) == ["f_cert2"]


def test_sem5_at_least_seq_beyond_the_index(sem: SemanticBackend) -> None:
    _facts(sem.api)
    sem.catch_up()
    seq = _facts(sem.api, [("f_new", "a brand new certificate for the gateway")])
    behind = _search(sem.api, "certificate", mode="auto", at_least_seq=seq)
    assert (behind["mode"], behind["fallback_reason"]) == ("lexical", "semantic_index_behind")
    assert behind["index_seq"] == seq
    refused = sem.api.get(
        f"{P}/search", query={"q": "certificate", "mode": "semantic", "at_least_seq": seq}
    )
    assert refused.expect(409, "index_not_ready")["error"]["index_seq"] == seq - 1
    lagging = _search(sem.api, "certificate", mode="hybrid")
    assert (lagging["mode"], lagging["semantic_lag"], lagging["index_seq"]) == (
        "hybrid",
        1,
        seq - 1,
    )
    sem.catch_up()
    caught_up = _search(sem.api, "certificate", mode="hybrid", at_least_seq=seq)
    assert caught_up["mode"] == "hybrid" and caught_up["index_seq"] == seq
    assert "f_new" in _ids(caught_up)
    sem.api.get(f"{P}/search", query={"q": "x", "at_least_seq": seq + 1}).expect(
        409, "cursor_out_of_range"
    )


def test_sem10_hybrid_costs_one_workers_ai_call_and_one_vectorize_query(
    sem: SemanticBackend,
) -> None:
    if sem.counts() is None:
        pytest.skip("the origin embeds in process: no Workers AI or Vectorize")
    _facts(sem.api)
    before = sem.counts()
    _search(sem.api, "certificate", mode="auto")  # not built yet: lexical, no call at all
    assert sem.counts() == before
    sem.catch_up()
    for mode in ("hybrid", "semantic", "auto"):
        ai, queries = sem.counts()  # type: ignore[misc]
        _search(sem.api, "gateway certificate", mode=mode)
        assert sem.counts() == (ai + 1, queries + 1), mode
    ai, queries = sem.counts()  # type: ignore[misc]
    _search(sem.api, "gateway certificate", mode="lexical")
    assert sem.counts() == (ai, queries)


def test_sem11_arc4_tenant_deletion_clears_the_namespace_and_import_rebuilds(
    sem: SemanticBackend,
) -> None:
    from tests.contract.test_admin import admin, export, import_

    _facts(sem.api)
    sem.catch_up()
    data = export(sem.api, include_token_digests="true")
    admin(sem.api, "DELETE", f"/v1/admin/tenants/{TENANT}", query={"confirm": TENANT}).expect(200)
    if sem.runtime is not None:
        sem.runtime.vectorize.settle()
        assert sem.runtime.vectorize.vector_ids() == set()  # the namespace is empty
    import_(sem.api, data).expect(200)
    found = _search(sem.api, "connections of the database pool", mode="auto")
    assert found["fallback_reason"] == "semantic_index_not_built"  # a fresh index (SEM-6)
    sem.catch_up()
    rebuilt = _search(sem.api, "connections of the database pool", mode="semantic")
    assert _ids(rebuilt)[0] == "f_pool"
    if sem.runtime is not None:
        assert len(sem.runtime.vectorize.vector_ids()) == len(FACTS)
