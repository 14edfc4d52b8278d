"""Logical export, import and tenant deletion (SPEC.md ARC-*).

The export is JSON Lines in canonical JSON: a header, the tenant's actors, projects,
memberships, optional token digests, then per project its resources, changes, receipts and
audit rows, and last a manifest with per-type counts and SHA-256 sums and the SHA-256 of every
byte before it. The format is the same for every backend, so a tenant moves between SQLite,
PostgreSQL and the edge by export and import.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from aidememo.domain.canonical import canonical_bytes, decode_json, decode_stored
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id, validate_name
from aidememo.domain.model import (
    Actor,
    ActorKind,
    AuditRow,
    ChangeOp,
    ChangeRecord,
    HandoffIndexRow,
    History,
    Membership,
    MemberStatus,
    Project,
    Receipt,
    ResourceRef,
    Role,
    Scope,
    SearchDoc,
    StoredResource,
    TokenBinding,
)
from aidememo.domain.tokenize import index_terms
from aidememo.ports import Clock, Ids, ReadTx, Store, WriteTx

FORMAT = "aidememo-export"
FORMAT_VERSION = 1
_PAGE = 10_000
_EVERYTHING = 2**62


@dataclass(frozen=True, slots=True)
class ImportSummary:
    """What an import created: the new epoch of each project and the row counts."""

    tenant_id: str
    epochs: dict[str, str]
    counts: dict[str, int]


def _line(record: dict[str, Any]) -> bytes:
    return canonical_bytes(record) + b"\n"


def _body(raw: bytes | None) -> Any:
    return None if raw is None else decode_stored(raw)


class _Manifest:
    def __init__(self) -> None:
        self.total = hashlib.sha256()
        self.by_type: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def add(self, kind: str, line: bytes) -> bytes:
        self.total.update(line)
        self.by_type.setdefault(kind, hashlib.sha256()).update(line)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return line

    def line(self) -> bytes:
        return _line(
            {
                "type": "manifest",
                "counts": self.counts,
                "sha256": {k: h.hexdigest() for k, h in sorted(self.by_type.items())},
                "lines_sha256": self.total.hexdigest(),
            }
        )


class Archive:
    """Export, import and delete whole tenants or single projects."""

    def __init__(self, store: Store, clock: Clock, ids: Ids) -> None:
        self.store = store
        self.clock = clock
        self.ids = ids

    # -- export ---------------------------------------------------------------------------

    def export_lines(
        self, tenant_id: str, project_id: str | None = None, *, include_tokens: bool = False
    ) -> Iterator[bytes]:
        """The export as lines, read in one consistent view (ARC-1)."""
        validate_id(tenant_id, "tenant_id")
        if project_id is not None:
            validate_id(project_id, "project_id")
        lines = self.store.read(
            lambda tx: list(self._export(tx, tenant_id, project_id, include_tokens))
        )
        yield from lines

    def _export(
        self, tx: ReadTx, tenant_id: str, project_id: str | None, include_tokens: bool
    ) -> Iterator[bytes]:
        if not tx.tenant_exists(tenant_id):
            raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"tenant {tenant_id} not found")
        projects = [p for p in tx.list_projects(tenant_id) if project_id in (None, p.project_id)]
        if project_id is not None and not projects:
            raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"project {project_id} not found")
        members = [m for m in tx.list_memberships(tenant_id) if project_id in (None, m.project_id)]
        member_ids = {m.actor_id for m in members}
        actors = [
            a for a in tx.list_actors(tenant_id) if project_id is None or a.actor_id in member_ids
        ]
        actor_ids = {a.actor_id for a in actors}
        m = _Manifest()
        yield m.add(
            "header",
            _line(
                {
                    "type": "header",
                    "format": FORMAT,
                    "version": FORMAT_VERSION,
                    "tenant_id": tenant_id,
                    "project_id": project_id,
                    "exported_at_ms": self.clock.now_ms(),
                    "token_digests": include_tokens,
                }
            ),
        )
        for a in actors:
            yield m.add("actor", _line({"type": "actor", "actor_id": a.actor_id, "kind": a.kind}))
        for p in projects:
            yield m.add(
                "project",
                _line(
                    {
                        "type": "project",
                        "project_id": p.project_id,
                        "project_epoch": p.project_epoch,
                        "head_seq": p.head_seq,
                    }
                ),
            )
        for ms in members:
            yield m.add(
                "membership",
                _line(
                    {
                        "type": "membership",
                        "project_id": ms.project_id,
                        "actor_id": ms.actor_id,
                        "role": ms.role,
                        "status": ms.status,
                    }
                ),
            )
        if include_tokens:
            for b in tx.list_tokens(tenant_id):
                if b.actor_id in actor_ids:
                    yield m.add(
                        "token",
                        _line(
                            {
                                "type": "token",
                                "token_sha256": b.token_sha256.hex(),
                                "actor_id": b.actor_id,
                                "active": b.active,
                                "created_at_ms": b.created_at_ms,
                            }
                        ),
                    )
        for p in projects:
            yield from self._export_project(tx, p, m)
        yield m.line()

    @staticmethod
    def _export_project(tx: ReadTx, p: Project, m: _Manifest) -> Iterator[bytes]:
        scope, pid = p.scope, p.project_id
        for r in tx.list_resources(scope, _EVERYTHING):
            yield m.add(
                "resource",
                _line(
                    {
                        "type": "resource",
                        "project_id": pid,
                        "kind": r.ref.kind,
                        "id": r.ref.id,
                        "revision": r.revision,
                        "body": _body(r.body),
                    }
                ),
            )
        after = 0
        while True:
            page = tx.list_changes(scope, after, _PAGE)
            for c in page:
                yield m.add(
                    "change",
                    _line(
                        {
                            "type": "change",
                            "project_id": pid,
                            "seq": c.seq,
                            "kind": c.ref.kind,
                            "id": c.ref.id,
                            "operation": c.op,
                            "revision": c.revision,
                            "actor_id": c.actor_id,
                            "committed_at_ms": c.committed_at_ms,
                            "body": _body(c.body),
                        }
                    ),
                )
            if len(page) < _PAGE:
                break
            after = page[-1].seq
        for rc in tx.list_receipts(scope):
            yield m.add(
                "receipt",
                _line(
                    {
                        "type": "receipt",
                        "project_id": pid,
                        "command_id": rc.command_id,
                        "fingerprint": rc.fingerprint,
                        "actor_id": rc.actor_id,
                        "seq": rc.project_seq,
                        "kind": rc.resource.kind,
                        "id": rc.resource.id,
                        "revision": rc.revision,
                        "committed_at_ms": rc.committed_at_ms,
                    }
                ),
            )
        for a in tx.list_audit(scope):
            yield m.add(
                "audit",
                _line(
                    {
                        "type": "audit",
                        "project_id": pid,
                        "seq": a.project_seq,
                        "command_id": a.command_id,
                        "operation": a.operation,
                        "kind": a.ref.kind,
                        "id": a.ref.id,
                        "actor_id": a.actor_id,
                        "committed_at_ms": a.committed_at_ms,
                    }
                ),
            )

    # -- import ---------------------------------------------------------------------------

    def import_lines(self, lines: Iterable[bytes]) -> ImportSummary:
        """Verify the manifest first, then import everything in one transaction (ARC-2, ARC-3)."""
        records = _verified_records(list(lines))
        header = records[0]
        if header.get("format") != FORMAT or header.get("version") != FORMAT_VERSION:
            raise fail(ErrorCode.INVALID_COMMAND, "not an aidememo export of a known version")
        tenant_id = validate_id(header.get("tenant_id"), "tenant_id")
        plan = _Plan.build(tenant_id, records[1:])
        epochs = {pid: self.ids.new_id("epoch") for pid in plan.projects}
        self.store.transaction(lambda tx: self._import(tx, plan, epochs))
        counts: dict[str, int] = {}
        for record in records[1:]:
            counts[record["type"]] = counts.get(record["type"], 0) + 1
        return ImportSummary(tenant_id, epochs, counts)

    def _import(self, tx: WriteTx, plan: _Plan, epochs: dict[str, str]) -> None:
        now, tenant_id = self.clock.now_ms(), plan.tenant_id
        for pid in plan.projects:
            if tx.get_project(Scope(tenant_id, pid)) is not None:
                raise fail(ErrorCode.RESOURCE_ALREADY_EXISTS, f"project {pid} already exists")
        if not tx.tenant_exists(tenant_id):
            tx.insert_tenant(tenant_id, now)
        for actor in plan.actors:
            existing = tx.get_actor(tenant_id, actor.actor_id)
            if existing is None:
                tx.insert_actor(actor, now)
            elif existing.kind is not actor.kind:
                raise fail(ErrorCode.IDENTITY_MISMATCH, f"actor {actor.actor_id} has another kind")
        for binding in plan.tokens:
            owner = tx.get_token(binding.token_sha256)
            if owner is not None:
                if (owner.tenant_id, owner.actor_id) != (tenant_id, binding.actor_id):
                    raise fail(
                        ErrorCode.IDENTITY_MISMATCH, "a token digest belongs to another actor"
                    )
                continue
            tx.insert_token(binding)
        for pid, head in plan.projects.items():
            project = Project(tenant_id, pid, epochs[pid], head)
            tx.insert_project(project, now)
            tx.restore_history(project, plan.history(pid, epochs[pid]))
        for membership in plan.memberships:
            tx.put_membership(membership, now)

    # -- delete ---------------------------------------------------------------------------

    def delete_tenant(self, tenant_id: str, confirm: str) -> dict[str, int]:
        """Remove every row of the tenant and verify by counts; returns what was removed."""
        validate_id(tenant_id, "tenant_id")
        if confirm != tenant_id:
            raise fail(ErrorCode.INVALID_COMMAND, "confirm must repeat the tenant id")

        def run(tx: WriteTx) -> dict[str, int]:
            before = tx.count_tenant_rows(tenant_id)
            if not before.get("tenants"):
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"tenant {tenant_id} not found")
            tx.delete_tenant(tenant_id)
            left = {k: v for k, v in tx.count_tenant_rows(tenant_id).items() if v}
            if left:
                raise fail(ErrorCode.STORAGE_FAILURE, f"tenant rows survived deletion: {left}")
            return before

        return self.store.transaction(run)


def _verified_records(lines: list[bytes]) -> list[dict[str, Any]]:
    if len(lines) < 2:
        raise fail(ErrorCode.INVALID_COMMAND, "an export has a header and a manifest at least")
    manifest = decode_json(lines[-1])
    if not isinstance(manifest, dict) or manifest.get("type") != "manifest":
        raise fail(ErrorCode.INVALID_COMMAND, "the last line must be the manifest")
    total = hashlib.sha256()
    for line in lines[:-1]:
        total.update(line if line.endswith(b"\n") else line + b"\n")
    if total.hexdigest() != manifest.get("lines_sha256"):
        raise fail(ErrorCode.INVALID_COMMAND, "the export does not match its manifest checksum")
    records = [decode_json(line) for line in lines[:-1]]
    counts: dict[str, int] = {}
    for record in records:
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise fail(ErrorCode.INVALID_COMMAND, "every line must be an object with a type")
        counts[record["type"]] = counts.get(record["type"], 0) + 1
    if counts != manifest.get("counts") or records[0].get("type") != "header":
        raise fail(ErrorCode.INVALID_COMMAND, "the export's counts do not match its manifest")
    return records


@dataclass
class _Plan:
    """The records of an import, checked and grouped by project."""

    tenant_id: str
    projects: dict[str, int]
    actors: list[Actor]
    memberships: list[Membership]
    tokens: list[TokenBinding]
    rows: dict[str, dict[str, list[dict[str, Any]]]]

    @classmethod
    def build(cls, tenant_id: str, records: list[dict[str, Any]]) -> _Plan:
        plan = cls(tenant_id, {}, [], [], [], {})
        try:
            for r in records:
                plan._add(r)
        except (KeyError, ValueError, TypeError) as exc:
            raise fail(ErrorCode.INVALID_COMMAND, f"malformed export record: {exc}") from None
        for pid, head in plan.projects.items():
            seqs = [c["seq"] for c in plan.rows[pid]["change"]]
            if seqs != list(range(1, head + 1)):
                raise fail(
                    ErrorCode.INVALID_COMMAND, f"project {pid} history is not dense 1..{head}"
                )
        return plan

    def _add(self, r: dict[str, Any]) -> None:
        kind, t = r["type"], self.tenant_id
        if kind == "actor":
            self.actors.append(
                Actor(t, validate_id(r["actor_id"], "actor_id"), ActorKind(r["kind"]))
            )
        elif kind == "project":
            pid = validate_id(r["project_id"], "project_id")
            head = r["head_seq"]
            if not isinstance(head, int) or head < 0:
                raise ValueError("head_seq")
            self.projects[pid] = head
            self.rows[pid] = {"resource": [], "change": [], "receipt": [], "audit": []}
        elif kind == "membership":
            self.memberships.append(
                Membership(
                    t,
                    self._project(r),
                    validate_id(r["actor_id"], "actor_id"),
                    Role(r["role"]),
                    MemberStatus(r["status"]),
                )
            )
        elif kind == "token":
            digest = bytes.fromhex(r["token_sha256"])
            if len(digest) != 32:
                raise ValueError("token_sha256")
            self.tokens.append(
                TokenBinding(
                    digest,
                    t,
                    validate_id(r["actor_id"], "actor_id"),
                    bool(r["active"]),
                    int(r["created_at_ms"]),
                )
            )
        elif kind in ("resource", "change", "receipt", "audit"):
            validate_name(r["kind"], "kind")
            validate_id(r["id"], "id")
            self.rows[self._project(r)][kind].append(r)
        else:
            raise ValueError(f"unknown record type {kind!r}")

    def _project(self, r: dict[str, Any]) -> str:
        pid = validate_id(r["project_id"], "project_id")
        if pid not in self.projects:
            raise ValueError(f"record for undeclared project {pid}")
        return pid

    def history(self, pid: str, epoch: str) -> History:
        rows = self.rows[pid]
        resources = [
            StoredResource(ResourceRef(r["kind"], r["id"]), r["revision"], _stored_body(r))
            for r in rows["resource"]
        ]
        changes = [
            ChangeRecord(
                c["seq"],
                epoch,
                ResourceRef(c["kind"], c["id"]),
                ChangeOp(c["operation"]),
                c["revision"],
                c["actor_id"],
                c["committed_at_ms"],
                _stored_body(c),
            )
            for c in rows["change"]
        ]
        receipts = [
            Receipt(
                r["command_id"],
                r["fingerprint"],
                self.tenant_id,
                pid,
                r["actor_id"],
                r["seq"],
                ResourceRef(r["kind"], r["id"]),
                r["revision"],
                r["committed_at_ms"],
            )
            for r in rows["receipt"]
        ]
        audit = [
            AuditRow(
                a["seq"],
                a["command_id"],
                a["operation"],
                ResourceRef(a["kind"], a["id"]),
                a["actor_id"],
                a["committed_at_ms"],
            )
            for a in rows["audit"]
        ]
        return History(resources, changes, receipts, audit, *_derived(resources, changes))


def _stored_body(record: dict[str, Any]) -> bytes | None:
    return None if record["body"] is None else canonical_bytes(record["body"])


def _derived(
    resources: list[StoredResource], changes: list[ChangeRecord]
) -> tuple[list[HandoffIndexRow], list[SearchDoc]]:
    """Rebuild the mailbox and search index rows from canonical rows (ARC-3)."""
    last_seq = {c.ref: c.seq for c in changes}
    handoffs: list[HandoffIndexRow] = []
    search: list[SearchDoc] = []
    for r in resources:
        if r.body is None:
            continue
        record = decode_stored(r.body)
        if r.ref.kind == "handoff":
            handoffs.append(
                HandoffIndexRow(
                    r.ref.id,
                    record["from_actor"],
                    record["to_actor"],
                    record["source_id"],
                    record["status"],
                    r.revision,
                    last_seq.get(r.ref, 0),
                )
            )
        elif r.ref.kind == "fact":
            search.append(SearchDoc(r.ref.id, record["source_id"], index_terms(record["content"])))
    return handoffs, search
