"""The artifact catalog's row mapping, written once for SQLite and PostgreSQL (SPEC.md ART-*).

Mixed into both SQL stores' transaction classes beside `SqlReadRows`/`SqlWriteRows`; the
statements are written with `?` and rendered for the class's dialect (`_d.name`). The tables
are `artifact_reservations` (tenant data, counted and deleted with the tenant, ARC-4),
`artifact_gc_intents` (keyed by body-store key, outside tenant scope) and
`artifact_catalog` (the pinned body-store identity, ART-8); each store's migration creates
them (SQLite schema 6, PostgreSQL schema 7).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, replace
from typing import Any, ClassVar, Generic, TypeVar

from aidememo.domain.artifacts import ARTIFACT_KIND, GcIntent, Publication, Reservation
from aidememo.domain.model import Scope
from aidememo.stores.sql_common.dialect import Dialect
from aidememo.stores.sql_common.rows import RowExecutor

_R_COLUMNS = (
    "tenant_id, project_id, reservation_id, command_id, fingerprint, actor_id, path, "
    "artifact_id, generation, size_bytes, content_type, sha256, base_revision, state, "
    "created_at_ms, expires_at_ms, settled_at_ms"
)
_I_COLUMNS = (
    "body_key, tenant_id, project_id, artifact_id, reason, not_before_ms, attempts, "
    "last_error, leased_until_ms, created_at_ms"
)
_LIVE = "state IN ('reserved', 'uploaded')"


class ArtifactSql:
    """The catalog's statements in one placeholder style."""

    def __init__(self, placeholder: str, skip_locked: str) -> None:
        def r(sql: str) -> str:
            return sql.replace("?", placeholder)

        select = f"SELECT {_R_COLUMNS} FROM artifact_reservations "
        self.GET = r(select + "WHERE tenant_id = ? AND project_id = ? AND reservation_id = ?")
        self.BY_COMMAND = r(select + "WHERE tenant_id = ? AND project_id = ? AND command_id = ?")
        self.LIVE = r(
            select + f"WHERE tenant_id = ? AND project_id = ? AND artifact_id = ? AND {_LIVE} "
            "ORDER BY reservation_id"
        )
        self.BY_GENERATION = r(select + "WHERE generation = ?")
        self.EXPIRED = r(
            select + f"WHERE {_LIVE} AND expires_at_ms <= ? "
            "ORDER BY expires_at_ms, tenant_id, project_id, reservation_id LIMIT ?"
        )
        self.REVISION = r(
            "SELECT body FROM changes WHERE tenant_id = ? AND project_id = ? AND kind = ? "
            "AND resource_id = ? AND revision = ?"
        )
        self.TENANT_RESERVED = r(
            "SELECT project_id, artifact_id, generation FROM artifact_reservations "
            "WHERE tenant_id = ?"
        )
        self.TENANT_PUBLISHED = r(
            "SELECT project_id, resource_id, body FROM resources WHERE tenant_id = ? "
            "AND kind = ? AND body IS NOT NULL"
        )
        self.PUT = r(
            f"INSERT INTO artifact_reservations ({_R_COLUMNS}) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, project_id, reservation_id) DO UPDATE SET "
            "state = excluded.state, settled_at_ms = excluded.settled_at_ms"
        )
        self.PRUNE_PICK = r(
            "SELECT tenant_id, project_id, reservation_id FROM artifact_reservations "
            "WHERE settled_at_ms IS NOT NULL AND settled_at_ms <= ? "
            "ORDER BY settled_at_ms LIMIT ?"
        )
        self.DELETE = r(
            "DELETE FROM artifact_reservations "
            "WHERE tenant_id = ? AND project_id = ? AND reservation_id = ?"
        )
        self.GET_INTENT = r(f"SELECT {_I_COLUMNS} FROM artifact_gc_intents WHERE body_key = ?")
        self.PUT_INTENT = r(
            f"INSERT INTO artifact_gc_intents ({_I_COLUMNS}) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (body_key) DO NOTHING"
        )
        self.DUE = r(
            f"SELECT {_I_COLUMNS} FROM artifact_gc_intents "
            "WHERE not_before_ms <= ? AND leased_until_ms <= ? "
            "ORDER BY not_before_ms, body_key LIMIT ?" + skip_locked
        )
        self.UPDATE_INTENT = r(
            "UPDATE artifact_gc_intents SET attempts = ?, last_error = ?, not_before_ms = ?, "
            "leased_until_ms = ? WHERE body_key = ?"
        )
        self.DELETE_INTENT = r("DELETE FROM artifact_gc_intents WHERE body_key = ?")
        self.DUE_AT = (
            f"SELECT min(expires_at_ms) FROM artifact_reservations WHERE {_LIVE} UNION ALL "
            "SELECT min(CASE WHEN leased_until_ms > not_before_ms THEN leased_until_ms "
            "ELSE not_before_ms END) FROM artifact_gc_intents"
        )
        self.COUNT_INTENTS = r(
            "SELECT count(*) FROM (SELECT 1 FROM artifact_gc_intents LIMIT ?) AS queued"
        )
        self.GET_IDENTITY = r("SELECT value FROM artifact_catalog WHERE name = ?")
        self.BIND_IDENTITY = r(
            "INSERT INTO artifact_catalog (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"
        )


_SQL = {
    "sqlite": ArtifactSql("?", ""),
    "postgres": ArtifactSql("%s", " FOR UPDATE SKIP LOCKED"),
}


def _reservation(row: Sequence[Any]) -> Reservation:
    return Reservation(*row)


def _intent(row: Sequence[Any]) -> GcIntent:
    return GcIntent(*row)


X = TypeVar("X", bound=RowExecutor)


class ArtifactRows(Generic[X]):
    """`ArtifactReads` and `ArtifactWrites` over `self._x` in the dialect `self._d`."""

    __slots__ = ()
    _x: X
    _d: ClassVar[Dialect]

    @property
    def _as(self) -> ArtifactSql:
        return _SQL[self._d.name]

    # -- reads ----------------------------------------------------------------------------

    def _one(self, sql: str, params: Sequence[Any]) -> Reservation | None:
        rows = self._x.execute(sql, params)
        return _reservation(rows[0]) if rows else None

    def get_artifact_reservation(self, scope: Scope, reservation_id: str) -> Reservation | None:
        return self._one(self._as.GET, (scope.tenant_id, scope.project_id, reservation_id))

    def find_artifact_reservation(self, scope: Scope, command_id: str) -> Reservation | None:
        return self._one(self._as.BY_COMMAND, (scope.tenant_id, scope.project_id, command_id))

    def live_artifact_reservations(self, scope: Scope, artifact_id: str) -> list[Reservation]:
        rows = self._x.execute(self._as.LIVE, (scope.tenant_id, scope.project_id, artifact_id))
        return [_reservation(row) for row in rows]

    def artifact_reservation_by_generation(self, generation: str) -> Reservation | None:
        return self._one(self._as.BY_GENERATION, (generation,))

    def expired_artifact_reservations(self, now_ms: int, limit: int) -> list[Reservation]:
        return [_reservation(row) for row in self._x.execute(self._as.EXPIRED, (now_ms, limit))]

    def get_artifact_revision(self, scope: Scope, artifact_id: str, revision: int) -> bytes | None:
        params = (scope.tenant_id, scope.project_id, ARTIFACT_KIND, artifact_id, revision)
        rows = self._x.execute(self._as.REVISION, params)
        return self._d.blob(rows[0][0]) if rows else None

    def list_artifact_generations(self, tenant_id: str) -> list[tuple[str, str, str]]:
        out: list[tuple[str, str, str]] = [
            (p, a, g) for p, a, g in self._x.execute(self._as.TENANT_RESERVED, (tenant_id,))
        ]
        for p, rid, body in self._x.execute(self._as.TENANT_PUBLISHED, (tenant_id, ARTIFACT_KIND)):
            blob = self._d.blob(body)
            if blob is not None:
                out.append((p, rid, Publication.of(blob).generation))
        return out

    def get_gc_intent(self, body_key: str) -> GcIntent | None:
        rows = self._x.execute(self._as.GET_INTENT, (body_key,))
        return _intent(rows[0]) if rows else None

    def body_store_identity(self) -> str | None:
        rows = self._x.execute(self._as.GET_IDENTITY, ("body_store",))
        return str(rows[0][0]) if rows else None

    def artifact_due_ms(self) -> int | None:
        times = [int(t) for (t,) in self._x.execute(self._as.DUE_AT) if t is not None]
        return min(times) if times else None

    def count_gc_intents(self, limit: int) -> int:
        return int(self._x.execute(self._as.COUNT_INTENTS, (limit,))[0][0])

    # -- writes ---------------------------------------------------------------------------

    def put_artifact_reservation(self, reservation: Reservation) -> None:
        r = reservation
        self._x.execute(
            self._as.PUT,
            (
                r.tenant_id,
                r.project_id,
                r.reservation_id,
                r.command_id,
                r.fingerprint,
                r.actor_id,
                r.path,
                r.artifact_id,
                r.generation,
                r.size_bytes,
                r.content_type,
                r.sha256,
                r.base_revision,
                r.state,
                r.created_at_ms,
                r.expires_at_ms,
                r.settled_at_ms,
            ),
        )

    def put_gc_intent(self, intent: GcIntent) -> None:
        # The statement's columns are the intent's fields, in their order.
        self._x.execute(self._as.PUT_INTENT, astuple(intent))

    def lease_gc_intents(self, now_ms: int, lease_until_ms: int, limit: int) -> list[GcIntent]:
        due = [_intent(row) for row in self._x.execute(self._as.DUE, (now_ms, now_ms, limit))]
        leased: list[GcIntent] = []
        for i in due:
            self._x.execute(
                self._as.UPDATE_INTENT,
                (i.attempts, i.last_error, i.not_before_ms, lease_until_ms, i.body_key),
            )
            leased.append(replace(i, leased_until_ms=lease_until_ms))
        return leased

    def update_gc_intent(self, intent: GcIntent) -> None:
        i = intent
        self._x.execute(
            self._as.UPDATE_INTENT,
            (i.attempts, i.last_error, i.not_before_ms, i.leased_until_ms, i.body_key),
        )

    def delete_gc_intent(self, body_key: str) -> None:
        self._x.execute(self._as.DELETE_INTENT, (body_key,))

    def prune_artifact_reservations(self, cutoff_ms: int, limit: int) -> int:
        picked = self._x.execute(self._as.PRUNE_PICK, (cutoff_ms, limit))
        for t, p, rid in picked:
            self._x.execute(self._as.DELETE, (t, p, rid))
        return len(picked)

    def bind_body_store_identity(self, identity: str) -> None:
        self._x.execute(self._as.BIND_IDENTITY, ("body_store", identity))
