"""The artifact lifecycle (SPEC.md ART-*): reserve, upload, publish, abort, resolve, download.

The catalog lives in the canonical store and every catalog write commits in one transaction
with what it goes with: a publication is a ledger command (receipt, resource of kind
`artifact`, change entry, audit row) whose transaction also settles the reservation and
queues the replaced generation's GC intent; an abort, an expiry, a failed verification and a
lost compare-and-swap queue theirs in the transaction that makes the generation unreachable.
Body bytes never pass through a transaction: an upload streams into the `BodyStore`, and
publication re-observes the stored bytes (size and SHA-256) before its transaction rechecks
the reservation and the path's revision. The body routes come in phases (`upload_begin` /
`upload_end`, `publish_begin` / `publish_end`, `download_meta`) so a front that moves the bytes
itself (the edge Worker, with R2) runs the same catalog steps around its transfer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from aidememo.domain.artifacts import (
    ARTIFACT_KIND,
    MAX_DIRECT_BODY_BYTES,
    SETTLEMENT_GRACE_MS,
    Publication,
    Reservation,
    State,
    artifact_id_of,
    handoff_of,
    intent_for,
    validate_path,
)
from aidememo.domain.canonical import JsonValue
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.domain.model import ChangeOp, Mutation, Receipt, ResourceRef, Scope
from aidememo.domain.visibility import participants
from aidememo.ports import BodyStore, Clock, Ids, ReadTx, Store, WriteTx
from aidememo.service.access import Caller, authorize, check_access
from aidememo.service.artifact_paths import path_rights
from aidememo.service.artifact_rules import (
    crash_point,
    current_publication,
    fingerprint,
    hashing,
    not_live,
    orphan,
    parse_reserve,
)
from aidememo.service.ledger import Ledger

__all__ = ["Artifacts", "crash_point"]


@dataclass(eq=False)
class Artifacts:
    """The artifact use cases over one store, one body store and the ledger."""

    store: Store
    clock: Clock
    ids: Ids
    ledger: Ledger
    bodies: BodyStore | None = None

    def _settle_ms(self) -> int:
        """How long an unreachable generation waits before GC may delete it: the settlement
        grace, plus the longest grant's lifetime when the body store issues grants, so no
        grant issued before the generation became unreachable is still usable (GRANT-4)."""
        return SETTLEMENT_GRACE_MS + int(getattr(self.bodies, "grant_window_ms", 0))

    def _bodies(self) -> BodyStore:
        if self.bodies is None:
            raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "no body store is configured here")
        return self.bodies

    # -- reserve (ART-2) ------------------------------------------------------------------

    def reserve(
        self, caller: Caller, project_id: str, command_id: object, payload: JsonValue
    ) -> tuple[Reservation, bool]:
        """Reserve a path; `(reservation, replayed)`. Idempotent by `command_id`."""
        command_id = validate_id(command_id, "command_id")
        # A body store that takes uploads through grants sets its own limit (GRANT-3).
        limit = getattr(self.bodies, "max_body_bytes", MAX_DIRECT_BODY_BYTES)
        request = parse_reserve(payload, limit)
        artifact_id = artifact_id_of(request.path)
        fp = fingerprint(project_id, "artifact.reserve", artifact_id, payload)
        call = caller.command_call(project_id, command_id, ResourceRef(ARTIFACT_KIND, artifact_id))
        scope = call.scope

        def run(tx: WriteTx) -> tuple[Reservation, bool, AidememoError | None]:
            start = tx.begin_command(call)
            check_access(start.project, start.membership, write=True)
            stored = tx.find_artifact_reservation(scope, command_id)
            if stored is not None:
                if stored.actor_id == caller.actor_id and stored.fingerprint == fp:
                    return stored, True, None
                raise fail(ErrorCode.COMMAND_CONFLICT, "command_id was used for another command")
            if start.receipt is not None:
                raise fail(ErrorCode.COMMAND_CONFLICT, "command_id was used for another command")
            now = self.clock.now_ms()
            rights = path_rights(tx, scope, caller.actor_id, request.path, now)
            for other in tx.live_artifact_reservations(scope, artifact_id):
                if other.expires_at_ms <= now:
                    self._expire(tx, other)
                elif rights.receiver and other.actor_id != caller.actor_id:
                    self._take_over(tx, other, now)  # the receiver's path (ART-14)
                else:
                    raise fail(ErrorCode.ARTIFACT_CONFLICT, "the path has a live reservation")
            current = start.current
            publication = None if current is None or current.body is None else current.body
            base = 0 if current is None else current.revision
            if publication is not None:
                token = Publication.of(publication).mutation_token
                if request.mutation_token != token:
                    raise fail(
                        ErrorCode.ARTIFACT_CONFLICT,
                        "replacing a published path needs its current mutation_token",
                    )
            elif request.mutation_token is not None:
                raise fail(ErrorCode.ARTIFACT_CONFLICT, "the path has no publication to replace")
            reservation = Reservation(
                tenant_id=scope.tenant_id,
                project_id=scope.project_id,
                reservation_id=self.ids.new_id("res"),
                command_id=command_id,
                fingerprint=fp,
                actor_id=caller.actor_id,
                path=request.path,
                artifact_id=artifact_id,
                generation=self.ids.new_id("gen"),
                size_bytes=request.size_bytes,
                content_type=request.content_type,
                sha256=request.sha256,
                base_revision=base,
                state=State.RESERVED,
                created_at_ms=now,
                expires_at_ms=rights.bounded(now + request.ttl_ms),
            )
            tx.put_artifact_reservation(reservation)
            return reservation, False, None

        reservation, replayed, _ = self.store.transaction(run)
        if not replayed:
            crash_point("after_reservation")
        return reservation, replayed

    def _expire(self, tx: WriteTx, r: Reservation) -> None:
        """Settle an expired live reservation and queue its generation (ART-7)."""
        tx.put_artifact_reservation(r.settled(State.EXPIRED, r.expires_at_ms))
        tx.put_gc_intent(
            intent_for(r, "expired", r.expires_at_ms + SETTLEMENT_GRACE_MS, self.clock.now_ms())
        )

    def _take_over(self, tx: WriteTx, r: Reservation, now: int) -> None:
        """Settle another party's live reservation as aborted, as an abort would (ART-5)."""
        tx.put_artifact_reservation(r.settled(State.ABORTED, now))
        not_before = max(now, r.expires_at_ms) + SETTLEMENT_GRACE_MS
        tx.put_gc_intent(intent_for(r, "taken_over", not_before, now))

    def _fail(self, scope: Scope, reservation_id: str, reason: str) -> None:
        """Settle a live reservation as failed and queue its generation, in one transaction."""
        now = self.clock.now_ms()

        def run(tx: WriteTx) -> None:
            r = tx.get_artifact_reservation(scope, reservation_id)
            if r is None or not r.live:
                return
            tx.put_artifact_reservation(r.settled(State.FAILED, now))
            tx.put_gc_intent(intent_for(r, reason, now + self._settle_ms(), now))

        self.store.transaction(run)

    # -- upload (ART-3) -------------------------------------------------------------------

    def _writable(self, caller: Caller, project_id: str, reservation_id: str) -> Reservation:
        scope = caller.scope(project_id)

        def run(tx: ReadTx) -> Reservation:
            authorize(tx, caller, project_id, write=True)
            return _owned(tx.get_artifact_reservation(scope, reservation_id), caller)

        found: Reservation = self.store.read(run)
        return found

    def upload(
        self,
        caller: Caller,
        project_id: str,
        reservation_id: str,
        length: int | None,
        chunks: Iterator[bytes],
    ) -> dict[str, Any]:
        """Stream the reservation's exact bytes into the body store (ART-3)."""
        r = self.upload_begin(caller, project_id, reservation_id, length)
        bodies = self._bodies()
        digest = hashlib.sha256()
        size, stored_sha = bodies.create(r.generation, hashing(chunks, digest), r.size_bytes)
        return self.upload_end(caller, r, size, stored_sha, digest.hexdigest())

    def upload_begin(
        self, caller: Caller, project_id: str, reservation_id: str, length: int | None
    ) -> Reservation:
        """The checks before an upload's first byte is stored: the reservation to write."""
        validate_id(reservation_id, "reservation_id")
        r = self._writable(caller, project_id, reservation_id)
        if length is None:
            raise fail(ErrorCode.LENGTH_REQUIRED, "the body upload needs a Content-Length")
        problem = not_live(r, self.clock.now_ms())
        if problem is not None and r.state != State.PUBLISHED:  # an exact retry after it
            raise problem
        if length != r.size_bytes:
            raise fail(
                ErrorCode.ARTIFACT_BODY_MISMATCH,
                f"Content-Length {length} is not the reserved size_bytes {r.size_bytes}",
            )
        return r

    def upload_end(
        self, caller: Caller, r: Reservation, size: int, stored_sha: str, sent_sha: str
    ) -> dict[str, Any]:
        """After the body store's create: `stored_sha` is what is stored under the
        generation now, `sent_sha` what this upload sent."""
        reservation_id = r.reservation_id
        scope = caller.scope(r.project_id)
        if stored_sha != sent_sha:
            # A body is already stored under this generation and these bytes differ from it.
            raise fail(ErrorCode.ARTIFACT_CONFLICT, "a different body was uploaded already")
        answer = {"reservation_id": reservation_id, "size_bytes": size, "sha256": sent_sha}
        if r.state == State.PUBLISHED:
            return answer
        if r.sha256 is not None and sent_sha != r.sha256:
            self._fail(scope, reservation_id, "digest_mismatch")
            raise fail(ErrorCode.ARTIFACT_BODY_MISMATCH, "the body's SHA-256 is not the reserved")
        crash_point("after_upload")
        now = self.clock.now_ms()

        def run(tx: WriteTx) -> AidememoError | None:
            current = tx.get_artifact_reservation(scope, reservation_id)
            if current is not None:
                _owned(current, caller)
            if current is None:
                late = r
            else:
                late = current
                why = not_live(current, now)
                if why is None:
                    if current.state == State.RESERVED:
                        tx.put_artifact_reservation(replace(current, state=State.UPLOADED))
                    return None
            # A late upload (after abort, expiry or pruning): its body is queued again, so
            # a GC that ran before it finished cannot leave it behind (ART-7).
            tx.put_gc_intent(intent_for(late, "late_upload", now + self._settle_ms(), now))
            return not_live(late, now) or fail(
                ErrorCode.ARTIFACT_RESERVATION_EXPIRED, "the reservation has expired"
            )

        error = self.store.transaction(run)
        if error is not None:
            raise error
        return answer

    # -- publish (ART-4) ------------------------------------------------------------------

    def publish(
        self, caller: Caller, project_id: str, reservation_id: str, command_id: object
    ) -> tuple[dict[str, Any], bool]:
        """Verify the stored bytes, recheck, publish atomically; `(reference, replayed)`."""
        begun = self.publish_begin(caller, project_id, reservation_id, command_id)
        if not isinstance(begun, Reservation):
            return begun
        # The trusted observation: the stored bytes, re-hashed (ART-4), or a body store's own
        # verified checksum (GRANT-3).
        bodies = self._bodies()
        observe = getattr(bodies, "observe", None)
        if observe is not None:
            seen_by_store: tuple[int, str] | None = observe(begun.generation)
            if seen_by_store is None:
                raise fail(ErrorCode.ARTIFACT_BODY_MISMATCH, "no body has been uploaded yet")
            crash_point("during_verification")
            return self.publish_end(caller, begun, str(command_id), *seen_by_store)
        size = bodies.head(begun.generation)
        if size is None:
            raise fail(ErrorCode.ARTIFACT_BODY_MISMATCH, "no body has been uploaded yet")
        crash_point("during_verification")
        digest = hashlib.sha256()
        seen = 0
        for chunk in bodies.read(begun.generation):
            seen += len(chunk)
            digest.update(chunk)
        if seen != size:
            size = seen
        return self.publish_end(caller, begun, str(command_id), size, digest.hexdigest())

    def publish_begin(
        self, caller: Caller, project_id: str, reservation_id: str, command_id: object
    ) -> tuple[dict[str, Any], bool] | Reservation:
        """The checks before the observation: a replay's answer, or the live reservation."""
        validate_id(reservation_id, "reservation_id")
        command_id = validate_id(command_id, "command_id")
        scope = caller.scope(project_id)

        def look(tx: ReadTx) -> tuple[Reservation | None, Receipt | None]:
            authorize(tx, caller, project_id, write=True)
            return (
                tx.get_artifact_reservation(scope, reservation_id),
                tx.get_receipt(scope, command_id),
            )

        r, receipt = self.store.read(look)
        if receipt is not None:
            return self._replay(caller, scope, receipt, reservation_id), True
        r = _owned(r, caller)
        problem = not_live(r, self.clock.now_ms())
        if problem is not None:
            raise problem
        return r

    def publish_end(
        self, caller: Caller, r: Reservation, command_id: str, size: int, sha: str
    ) -> tuple[dict[str, Any], bool]:
        """Publish `r` on the observation `(size, sha)` of its stored bytes (ART-4)."""
        scope = caller.scope(r.project_id)
        if size != r.size_bytes or (r.sha256 not in (None, sha)):
            self._fail(scope, r.reservation_id, "verification_failed")
            raise fail(ErrorCode.ARTIFACT_BODY_MISMATCH, "the stored body is not the reserved one")
        payload: JsonValue = {"reservation_id": r.reservation_id}
        fp = fingerprint(r.project_id, "artifact.publish", r.artifact_id, payload)
        outcome = self._commit_publication(caller, scope, r, command_id, fp, sha)
        crash_point("after_metadata_commit")
        return outcome

    def _commit_publication(
        self, caller: Caller, scope: Scope, r: Reservation, command_id: str, fp: str, sha: str
    ) -> tuple[dict[str, Any], bool]:
        ref = ResourceRef(ARTIFACT_KIND, r.artifact_id)
        call = caller.command_call(scope.project_id, command_id, ref)
        committed: list[int] = []

        def run(tx: WriteTx) -> tuple[dict[str, Any] | AidememoError, bool]:
            committed.clear()
            start = tx.begin_command(call)
            project = check_access(start.project, start.membership, write=True)
            if start.receipt is not None:
                stored = start.receipt
                if stored.actor_id != caller.actor_id or stored.fingerprint != fp:
                    raise fail(
                        ErrorCode.COMMAND_CONFLICT, "command_id was used for another command"
                    )
                return self._reference(tx, scope, stored), True
            now = self.clock.now_ms()
            current = _owned(tx.get_artifact_reservation(scope, r.reservation_id), caller)
            why = not_live(current, now)
            if why is not None:
                if current.live:  # expired: settle it now, with its intent (ART-7)
                    self._expire(tx, current)
                return why, False
            revision = 0 if start.current is None else start.current.revision
            if revision != current.base_revision:
                # Lost compare-and-swap: the path moved since the reservation (ART-4).
                tx.put_artifact_reservation(current.settled(State.FAILED, now))
                tx.put_gc_intent(intent_for(current, "lost_cas", now + self._settle_ms(), now))
                return fail(
                    ErrorCode.ARTIFACT_CONFLICT, "the path changed since reservation"
                ), False
            old = None
            if start.current is not None and start.current.body is not None:
                old = Publication.of(start.current.body)
            pub = self._publication(tx, scope, current, sha)
            receipt = Receipt(
                command_id=command_id,
                fingerprint=fp,
                tenant_id=scope.tenant_id,
                project_id=scope.project_id,
                actor_id=caller.actor_id,
                project_seq=project.head_seq + 1,
                resource=ref,
                revision=revision + 1,
                committed_at_ms=now,
            )
            tx.commit_mutation(
                Mutation(
                    receipt=receipt,
                    project_epoch=project.project_epoch,
                    operation="artifact.publish",
                    op=ChangeOp.UPSERT,
                    body=pub.body(),
                )
            )
            tx.put_artifact_reservation(current.settled(State.PUBLISHED, now))
            if old is not None and old.generation != pub.generation:
                replaced = tx.artifact_reservation_by_generation(old.generation)
                tx.put_gc_intent(
                    intent_for(
                        replaced or orphan(scope, old),
                        "replaced",
                        now + self._settle_ms(),
                        now,
                    )
                )
            committed.append(receipt.project_seq)
            return pub.to_json(receipt.revision, receipt.project_seq), False

        answer, replayed = self.store.transaction(run)
        if isinstance(answer, AidememoError):
            raise answer
        for seq in committed:
            self.ledger.announce(scope, seq)
        return answer, replayed

    def _publication(self, tx: WriteTx, scope: Scope, r: Reservation, sha: str) -> Publication:
        sender = receiver = None
        handoff = handoff_of(r.path)
        if handoff is not None:
            res = tx.get_resource(scope, ResourceRef("handoff", handoff))
            pair = participants(None if res is None else res.body)
            if pair is None:
                raise fail(ErrorCode.INVALID_ARTIFACT_PATH, "the path names no handoff")
            sender, receiver = pair
        return Publication(
            artifact_id=r.artifact_id,
            path=r.path,
            size_bytes=r.size_bytes,
            content_type=r.content_type,
            sha256=sha,
            generation=r.generation,
            mutation_token=self.ids.new_id("mt"),
            reservation_id=r.reservation_id,
            from_actor=sender,
            to_actor=receiver,
        )

    def _reference(self, tx: ReadTx, scope: Scope, receipt: Receipt) -> dict[str, Any]:
        body = tx.get_artifact_revision(scope, receipt.resource.id, receipt.revision)
        if body is None:
            raise fail(ErrorCode.COMMAND_CONFLICT, "command_id was used for another command")
        return Publication.of(body).to_json(receipt.revision, receipt.project_seq)

    def _replay(
        self, caller: Caller, scope: Scope, receipt: Receipt, reservation_id: str
    ) -> dict[str, Any]:
        payload: JsonValue = {"reservation_id": reservation_id}
        fp = fingerprint(scope.project_id, "artifact.publish", receipt.resource.id, payload)
        if (
            receipt.actor_id != caller.actor_id
            or receipt.fingerprint != fp
            or receipt.resource.kind != ARTIFACT_KIND
        ):
            raise fail(ErrorCode.COMMAND_CONFLICT, "command_id was used for another command")
        found: dict[str, Any] = self.store.read(lambda tx: self._reference(tx, scope, receipt))
        return found

    # -- abort (ART-5) --------------------------------------------------------------------

    def abort(self, caller: Caller, project_id: str, reservation_id: str) -> dict[str, Any]:
        """Abort a live reservation (idempotent); the published path is unchanged."""
        validate_id(reservation_id, "reservation_id")
        scope = caller.scope(project_id)

        def run(tx: WriteTx) -> Reservation:
            authorize(tx, caller, project_id, write=True)
            r = _owned(tx.get_artifact_reservation(scope, reservation_id), caller)
            if r.state == State.PUBLISHED:
                raise fail(ErrorCode.ARTIFACT_CONFLICT, "the reservation is published already")
            if not r.live:
                return r
            now = self.clock.now_ms()
            settled = r.settled(State.ABORTED, now)
            tx.put_artifact_reservation(settled)
            # An upload may still land until the reservation's expiry (ART-7).
            not_before = max(now, r.expires_at_ms) + SETTLEMENT_GRACE_MS
            tx.put_gc_intent(intent_for(r, "aborted", not_before, now))
            return settled

        r: Reservation = self.store.transaction(run)
        return {"reservation_id": r.reservation_id, "state": r.state}

    # -- reads (ART-6) --------------------------------------------------------------------

    def find_reservation(
        self, caller: Caller, project_id: str, command_id: str
    ) -> Reservation | None:
        """The caller's reservation made by `command_id`, or None (writers only)."""
        scope = caller.scope(project_id)

        def run(tx: ReadTx) -> Reservation | None:
            authorize(tx, caller, project_id, write=True)
            found = tx.find_artifact_reservation(scope, command_id)
            return found if found is not None and found.actor_id == caller.actor_id else None

        result: Reservation | None = self.store.read(run)
        return result

    def current_token(self, caller: Caller, project_id: str, path: object) -> str | None:
        """The mutation token of the path's current publication, or None."""
        try:
            return str(self.resolve(caller, project_id, path)["mutation_token"])
        except AidememoError as exc:
            if exc.code is ErrorCode.ARTIFACT_NOT_FOUND:
                return None
            raise

    def resolve(self, caller: Caller, project_id: str, path: object) -> dict[str, Any]:
        """The current publication of a path."""
        path = validate_path(path)
        scope = caller.scope(project_id)

        def run(tx: ReadTx) -> dict[str, Any]:
            authorize(tx, caller, project_id, write=False)
            revision, pub = current_publication(tx, scope, artifact_id_of(path))
            if pub is None or not pub.visible_to(caller.actor_id):
                raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "nothing is published at this path")
            return pub.to_json(revision)

        found: dict[str, Any] = self.store.read(run)
        return found

    def download(
        self, caller: Caller, project_id: str, artifact_id: str, revision: object
    ) -> tuple[Publication, Iterator[bytes]]:
        """The exact revision's metadata and its bytes, streamed."""
        pub = self.download_meta(caller, project_id, artifact_id, revision)
        bodies = self._bodies()
        if bodies.head(pub.generation) != pub.size_bytes:
            raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "this revision's body is gone")
        return pub, bodies.read(pub.generation)

    def download_meta(
        self, caller: Caller, project_id: str, artifact_id: str, revision: object
    ) -> Publication:
        """The publication of the exact revision the caller may read (ART-6, VIS-2)."""
        validate_id(artifact_id, "artifact_id")
        if type(revision) is not int or revision < 1:
            raise fail(ErrorCode.INVALID_COMMAND, "revision must be a positive integer")
        scope = caller.scope(project_id)
        rev: int = revision

        def run(tx: ReadTx) -> Publication:
            authorize(tx, caller, project_id, write=False)
            current, pub = current_publication(tx, scope, artifact_id)
            if rev != current:
                body = tx.get_artifact_revision(scope, artifact_id, rev)
                pub = None if body is None else Publication.of(body)
            if pub is None or not pub.visible_to(caller.actor_id):
                raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "no such artifact revision")
            return pub

        found: Publication = self.store.read(run)
        return found


def _owned(r: Reservation | None, caller: Caller) -> Reservation:
    """The reservation when the caller made it; another actor's answers as a missing one,
    so a reservation id is no bearer key (ART-13)."""
    if r is None or r.actor_id != caller.actor_id:
        raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "no such reservation")
    return r
