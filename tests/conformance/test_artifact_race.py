"""Concurrent reservations and replacements of one path through two connections (SPEC.md
ART-2, ART-4): exactly one live reservation, exactly one replacement per revision."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from aidememo.bodies.memory import MemoryBodies
from aidememo.conformance.artifact_checks import CT, PATH, ArtifactFixture
from aidememo.conformance.harness import PROJECT, Fixture
from aidememo.domain.clock import RandomIds
from aidememo.domain.errors import AidememoError
from aidememo.ports import CAP_TWO_CONNECTIONS
from aidememo.service.artifacts import Artifacts
from aidememo.service.ledger import Ledger
from tests.conformance.conftest import Backend

RACERS = 6


def _race(fns: list[Callable[[], Any]]) -> list[Any]:
    barrier = threading.Barrier(len(fns))
    out: list[Any] = [None] * len(fns)

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = fns[i]()
        except AidememoError as exc:
            out[i] = exc.code.value

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_art2_art4_concurrent_reservations_and_replacements(backend: Backend) -> None:
    backend.require(CAP_TWO_CONNECTIONS)
    fx = Fixture.create(backend.open)
    bodies = MemoryBodies()
    stores = [backend.open() for _ in range(RACERS)]
    try:
        services = [
            Artifacts(s, fx.clock, RandomIds(), Ledger(s, fx.clock), bodies) for s in stores
        ]
        payload = {"path": PATH, "size_bytes": 1, "content_type": CT}
        got = _race(
            [
                (lambda a=a, i=i: a.reserve(fx.actor, PROJECT, f"race{i}", payload)[0])
                for i, a in enumerate(services)
            ]
        )
        winners = [g for g in got if not isinstance(g, str)]
        assert len(winners) == 1, got
        assert sorted(g for g in got if isinstance(g, str)) == ["artifact_conflict"] * (RACERS - 1)
        helper = ArtifactFixture.create(fx)
        helper.art.bodies = bodies
        helper.upload(winners[0], b"x")
        v1 = helper.publish(winners[0], "race.p")
        token = str(v1["mutation_token"])

        def replace(a: Artifacts, i: int) -> Any:
            body = {**payload, "mutation_token": token}
            r, _ = a.reserve(fx.actor, PROJECT, f"rep{i}", body)
            a.upload(fx.actor, PROJECT, r.reservation_id, 1, iter([b"y"]))
            return a.publish(fx.actor, PROJECT, r.reservation_id, f"rep{i}.p")[0]

        done = _race([(lambda a=a, i=i: replace(a, i)) for i, a in enumerate(services)])
        published = [d for d in done if not isinstance(d, str)]
        assert [p["revision"] for p in published] == [2], done
        current = helper.art.resolve(fx.actor, PROJECT, PATH)
        assert current["generation"] == published[0]["generation"]
    finally:
        for s in stores:
            s.close()
        fx.store.close()
