"""Artifacts at the edge in the CPython runtime double (SPEC.md ART-7, ART-9, ART-10): the
project object's alarm collects unreachable R2 bodies, a reset of the object between two
calls changes nothing, a reset bucket is seen by publication, and a permanently failing
delete backs off."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aidememo.domain.artifacts import GC_BACKOFF_FIRST_MS, SETTLEMENT_GRACE_MS
from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from tests.contract.support import PROJECT, START_MS, TENANT, WRITER, Api
from tests.contract.test_artifacts import publish, put, reserve, upload
from tests.edge.backend import edge_backend
from tests.edge.runtime import Runtime

OBJECT = f"{TENANT}/{PROJECT}"


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[tuple[Api, Runtime]]:
    clock = FixedClock(START_MS)
    backend = edge_backend(tmp_path, clock)
    runtime: Runtime = backend.client.runtime  # type: ignore[attr-defined]
    api = Api("edge", backend.client, backend.identity, clock, store=backend.store)  # type: ignore[arg-type]
    api.provision(WRITER, Role.WRITER)
    try:
        yield api, runtime
    finally:
        backend.close()


def test_art7_art10_the_alarm_collects_an_aborted_body(edge: tuple[Api, Runtime]) -> None:
    api, runtime = edge
    bucket = runtime.env.ARTIFACTS
    r = reserve(api, "a1", b"gone", ttl_ms=60_000).expect(200)
    upload(api, r["reservation_id"], b"gone").expect(200)
    assert bucket.keys() == [r["generation"]]
    path = f"/v1/projects/{PROJECT}/artifact-reservations/{r['reservation_id']}"
    api.call("DELETE", path, as_=WRITER).expect(200)
    storage = runtime.namespaces["PROJECTS"].instance(OBJECT).ctx.storage
    # Set for the reservation's expiry when it was made; it fires, then waits for the intent.
    assert storage.alarm_ms == r["expires_at_ms"]
    api.clock.value = r["expires_at_ms"] + SETTLEMENT_GRACE_MS - 1
    runtime.fire_alarms()
    assert bucket.keys() == [r["generation"]]
    api.clock.value += 1
    runtime.fire_alarms()
    assert bucket.keys() == []


def test_art7_the_alarm_collects_a_replaced_body_and_keeps_the_current(
    edge: tuple[Api, Runtime],
) -> None:
    api, runtime = edge
    v1 = put(api, "v1", b"one")
    v2 = put(api, "v2", b"two", mutation_token=v1["mutation_token"])
    api.clock.advance(SETTLEMENT_GRACE_MS)
    runtime.fire_alarms()
    assert runtime.env.ARTIFACTS.keys() == [v2["generation"]]


def test_art9_object_reset_between_calls_changes_nothing(edge: tuple[Api, Runtime]) -> None:
    api, runtime = edge
    r = reserve(api, "o1", b"body").expect(200)
    runtime.namespaces["PROJECTS"].evict(OBJECT)
    upload(api, r["reservation_id"], b"body").expect(200)
    runtime.namespaces["PROJECTS"].evict(OBJECT)
    ref = publish(api, r["reservation_id"], "o1.p").expect(200)
    runtime.namespaces["PROJECTS"].evict(OBJECT)
    assert publish(api, r["reservation_id"], "o1.p").expect(200) == ref


def test_art9_a_reset_bucket_fails_publication_not_the_catalog(
    edge: tuple[Api, Runtime],
) -> None:
    api, runtime = edge
    r = reserve(api, "b1", b"body").expect(200)
    upload(api, r["reservation_id"], b"body").expect(200)
    runtime.env.ARTIFACTS.reset()
    publish(api, r["reservation_id"], "b1.p").expect(409, "artifact_body_mismatch")
    upload(api, r["reservation_id"], b"body").expect(200)  # still live: upload again
    publish(api, r["reservation_id"], "b1.p").expect(200)


def test_art7_a_failing_r2_delete_backs_off(edge: tuple[Api, Runtime]) -> None:
    api, runtime = edge
    bucket = runtime.env.ARTIFACTS
    v1 = put(api, "f1", b"one")
    put(api, "f2", b"two", mutation_token=v1["mutation_token"])
    bucket.fail_deletes = True
    api.clock.advance(SETTLEMENT_GRACE_MS)
    runtime.fire_alarms()
    store = runtime.namespaces["PROJECTS"].instance(OBJECT).obj._open(create=False)
    intent = store.read(lambda tx: tx.get_gc_intent(v1["generation"]))
    assert intent.attempts == 1 and intent.last_error and "refused" in intent.last_error
    assert intent.not_before_ms == api.clock.value + GC_BACKOFF_FIRST_MS
    bucket.fail_deletes = False
    api.clock.advance(GC_BACKOFF_FIRST_MS)
    runtime.fire_alarms()
    assert v1["generation"] not in bucket.keys()
    assert store.read(lambda tx: tx.get_gc_intent(v1["generation"])) is None


def test_arc4_art7_tenant_deletion_at_the_edge_collects_its_bodies(
    edge: tuple[Api, Runtime],
) -> None:
    api, runtime = edge
    ref = put(api, "t1", b"tenant body")
    status, _, answer = runtime.admin("DELETE", f"/v1/admin/tenants/{TENANT}?confirm={TENANT}")
    assert status == 200, answer
    assert runtime.env.ARTIFACTS.keys() == [ref["generation"]]
    api.clock.advance(SETTLEMENT_GRACE_MS)
    runtime.fire_alarms()
    assert runtime.env.ARTIFACTS.keys() == []


def test_art8_a_catalog_pinned_elsewhere_refuses_r2_bodies(edge: tuple[Api, Runtime]) -> None:
    api, runtime = edge
    store = runtime.namespaces["PROJECTS"].instance(OBJECT).obj._open(create=False)
    store.transaction(lambda tx: tx.bind_body_store_identity("local:v1"))
    r = reserve(api, "p1", b"x").expect(200)
    upload(api, r["reservation_id"], b"x").expect(503, "artifact_store_unavailable")
    assert runtime.env.ARTIFACTS.keys() == []
