"""The artifact catalog of the in-memory reference store (SPEC.md ART-*).

Mixed into the store's transaction view: its tables are `ArtifactTables`, reached as
`self._t.artifacts`, and every write goes through the view's journaled `_set`/`_pop`, so a
callback that raises leaves no trace here either (STORE-1).
"""

from __future__ import annotations

from dataclasses import replace

from aidememo.domain.artifacts import ARTIFACT_KIND, GcIntent, Publication, Reservation
from aidememo.domain.model import ChangeRecord, Scope, StoredResource
from aidememo.stores.in_memory_tables import ArtifactTables, JournaledView


class InMemoryArtifactTx(JournaledView):
    """`ArtifactReads` and `ArtifactWrites` over the reference store's tables."""

    @property
    def _a(self) -> ArtifactTables:
        return self._t.artifacts

    # -- reads ----------------------------------------------------------------------------

    def get_artifact_reservation(self, scope: Scope, reservation_id: str) -> Reservation | None:
        return self._a.reservations.get((scope.tenant_id, scope.project_id, reservation_id))

    def find_artifact_reservation(self, scope: Scope, command_id: str) -> Reservation | None:
        for (t, p, _), r in self._a.reservations.items():
            if (t, p) == (scope.tenant_id, scope.project_id) and r.command_id == command_id:
                return r
        return None

    def live_artifact_reservations(self, scope: Scope, artifact_id: str) -> list[Reservation]:
        found = [
            r
            for (t, p, _), r in self._a.reservations.items()
            if (t, p) == (scope.tenant_id, scope.project_id)
            and r.artifact_id == artifact_id
            and r.live
        ]
        return sorted(found, key=lambda r: r.reservation_id)

    def artifact_reservation_by_generation(self, generation: str) -> Reservation | None:
        for r in self._a.reservations.values():
            if r.generation == generation:
                return r
        return None

    def expired_artifact_reservations(self, now_ms: int, limit: int) -> list[Reservation]:
        due = [r for r in self._a.reservations.values() if r.live and r.expires_at_ms <= now_ms]
        due.sort(key=lambda r: (r.expires_at_ms, r.tenant_id, r.project_id, r.reservation_id))
        return due[:limit]

    def get_artifact_revision(self, scope: Scope, artifact_id: str, revision: int) -> bytes | None:
        rows: list[ChangeRecord] = self._t.changes.get((scope.tenant_id, scope.project_id), [])
        for row in rows:
            if (
                row.ref.kind == ARTIFACT_KIND
                and row.ref.id == artifact_id
                and row.revision == revision
            ):
                body: bytes | None = row.body
                return body
        return None

    def list_artifact_generations(self, tenant_id: str) -> list[tuple[str, str, str]]:
        out = [
            (r.project_id, r.artifact_id, r.generation)
            for (t, _, _), r in self._a.reservations.items()
            if t == tenant_id
        ]
        resources: dict[tuple[str, str], dict[tuple[str, str], StoredResource]]
        resources = self._t.resources
        for (t, p), rows in resources.items():
            if t != tenant_id:
                continue
            for (kind, rid), res in rows.items():
                if kind == ARTIFACT_KIND and res.body is not None:
                    out.append((p, rid, Publication.of(res.body).generation))
        return out

    def get_gc_intent(self, body_key: str) -> GcIntent | None:
        return self._a.intents.get(body_key)

    def body_store_identity(self) -> str | None:
        return self._a.identity.get("body_store")

    def artifact_due_ms(self) -> int | None:
        times = [r.expires_at_ms for r in self._a.reservations.values() if r.live]
        times += [max(i.not_before_ms, i.leased_until_ms) for i in self._a.intents.values()]
        return min(times) if times else None

    def count_gc_intents(self, limit: int) -> int:
        return min(len(self._a.intents), limit)

    # -- writes ---------------------------------------------------------------------------

    def put_artifact_reservation(self, reservation: Reservation) -> None:
        r = reservation
        self._set(self._a.reservations, (r.tenant_id, r.project_id, r.reservation_id), r)

    def put_gc_intent(self, intent: GcIntent) -> None:
        if intent.body_key not in self._a.intents:
            self._set(self._a.intents, intent.body_key, intent)

    def lease_gc_intents(self, now_ms: int, lease_until_ms: int, limit: int) -> list[GcIntent]:
        due = [
            i
            for i in self._a.intents.values()
            if i.not_before_ms <= now_ms and i.leased_until_ms <= now_ms
        ]
        due.sort(key=lambda i: (i.not_before_ms, i.body_key))
        leased = [replace(i, leased_until_ms=lease_until_ms) for i in due[:limit]]
        for intent in leased:
            self._set(self._a.intents, intent.body_key, intent)
        return leased

    def update_gc_intent(self, intent: GcIntent) -> None:
        if intent.body_key in self._a.intents:
            self._set(self._a.intents, intent.body_key, intent)

    def delete_gc_intent(self, body_key: str) -> None:
        if body_key in self._a.intents:
            self._pop(self._a.intents, body_key)

    def prune_artifact_reservations(self, cutoff_ms: int, limit: int) -> int:
        keys = [
            k
            for k, r in self._a.reservations.items()
            if r.settled_at_ms is not None and r.settled_at_ms <= cutoff_ms
        ][:limit]
        for key in keys:
            self._pop(self._a.reservations, key)
        return len(keys)

    def bind_body_store_identity(self, identity: str) -> None:
        if "body_store" not in self._a.identity:
            self._set(self._a.identity, "body_store", identity)

    # -- tenant rows (ARC-4) --------------------------------------------------------------

    def _artifact_tenant_count(self, tenant_id: str) -> int:
        return sum(1 for (t, _, _) in self._a.reservations if t == tenant_id)

    def _artifact_tenant_delete(self, tenant_id: str) -> None:
        for key in [k for k in self._a.reservations if k[0] == tenant_id]:
            self._pop(self._a.reservations, key)
