"""An exact-read replica of one member's view of a project, in a SQLite file (SPEC.md REPLICA-1..6).

A replica holds every resource its actor may see (VIS-1), each with its exact body or
tombstone and revision, and the feed cursor (`after_seq`) those bodies are current at. It is
pinned to the tenant, project, project epoch and actor it was first filled for; a mismatch of
any of them is refused (`ReplicaMismatch`) until the replica is reset, so a replica never
mixes two projects, two epochs or two actors' views.

Filling it is atomic: `bootstrap` writes every page of one snapshot (SNAP-1, all at one
`at_seq`) and the cursor in one transaction; `apply` checks a `/changes/materialized` batch
(or a live-feed batch, the same shape: LIVE-2) completely before it writes anything, then
writes its resources and the new cursor in one transaction. A batch that does not continue the
cursor, names another scope or epoch, or carries an entry that does not match its own change
is refused whole (`ReplicaInvalid`) and the cursor stays where it was.

Reads (`get`, `status`, `search`) touch only the file: they work with no server. The file
and its directory are created 0600 and 0700. Only the stdlib's `sqlite3` is used.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from aidememo.client.models import Identity, MaterializedBatch, Resource, Snapshot
from aidememo.client.private_file import PrivateFile
from aidememo.client.replica_semantic import VECTORS_TABLE, LocalEmbedder

FORMAT = "2"
"""The replica file's format: 2 pins the actor (a format-1 file pinned only the project)."""

PIN_FIELDS = ("tenant_id", "project_id", "project_epoch", "actor_id")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS resources (kind TEXT NOT NULL, id TEXT NOT NULL, "
    "revision INTEGER NOT NULL, state TEXT NOT NULL, body TEXT, seq INTEGER NOT NULL, "
    "PRIMARY KEY (kind, id))",
    VECTORS_TABLE,  # the local model's vectors of the facts (SEM-9)
)


class ReplicaError(Exception):
    """A replica refused an operation; `message` says why and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ReplicaMismatch(ReplicaError):
    """The replica is pinned to another tenant/project (`scope`), `epoch` or `actor`."""

    def __init__(self, what: str, cached: str | None, found: str) -> None:
        shown = cached if cached is not None else "none"
        super().__init__(
            f"replica {what} mismatch: the replica holds {shown}, this is {found}; "
            "nothing was changed (reset it to start again: aidememo replica reset --force)"
        )
        self.what = what
        self.cached = cached
        self.found = found


class ReplicaInvalid(ReplicaError):
    """A batch or snapshot that cannot be applied; the replica is unchanged."""


@dataclass(frozen=True)
class Cached:
    """One cached resource and the cursor the replica is current at."""

    kind: str
    id: str
    revision: int
    state: str
    body: Any
    seq: int
    after_seq: int
    project_epoch: str

    def document(self) -> dict[str, Any]:
        return {
            "resource": {"kind": self.kind, "id": self.id},
            "revision": self.revision,
            "state": {"state": self.state, "body": self.body},
            "cached_at_seq": self.seq,
            "cursor": {"project_epoch": self.project_epoch, "after_seq": self.after_seq},
        }


class Replica(PrivateFile):
    """One replica file."""

    SCHEMA = _SCHEMA

    # -- the pin ------------------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        return dict(self._conn.execute("SELECT key, value FROM meta").fetchall())

    @property
    def bootstrapped(self) -> bool:
        return "after_seq" in self.meta()

    def check(
        self,
        tenant_id: str,
        project_id: str,
        actor_id: str,
        project_epoch: str | None = None,
    ) -> None:
        """Refuse unless the replica is empty or pinned to exactly these (REPLICA-3)."""
        meta = self.meta()
        if not meta:
            return
        scope = f"{meta.get('tenant_id')}/{meta.get('project_id')}"
        if scope != f"{tenant_id}/{project_id}":
            raise ReplicaMismatch("scope", scope, f"{tenant_id}/{project_id}")
        if meta.get("actor_id") != actor_id:
            raise ReplicaMismatch("actor", meta.get("actor_id"), actor_id)
        if project_epoch is not None and meta.get("project_epoch") != project_epoch:
            raise ReplicaMismatch("epoch", meta.get("project_epoch"), project_epoch)

    def check_identity(self, who: Identity) -> None:
        self.check(who.tenant_id, who.project_id, who.actor_id, who.project_epoch)

    def cursor(self) -> int:
        meta = self.meta()
        if "after_seq" not in meta:
            raise ReplicaError("the replica is empty: run aidememo replica pull first")
        return int(meta["after_seq"])

    # -- filling ------------------------------------------------------------------------------

    def bootstrap(self, who: Identity, pages: Iterable[Snapshot]) -> int:
        """Replace everything with the snapshot's pages and pin to `who`; the resources
        written. One transaction: a failure anywhere leaves the replica as it was."""
        rows: list[tuple[str, str, int, str, str | None, int]] = []
        at_seq: int | None = None
        for page in pages:
            if at_seq is None:
                at_seq = page.at_seq
            elif page.at_seq != at_seq:
                raise ReplicaInvalid(f"snapshot page at seq {page.at_seq}, not {at_seq}")
            if page.project_epoch != who.project_epoch or (
                page.scope.tenant_id,
                page.scope.project_id,
            ) != (who.tenant_id, who.project_id):
                raise ReplicaInvalid("a snapshot page of another scope or epoch")
            for resource in page.resources:
                rows.append(_row(resource, page.at_seq))
        if at_seq is None:
            raise ReplicaInvalid("the snapshot had no page")
        meta = {
            "format": FORMAT,
            "tenant_id": who.tenant_id,
            "project_id": who.project_id,
            "project_epoch": who.project_epoch,
            "actor_id": who.actor_id,
            "after_seq": str(at_seq),
            "bootstrapped_at_seq": str(at_seq),
            "pulled_at_ms": str(int(time.time() * 1000)),
        }
        with self._transaction():
            self._conn.execute("DELETE FROM resources")
            self._conn.execute("DELETE FROM meta")
            self._conn.execute("DELETE FROM vectors")
            self._conn.executemany("INSERT INTO resources VALUES (?, ?, ?, ?, ?, ?)", rows)
            self._conn.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        return len(rows)

    def apply(self, batch: MaterializedBatch) -> int:
        """Apply one batch after the cursor; the entries written (REPLICA-2). The whole batch
        is checked first; then its resources and its `next_cursor` commit together."""
        meta = self.meta()
        if "after_seq" not in meta:
            raise ReplicaInvalid("the replica is empty: a batch needs a bootstrap first")
        cursor = int(meta["after_seq"])
        epoch = meta["project_epoch"]
        scope = (meta["tenant_id"], meta["project_id"])
        if (batch.scope.tenant_id, batch.scope.project_id) != scope:
            raise ReplicaInvalid("a batch of another tenant or project")
        if batch.cursor.project_epoch != epoch or batch.next_cursor.project_epoch != epoch:
            raise ReplicaMismatch("epoch", epoch, batch.next_cursor.project_epoch)
        if batch.cursor.after_seq != cursor:
            raise ReplicaInvalid(
                f"a batch after seq {batch.cursor.after_seq} does not continue seq {cursor}"
            )
        last = cursor
        rows = []
        for entry in batch.entries:
            change, resource = entry.change, entry.resource
            if not last < change.seq <= batch.next_cursor.after_seq:
                raise ReplicaInvalid(f"entry seq {change.seq} out of order in the batch")
            if (change.tenant_id, change.project_id) != scope or change.project_epoch != epoch:
                raise ReplicaInvalid(f"entry seq {change.seq} of another scope or epoch")
            if (resource.scope.tenant_id, resource.scope.project_id) != scope:
                raise ReplicaInvalid(f"entry seq {change.seq} materialized in another scope")
            if (resource.resource.kind, resource.resource.id) != (
                change.resource.kind,
                change.resource.id,
            ) or resource.revision != change.revision:
                raise ReplicaInvalid(
                    f"entry seq {change.seq} is materialized as "
                    f"{resource.resource.kind}/{resource.resource.id} r{resource.revision}, "
                    f"not {change.resource.kind}/{change.resource.id} r{change.revision}"
                )
            deleted = resource.state.state == "deleted"
            if deleted != (change.operation == "delete"):
                raise ReplicaInvalid(f"entry seq {change.seq}: state and operation disagree")
            last = change.seq
            rows.append(_row(resource, change.seq))
        if batch.next_cursor.after_seq < cursor:
            raise ReplicaInvalid("a batch whose next cursor goes backwards")
        with self._transaction():
            self._conn.executemany(
                "INSERT INTO resources VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kind, id) DO "
                "UPDATE SET revision = excluded.revision, state = excluded.state, "
                "body = excluded.body, seq = excluded.seq WHERE excluded.revision >= revision",
                rows,
            )
            self._set("after_seq", str(batch.next_cursor.after_seq))
            self._set("pulled_at_ms", str(int(time.time() * 1000)))
        return len(rows)

    def reset(self) -> int:
        """Forget everything, pin included; the resources that were cached."""
        count = self.count()
        with self._transaction():
            self._conn.execute("DELETE FROM resources")
            self._conn.execute("DELETE FROM meta")
            self._conn.execute("DELETE FROM vectors")
        return count

    # -- reading ------------------------------------------------------------------------------

    def count(self) -> int:
        row = self._conn.execute("SELECT count(*) FROM resources").fetchone()
        return int(row[0])

    def get(self, kind: str, resource_id: str) -> Cached | None:
        meta = self.meta()
        row = self._conn.execute(
            "SELECT kind, id, revision, state, body, seq FROM resources WHERE kind = ? AND id = ?",
            (kind, resource_id),
        ).fetchone()
        if row is None:
            return None
        body = json.loads(row[4]) if row[4] is not None else None
        return Cached(
            row[0], row[1], row[2], row[3], body, row[5], int(meta["after_seq"]),
            meta["project_epoch"],
        )  # fmt: skip

    def search(
        self,
        q: str,
        source_id: str | None = None,
        limit: int = 20,
        mode: str = "lexical",
        embedder: Callable[[], LocalEmbedder | None] = lambda: None,
    ) -> dict[str, Any]:
        """Search the cached facts at the cursor (REPLICA-7, SEM-9): the answer of
        `GET .../search?mode=...` at `index_seq`, the replica's cursor. `embedder` gives the
        local model for `semantic`, `hybrid` and `auto` (None: not installed), whose vectors
        of the replica's facts are cached in the file (`aidememo.client.replica_semantic`)."""
        from aidememo.client.replica_semantic import (
            SemanticUnavailable,
            load_facts,
            search_replica,
        )

        cursor = self.cursor()
        facts, entries = load_facts(self._conn)
        try:
            found = search_replica(facts, entries, self._conn, q=q, source_id=source_id,
                                   limit=limit, mode=mode, embedder=embedder)  # fmt: skip
        except (SemanticUnavailable, ValueError) as exc:
            raise ReplicaError(
                f"{exc}: pip install 'aidememo[semantic]', or search --mode lexical "
                "(semantic_unavailable)"
            ) from None
        return {"project_epoch": self.meta().get("project_epoch"), "index_seq": cursor, **found}

    def status(self) -> dict[str, Any]:
        meta = self.meta()
        document: dict[str, Any] = {"path": str(self.path)}
        for key in PIN_FIELDS:
            document[key] = meta.get(key)
        for key in ("after_seq", "bootstrapped_at_seq", "pulled_at_ms"):
            document[key] = int(meta[key]) if key in meta else None
        document["resources"] = self.count()
        return document

    # -- plumbing -----------------------------------------------------------------------------

    def _set(self, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _transaction(self) -> _Transaction:
        return _Transaction(self._conn)


class _Transaction:
    """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` on any exception."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self._conn.execute("COMMIT" if kind is None else "ROLLBACK")


def _row(resource: Resource, seq: int) -> tuple[str, str, int, str, str | None, int]:
    state = resource.state.state
    body = None if state == "deleted" else json.dumps(resource.state.body, ensure_ascii=False)
    return (resource.resource.kind, resource.resource.id, resource.revision, state, body, seq)


@dataclass(frozen=True)
class Pulled:
    """What one `pull` did."""

    bootstrapped: bool
    before_seq: int | None
    after_seq: int
    changes: int
    resources: int

    def document(self) -> dict[str, Any]:
        return asdict(self)


PULL_LIMIT = 1000


def pull(client: Any, replica: Replica, limit: int = PULL_LIMIT) -> Pulled:
    """Bring `replica` up to the server's head as `client`'s member (REPLICA-1, REPLICA-2):
    the paged snapshot into an empty replica, then `/changes/materialized` batches after its
    cursor until none is left, each applied on its own. `client` is an `aidememo.client.Client`;
    its identity is checked against the pin first."""
    who: Identity = client.identity()
    replica.check_identity(who)
    bootstrapped = False
    before: int | None = None
    if replica.bootstrapped:
        before = replica.cursor()
    else:
        replica.bootstrap(who, client.snapshot_pages(limit=limit))
        bootstrapped = True
    changes = 0
    while True:
        batch: MaterializedBatch = client.changes_materialized(
            replica.cursor(), limit=limit, project_epoch=who.project_epoch
        )
        changes += replica.apply(batch)
        if not batch.has_more:
            break
    return Pulled(bootstrapped, before, replica.cursor(), changes, replica.count())
