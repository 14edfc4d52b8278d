"""The artifact catalog's conformance checks (SPEC.md ART-*): every store must pass them.

Each runs the lifecycle service (`aidememo.service.artifacts`) and the GC worker over the
store under test, with the in-memory body store, so what is checked is the catalog: replay
receipts, exclusive reservations, publication with its change entry, GC intents written in
the transaction that makes a generation unreachable, backoff, identity pinning, and tenant
deletion leaving intents but no tenant rows (ARC-4).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from aidememo.bodies.memory import MemoryBodies
from aidememo.conformance.harness import (
    ACTOR,
    PROJECT,
    TENANT,
    ConformanceViolation,
    Fixture,
    StoreFactory,
    expect,
    expect_error,
)
from aidememo.domain.artifacts import (
    GC_BACKOFF_FIRST_MS,
    SETTLEMENT_GRACE_MS,
    GcIntent,
    Reservation,
    State,
)
from aidememo.domain.errors import ErrorCode
from aidememo.domain.model import Role, Scope
from aidememo.ports import WriteTx
from aidememo.service.access import Caller
from aidememo.service.artifact_gc import ArtifactGc, tenant_intents
from aidememo.service.artifacts import Artifacts

PATH = "sessions/s1/artifacts/result.txt"
CT = "text/plain"


@dataclass
class ArtifactFixture:
    """The ledger fixture plus the artifact service and GC over an in-memory body store."""

    fx: Fixture
    bodies: MemoryBodies
    art: Artifacts
    gc: ArtifactGc

    @classmethod
    def create(cls, fx: Fixture) -> ArtifactFixture:
        bodies = MemoryBodies()
        art = Artifacts(fx.store, fx.clock, _Ids(), fx.ledger, bodies)
        return cls(fx, bodies, art, ArtifactGc(fx.store, bodies, fx.clock))

    def reserve(
        self,
        command_id: str,
        data: bytes,
        *,
        path: str = PATH,
        token: str | None = None,
        ttl_ms: int | None = None,
        sha256: str | None = None,
        caller: Caller | None = None,
        project_id: str = PROJECT,
    ) -> Reservation:
        payload: dict[str, object] = {"path": path, "size_bytes": len(data), "content_type": CT}
        optional = {"mutation_token": token, "ttl_ms": ttl_ms, "sha256": sha256}
        payload |= {key: value for key, value in optional.items() if value is not None}
        r, _ = self.art.reserve(caller or self.fx.actor, project_id, command_id, payload)
        return r

    def upload(self, r: Reservation, data: bytes, caller: Caller | None = None) -> None:
        self.art.upload(
            caller or self.fx.actor, r.project_id, r.reservation_id, len(data), iter([data])
        )

    def publish(
        self, r: Reservation, command_id: str, caller: Caller | None = None
    ) -> dict[str, object]:
        ref, _ = self.art.publish(
            caller or self.fx.actor, r.project_id, r.reservation_id, command_id
        )
        return ref

    def put(self, command_id: str, data: bytes, token: str | None = None) -> dict[str, object]:
        r = self.reserve(f"{command_id}.r", data, token=token)
        self.upload(r, data)
        return self.publish(r, f"{command_id}.p")

    def read(self, ref: dict[str, object], caller: Caller | None = None) -> bytes:
        _, chunks = self.art.download(
            caller or self.fx.actor, PROJECT, str(ref["artifact_id"]), ref["revision"]
        )
        return b"".join(chunks)

    def intent(self, key: str) -> GcIntent | None:
        found: GcIntent | None = self.fx.store.read(lambda tx: tx.get_gc_intent(key))
        return found


class _Ids:
    def __init__(self) -> None:
        self.n = 0

    def new_id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.n:04d}"


def reserve_replay_and_exclusive(a: ArtifactFixture) -> None:
    first = a.reserve("cmd-r1", b"one")
    again, replayed = a.art.reserve(
        a.fx.actor, PROJECT, "cmd-r1", {"path": PATH, "size_bytes": 3, "content_type": CT}
    )
    expect(replayed and again == first, f"replay gave {again}")
    expect_error(ErrorCode.COMMAND_CONFLICT, lambda: a.reserve("cmd-r1", b"other"))
    expect_error(ErrorCode.ARTIFACT_CONFLICT, lambda: a.reserve("cmd-r2", b"one"))
    expect_error(
        ErrorCode.ARTIFACT_CONFLICT, lambda: a.reserve("cmd-r3", b"one", path=PATH, token="mt_x")
    )


def publish_replace_and_replay(a: ArtifactFixture) -> None:
    v1 = a.put("one", b'{"result":"one"}')
    expect(v1["revision"] == 1, f"first revision {v1}")
    expect(a.read(v1) == b'{"result":"one"}', "read back the first body")
    expect(a.art.resolve(a.fx.actor, PROJECT, PATH)["generation"] == v1["generation"], "resolve")
    change = a.fx.store.read(lambda tx: tx.list_changes(Scope(TENANT, PROJECT), 0, 100))
    expect(
        [c.ref.kind for c in change] == ["artifact"],
        f"the publication is one change entry: {change}",
    )
    expect_error(ErrorCode.ARTIFACT_CONFLICT, lambda: a.reserve("two.r", b"two"))
    v2 = a.put("two", b"two", token=str(v1["mutation_token"]))
    expect(v2["artifact_id"] == v1["artifact_id"] and v2["revision"] == 2, f"replacement {v2}")
    old = a.intent(str(v1["generation"]))
    expect(old is not None and old.reason == "replaced", f"replaced intent {old}")
    expect(a.gc.run_once().deleted == 0, "nothing is due before the settlement grace")
    a.fx.clock.advance(SETTLEMENT_GRACE_MS)
    report = a.gc.run_once()
    expect(report.deleted == 1, f"the replaced body is deleted: {report}")
    expect(a.bodies.head(str(v1["generation"])) is None, "the old body is gone")
    expect(a.read(v2) == b"two", "the current body survives GC")
    replay, replayed = a.art.publish(a.fx.actor, PROJECT, str(v1["reservation_id"]), "one.p")
    expect(replayed and replay == v1, f"the old publish replays its reference: {replay}")
    expect_error(ErrorCode.ARTIFACT_NOT_FOUND, lambda: a.read(v1))


def digest_and_size_mismatch(a: ArtifactFixture) -> None:
    wrong = hashlib.sha256(b"expected").hexdigest()
    r = a.reserve("d.r", b"actual!!", sha256=wrong)
    expect_error(ErrorCode.ARTIFACT_BODY_MISMATCH, lambda: a.upload(r, b"actual!!"))
    failed = a.fx.store.read(
        lambda tx: tx.get_artifact_reservation(Scope(TENANT, PROJECT), r.reservation_id)
    )
    expect(failed is not None and failed.state == State.FAILED, f"failed: {failed}")
    expect(a.intent(r.generation) is not None, "a failed reservation queues its generation")
    r2 = a.reserve("s.r", b"four")
    expect_error(ErrorCode.ARTIFACT_BODY_MISMATCH, lambda: a.upload(r2, b"five!"))
    expect_error(ErrorCode.ARTIFACT_BODY_MISMATCH, lambda: a.publish(r2, "s.p"))


def publish_rehashes_the_stored_body(a: ArtifactFixture) -> None:
    """Publication trusts only the stored bytes, re-hashed: a body changed in the body store
    after its verified upload fails the reservation (ART-4)."""
    data = b"declared"
    r = a.reserve("h.r", data, sha256=hashlib.sha256(data).hexdigest())
    a.upload(r, data)
    # Other bytes of the same size in place of the verified ones (delete, then create anew:
    # a body store's create never overwrites).
    a.bodies.delete(r.generation)
    a.bodies.create(r.generation, iter([b"tampered"]), len(data))
    expect_error(ErrorCode.ARTIFACT_BODY_MISMATCH, lambda: a.publish(r, "h.p"))
    failed = a.fx.store.read(
        lambda tx: tx.get_artifact_reservation(Scope(TENANT, PROJECT), r.reservation_id)
    )
    expect(failed is not None and failed.state == State.FAILED, f"failed: {failed}")
    expect_error(ErrorCode.ARTIFACT_NOT_FOUND, lambda: a.art.resolve(a.fx.actor, PROJECT, PATH))


def abort_preserves_previous(a: ArtifactFixture) -> None:
    v1 = a.put("one", b"one")
    r = a.reserve("two.r", b"two", token=str(v1["mutation_token"]), ttl_ms=60_000)
    a.upload(r, b"two")
    expect(a.art.abort(a.fx.actor, PROJECT, r.reservation_id)["state"] == State.ABORTED, "abort")
    expect(a.art.abort(a.fx.actor, PROJECT, r.reservation_id)["state"] == State.ABORTED, "again")
    expect(a.art.resolve(a.fx.actor, PROJECT, PATH)["revision"] == 1, "v1 stays published")
    expect_error(ErrorCode.ARTIFACT_CONFLICT, lambda: a.publish(r, "two.p"))
    expect_error(ErrorCode.ARTIFACT_CONFLICT, lambda: a.upload(r, b"two"))
    intent = a.intent(r.generation)
    expect(
        intent is not None and intent.not_before_ms == r.expires_at_ms + SETTLEMENT_GRACE_MS,
        f"abort's intent waits for expiry plus grace: {intent}",
    )
    a.fx.clock.value = r.expires_at_ms + SETTLEMENT_GRACE_MS - 1
    early = a.gc.run_once()
    expect(early.leased == 0, f"not due yet: {early}")
    a.fx.clock.value = r.expires_at_ms + SETTLEMENT_GRACE_MS
    expect(a.gc.run_once().deleted == 1, "due at expiry plus grace")
    expect(a.read(v1) == b"one", "v1 is readable")


def expiry_reaped_before_gc(a: ArtifactFixture) -> None:
    r = a.reserve("e.r", b"late", ttl_ms=10)
    a.upload(r, b"late")
    a.fx.clock.advance(10)
    expect_error(ErrorCode.ARTIFACT_RESERVATION_EXPIRED, lambda: a.publish(r, "e.p"))
    first = a.gc.run_once()
    expect(first.leased == 0 and a.bodies.head(r.generation) == 4, f"first pass {first}")
    a.fx.clock.advance(SETTLEMENT_GRACE_MS)
    second = a.gc.run_once()
    expect(second.deleted == 1 and a.bodies.head(r.generation) is None, f"second {second}")
    expect_error(ErrorCode.ARTIFACT_RESERVATION_EXPIRED, lambda: a.upload(r, b"late"))
    expect(a.bodies.head(r.generation) is None, "a late upload is refused before any byte")


def expiry_during_publication_keeps_the_grace(a: ArtifactFixture) -> None:
    """A reservation that expires while its body is re-observed is settled by the publication's
    transaction, its intent waiting for the expiry plus the grace (ART-7)."""
    r = a.reserve("g.r", b"slow", ttl_ms=100)
    a.upload(r, b"slow")
    plain_read = a.bodies.read

    def slow_read(key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        a.fx.clock.advance(100)  # the observation outlives the reservation
        return plain_read(key, start, end)

    a.bodies.read = slow_read  # type: ignore[method-assign]
    expect_error(ErrorCode.ARTIFACT_RESERVATION_EXPIRED, lambda: a.publish(r, "g.p"))
    intent = a.intent(r.generation)
    expect(
        intent is not None and intent.not_before_ms == r.expires_at_ms + SETTLEMENT_GRACE_MS,
        f"the publication that settled it keeps the grace: {intent}",
    )


def expired_reservation_reaped_by_next_reserve(a: ArtifactFixture) -> None:
    r = a.reserve("x.r", b"x", ttl_ms=10)
    a.fx.clock.advance(11)
    r2 = a.reserve("y.r", b"y")
    expect(r2.generation != r.generation, "a new generation after the old one expired")
    intent = a.intent(r.generation)
    expect(intent is not None and intent.reason == "expired", f"expired intent {intent}")
    expect(
        intent is not None and intent.not_before_ms == r.expires_at_ms + SETTLEMENT_GRACE_MS,
        f"the reserve that settled it keeps the grace: {intent}",
    )


def failing_delete_backs_off(a: ArtifactFixture) -> None:
    r = a.reserve("f.r", b"gone")
    a.upload(r, b"gone")
    a.art.abort(a.fx.actor, PROJECT, r.reservation_id)
    a.bodies.fail_deletes = True
    a.fx.clock.value = r.expires_at_ms + SETTLEMENT_GRACE_MS
    expect(a.gc.run_once().failed == 1, "the delete failed")
    one = a.intent(r.generation)
    expect(
        one is not None
        and one.attempts == 1
        and one.last_error is not None
        and one.not_before_ms == a.fx.clock.value + GC_BACKOFF_FIRST_MS,
        f"first backoff {one}",
    )
    a.fx.clock.advance(GC_BACKOFF_FIRST_MS)
    expect(a.gc.run_once().failed == 1, "failed again")
    two = a.intent(r.generation)
    expect(
        two is not None
        and two.attempts == 2
        and two.not_before_ms == a.fx.clock.value + 2 * GC_BACKOFF_FIRST_MS,
        f"the backoff doubles {two}",
    )
    a.bodies.fail_deletes = False
    a.fx.clock.advance(2 * GC_BACKOFF_FIRST_MS)
    expect(a.gc.run_once().deleted == 1, "deleted once the store recovers")
    expect(a.intent(r.generation) is None, "the intent is gone after the delete")


def tenant_scope_isolation(a: ArtifactFixture) -> None:
    a.fx.identity.bootstrap(
        tenant_id="tenant_b",
        project_id=PROJECT,
        actor_id=ACTOR,
        role=Role.WRITER,
        project_epoch="epoch_b",
    )
    other = Caller("tenant_b", ACTOR)
    mine = a.put("m", b"mine")
    r = a.reserve("t.r", b"theirs", caller=other)
    a.upload(r, b"theirs", caller=other)
    theirs = a.publish(r, "t.p", caller=other)
    expect(mine["generation"] != theirs["generation"], "distinct generations per tenant")
    expect(a.read(mine) == b"mine", "tenant a reads its bytes")
    _, chunks = a.art.download(other, PROJECT, str(theirs["artifact_id"]), theirs["revision"])
    expect(b"".join(chunks) == b"theirs", "tenant b reads its bytes")


def tenant_deletion_queues_generations(a: ArtifactFixture) -> None:
    v1 = a.put("one", b"one")
    r = a.reserve("two.r", b"two", token=str(v1["mutation_token"]))
    now = a.fx.clock.now_ms()

    def delete(tx: WriteTx) -> None:
        tenant_intents(tx, TENANT, now)
        tx.delete_tenant(TENANT)

    a.fx.store.transaction(delete)
    counts = a.fx.store.read(lambda tx: tx.count_tenant_rows(TENANT))
    expect(all(n == 0 for n in counts.values()), f"tenant rows left: {counts}")
    for key in (str(v1["generation"]), r.generation):
        expect(a.intent(key) is not None, f"intent for {key} outlives the tenant")
    a.fx.clock.advance(SETTLEMENT_GRACE_MS)
    expect(a.gc.run_once().deleted == 2, "both generations are deleted")


def identity_binds_once(a: ArtifactFixture) -> None:
    expect(a.fx.store.read(lambda tx: tx.body_store_identity()) is None, "unbound at first")
    a.fx.store.transaction(lambda tx: tx.bind_body_store_identity("local:v1"))
    a.fx.store.transaction(lambda tx: tx.bind_body_store_identity("r2:v1:other"))
    bound = a.fx.store.read(lambda tx: tx.body_store_identity())
    expect(bound == "local:v1", f"the first identity stays pinned: {bound}")


def receipts_pruned_after_retention(a: ArtifactFixture) -> None:
    ref = a.put("one", b"one")
    a.fx.clock.advance(24 * 60 * 60 * 1000)
    report = a.gc.run_once()
    expect(report.pruned_receipts == 1, f"the published reservation's receipt is pruned: {report}")
    replay, replayed = a.art.publish(a.fx.actor, PROJECT, str(ref["reservation_id"]), "one.p")
    expect(replayed and replay == ref, "the publish receipt still replays (a ledger receipt)")
    expect(a.read(ref) == b"one", "the current body is never collected")


ArtifactCheck = Callable[[ArtifactFixture], None]

ARTIFACT_CHECKS: tuple[tuple[str, ArtifactCheck], ...] = (
    ("ART-2", reserve_replay_and_exclusive),
    ("ART-4", publish_replace_and_replay),
    ("ART-3", digest_and_size_mismatch),
    ("ART-4", publish_rehashes_the_stored_body),
    ("ART-5", abort_preserves_previous),
    ("ART-7", expiry_reaped_before_gc),
    ("ART-7", expired_reservation_reaped_by_next_reserve),
    ("ART-7", expiry_during_publication_keeps_the_grace),
    ("ART-7", failing_delete_backs_off),
    ("ART-6", tenant_scope_isolation),
    ("ARC-4", tenant_deletion_queues_generations),
    ("ART-8", identity_binds_once),
    ("ART-3", receipts_pruned_after_retention),
)


def run_artifact_check(name: str, factory: StoreFactory) -> None:
    """Run the named check on a fresh store; closes the store either way."""
    matches = [fn for _, fn in ARTIFACT_CHECKS if fn.__name__ == name]
    if len(matches) != 1:
        raise ConformanceViolation(f"no artifact check named {name!r}")
    fx = Fixture.create(factory)
    try:
        matches[0](ArtifactFixture.create(fx))
    finally:
        fx.store.close()
