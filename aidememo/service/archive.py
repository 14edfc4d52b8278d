"""Logical export, import and tenant deletion (SPEC.md ARC-*).

The export is JSON Lines in canonical JSON: a header, the tenant's actors, projects,
memberships, optional token digests, then per project its resources, changes, receipts and
audit rows, and last a manifest with per-type counts and SHA-256 sums and the SHA-256 of every
byte before it. The format is the same for every backend, so a tenant moves between SQLite,
PostgreSQL and the edge by export and import.

The pieces are public so a front that keeps a tenant in several stores (the edge: a registry
of identities and one Durable Object per project) can assemble the same export and split the
same import: the record builders (`header_record` ... `token_record`, `line`), the `Manifest`,
`read_identity` + `identity_records`, `project_lines` (from `archive_rows`, which also turns
records back into rows), `verified_records`, `archive_verify.check_header`, `Plan` with
`Archive.import_plan` and `Archive.write_plan`. A front that cannot hold a project's rows at
once imports them in chunks with `project_import.ProjectImport`. `Archive.import_lines`
itself never holds the archive: it stages the verified rows in the store
(`archive_stage.StagedImport`, ARC-9).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.domain.model import (
    Actor,
    Membership,
    Project,
    Scope,
    TokenBinding,
)
from aidememo.ports import BodyStore, Clock, Ids, ReadTx, Store, WriteTx
from aidememo.service import archive_rows
from aidememo.service.archive_bodies import (
    BODY_TYPE,
    export_body_lines,
    missing_bodies,
    published_bodies,
)
from aidememo.service.archive_plan import ImportSummary, Plan, malformed, record_counts
from aidememo.service.archive_stage import StagedImport
from aidememo.service.archive_verify import FORMAT, FORMAT_VERSION, ExportReader
from aidememo.service.artifact_gc import tenant_intents

# One project's rows as export lines, read in keyset pages, and one export line (a record in
# canonical JSON and a newline); both live in `archive_rows`.
__all__ = [
    "Archive",
    "IdentityView",
    "ImportSummary",
    "Manifest",
    "Plan",
    "actor_record",
    "confirm_deletion",
    "header_record",
    "identity_records",
    "line",
    "malformed",
    "membership_record",
    "project_lines",
    "project_record",
    "read_identity",
    "record_counts",
    "token_record",
    "verified_records",
]

project_lines = archive_rows.project_lines
line = archive_rows.line


class Manifest:
    """The running manifest of an export: every byte goes through `add`, in export order."""

    def __init__(self) -> None:
        self.total = hashlib.sha256()
        self.by_type: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def add(self, kind: str, data: bytes, count: int = 1) -> bytes:
        """Account for `count` consecutive lines of one type (`data` ends with a newline)."""
        self.total.update(data)
        self.by_type.setdefault(kind, hashlib.sha256()).update(data)
        self.counts[kind] = self.counts.get(kind, 0) + count
        return data

    def line(self) -> bytes:
        return line(
            {
                "type": "manifest",
                "counts": self.counts,
                "sha256": {k: h.hexdigest() for k, h in sorted(self.by_type.items())},
                "lines_sha256": self.total.hexdigest(),
            }
        )


def header_record(
    tenant_id: str,
    project_id: str | None,
    exported_at_ms: int,
    include_tokens: bool,
    body_store: str | None = None,
) -> dict[str, Any]:
    """The first line of an export; `body_store` is the identity of the body store its
    artifacts' bodies are in (ART-8), when the catalog is pinned to one."""
    header: dict[str, Any] = {
        "type": "header",
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "tenant_id": tenant_id,
        "project_id": project_id,
        "exported_at_ms": exported_at_ms,
        "token_digests": include_tokens,
    }
    if body_store is not None:
        header["body_store"] = body_store
    return header


def _identity_record(kind: str, row: Actor | Project | Membership | TokenBinding) -> dict[str, Any]:
    """An identity line: its `type` and the row's fields but `tenant_id` (the header names
    the tenant)."""
    record = {"type": kind, **asdict(row)}
    del record["tenant_id"]
    return record


def actor_record(a: Actor) -> dict[str, Any]:
    """An `actor` line: `actor_id`, `kind`."""
    return _identity_record("actor", a)


def project_record(p: Project) -> dict[str, Any]:
    """A `project` line: `project_id`, `project_epoch` and `head_seq`, the head the project's
    rows are exported at."""
    return _identity_record("project", p)


def membership_record(ms: Membership) -> dict[str, Any]:
    """A `membership` line: `project_id`, `actor_id`, `role`, `status`."""
    return _identity_record("membership", ms)


def token_record(b: TokenBinding) -> dict[str, Any]:
    """A `token` line (only with `include_token_digests`): `token_sha256` in hex,
    `actor_id`, `active`, `created_at_ms`."""
    return _identity_record("token", b) | {"token_sha256": b.token_sha256.hex()}


@dataclass(frozen=True, slots=True)
class IdentityView:
    """The identity rows an export covers: the tenant's, or one project's and its members'."""

    projects: list[Project]
    actors: list[Actor]
    memberships: list[Membership]
    tokens: list[TokenBinding]


def read_identity(
    tx: ReadTx, tenant_id: str, project_id: str | None, include_tokens: bool
) -> IdentityView:
    """The identity rows of an export, or `resource_not_found` for a missing tenant/project."""
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
    tokens = (
        [b for b in tx.list_tokens(tenant_id) if b.actor_id in actor_ids] if include_tokens else []
    )
    return IdentityView(projects, actors, members, tokens)


def identity_records(view: IdentityView) -> Iterator[dict[str, Any]]:
    """The identity lines in export order: actors, projects, memberships, tokens."""
    yield from (actor_record(a) for a in view.actors)
    yield from (project_record(p) for p in view.projects)
    yield from (membership_record(m) for m in view.memberships)
    yield from (token_record(b) for b in view.tokens)


@dataclass(frozen=True, slots=True, eq=False)
class Archive:
    """Export, import and delete whole tenants or single projects; read-only once built."""

    store: Store
    clock: Clock
    ids: Ids
    bodies: BodyStore | None = None  # artifact bodies of exports and imports (ART-12)
    # The serving body store's longest grant: deleted tenants' bodies outwait it (GRANT-7).
    grant_window_ms: int = 0

    # -- export ---------------------------------------------------------------------------

    def export_lines(
        self,
        tenant_id: str,
        project_id: str | None = None,
        *,
        include_tokens: bool = False,
        include_bodies: bool = False,
    ) -> Iterator[bytes]:
        """The export as lines, read in one consistent view (ARC-1); with `include_bodies`,
        the current publications' bodies follow the rows (ART-12), read from `self.bodies`."""
        validate_id(tenant_id, "tenant_id")
        if project_id is not None:
            validate_id(project_id, "project_id")
        if include_bodies and self.bodies is None:
            raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "no body store to export from")
        m = Manifest()
        published: list[tuple[str, Any]] = []
        lines = self.store.read(
            lambda tx: list(
                self._export(
                    tx, m, tenant_id, project_id, include_tokens, include_bodies, published
                )
            )
        )
        if include_bodies and self.bodies is not None:
            missing_bodies(self.bodies, published)  # refused before the first line
        yield from lines
        if include_bodies and self.bodies is not None:
            for data in export_body_lines(self.bodies, published):
                yield m.add(BODY_TYPE, data)
        yield m.line()

    def _export(
        self,
        tx: ReadTx,
        m: Manifest,
        tenant_id: str,
        project_id: str | None,
        include_tokens: bool,
        include_bodies: bool,
        published: list[tuple[str, Any]],
    ) -> Iterator[bytes]:
        view = read_identity(tx, tenant_id, project_id, include_tokens)
        header = header_record(
            tenant_id, project_id, self.clock.now_ms(), include_tokens, tx.body_store_identity()
        )
        if include_bodies:
            header["bodies"] = True
        yield m.add("header", line(header))
        for record in identity_records(view):
            yield m.add(record["type"], line(record))
        for p in view.projects:
            for kind, data in project_lines(tx, p):
                if include_bodies and kind == "resource":
                    found = published_bodies(data)
                    if found is not None:
                        published.append(found)
                yield m.add(kind, data)

    # -- import ---------------------------------------------------------------------------

    def import_lines(self, lines: Iterable[bytes]) -> ImportSummary:
        """Import an export read once, line by line: each record checked as it comes and its
        rows staged in the store, then, once the manifest and every check passed, everything
        written in one transaction (ARC-2, ARC-3, ARC-9). `lines` may be any iterable of
        lines (a generator over a request body); it is never held whole."""
        return StagedImport(self).run(lines)

    def import_plan(self, plan: Plan, epochs: dict[str, str], *, history: bool = True) -> None:
        """Import a checked plan in one transaction; projects that exist are refused.

        `history=False` imports the identity rows only (projects with their heads, actors,
        memberships, tokens): the edge's tenant registry keeps those while each project's
        rows live in the project's own object.
        """
        self.store.transaction(lambda tx: self.write_plan(tx, plan, epochs, history=history))

    def write_plan(
        self, tx: WriteTx, plan: Plan, epochs: dict[str, str], *, history: bool = True
    ) -> None:
        """`import_plan`'s writes inside the caller's transaction `tx`."""
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
            if history:
                tx.restore_history(project, plan.history(pid, epochs[pid]))
        for membership in plan.memberships:
            tx.put_membership(membership, now)

    # -- delete ---------------------------------------------------------------------------

    def delete_tenant(self, tenant_id: str, confirm: str) -> dict[str, int]:
        """Remove every row of the tenant and verify by counts; returns what was removed."""
        confirm_deletion(tenant_id, confirm)

        def run(tx: WriteTx) -> dict[str, int]:
            before = tx.count_tenant_rows(tenant_id)
            if not before.get("tenants"):
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"tenant {tenant_id} not found")
            window = max(self.grant_window_ms, int(getattr(self.bodies, "grant_window_ms", 0)))
            tenant_intents(tx, tenant_id, self.clock.now_ms(), window)  # its bodies (ARC-4, ART-7)
            tx.delete_tenant(tenant_id)
            left = {k: v for k, v in tx.count_tenant_rows(tenant_id).items() if v}
            if left:
                raise fail(ErrorCode.STORAGE_FAILURE, f"tenant rows survived deletion: {left}")
            return before

        return self.store.transaction(run)


def confirm_deletion(tenant_id: str, confirm: str) -> None:
    """A tenant deletion names the tenant twice: in the path and in `confirm` (ARC-4)."""
    validate_id(tenant_id, "tenant_id")
    if confirm != tenant_id:
        raise fail(ErrorCode.INVALID_COMMAND, "confirm must repeat the tenant id")


def verified_records(lines: list[bytes]) -> list[dict[str, Any]]:
    """Every record of an export, after its manifest checksum and counts were verified; the
    manifest itself is left out, so the header comes first (ARC-2, ARC-6). The same line by
    line reader as the edge's streamed import (`archive_verify.ExportReader`)."""
    reader = ExportReader()
    records = [checked[0] for data in lines if (checked := reader.feed(data)) is not None]
    reader.finish()
    return records
