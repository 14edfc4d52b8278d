"""What an import checks and writes: the `Plan` (the records of an import, checked and grouped
by project), its `ImportSummary`, and `PlanWriter`, what the staged and chunked imports
(`archive_stage`, `project_import`) need of `archive.Archive` to write one."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.ids import validate_id, validate_name
from aidememo.domain.model import (
    Actor,
    ActorKind,
    History,
    Membership,
    MemberStatus,
    Role,
    TokenBinding,
)
from aidememo.ports import BodyStore, Clock, Ids, Store, WriteTx
from aidememo.service.archive_rows import (
    audit_row,
    change_row,
    check_row,
    derived_rows,
    receipt_row,
    resource_row,
)


@dataclass(frozen=True, slots=True)
class ImportSummary:
    """What an import created: the new epoch of each project and the row counts."""

    tenant_id: str
    epochs: dict[str, str]
    counts: dict[str, int]


def malformed(exc: Exception) -> AidememoError:
    """The refusal of a record that does not convert (`KeyError`, `ValueError`, `TypeError`)."""
    return fail(ErrorCode.INVALID_COMMAND, f"malformed export record: {exc}")


def record_counts(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many records of each type (an import's summary counts)."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record["type"]] = counts.get(record["type"], 0) + 1
    return counts


@dataclass
class Plan:
    """The records of an import, checked and grouped by project."""

    tenant_id: str
    projects: dict[str, int]
    actors: list[Actor]
    memberships: list[Membership]
    tokens: list[TokenBinding]
    rows: dict[str, dict[str, list[dict[str, Any]]]]

    @classmethod
    def build(cls, tenant_id: str, records: list[dict[str, Any]], *, history: bool = True) -> Plan:
        """Check and group `records` (the lines after the header); `history=False` accepts
        identity records alone, without the dense change log each project's head needs."""
        plan = cls(tenant_id, {}, [], [], [], {})
        try:
            for r in records:
                plan._add(r)
        except (KeyError, ValueError, TypeError) as exc:
            raise malformed(exc) from None
        for pid, head in plan.projects.items() if history else ():
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
            self.rows[self.row_project(r)][kind].append(r)
        else:
            raise ValueError(f"unknown record type {kind!r}")

    def only(self, project_id: str) -> Plan:
        """The part of this plan one project's store holds: the project, its memberships and
        rows, and the actors of its members; no token digests."""
        members = [m for m in self.memberships if m.project_id == project_id]
        member_ids = {m.actor_id for m in members}
        return Plan(
            self.tenant_id,
            {project_id: self.projects[project_id]},
            [a for a in self.actors if a.actor_id in member_ids],
            members,
            [],
            {project_id: self.rows[project_id]},
        )

    def row_project(self, r: dict[str, Any]) -> str:
        """Check a row record (`resource`, `change`, `receipt`, `audit`) as its import will
        convert it, and return its project, one this plan declares; raises KeyError,
        ValueError or TypeError (`malformed`) or a validation error."""
        validate_name(r["kind"], "kind")
        validate_id(r["id"], "id")
        check_row(r)
        return self._project(r)

    def _project(self, r: dict[str, Any]) -> str:
        pid = validate_id(r["project_id"], "project_id")
        if pid not in self.projects:
            raise ValueError(f"record for undeclared project {pid}")
        return pid

    def history(self, pid: str, epoch: str) -> History:
        """The project's rows with the new `epoch`, and the index rows rebuilt (ARC-3)."""
        rows = self.rows[pid]
        resources = [resource_row(r) for r in rows["resource"]]
        changes = [change_row(c, epoch) for c in rows["change"]]
        receipts = [receipt_row(r, self.tenant_id, pid) for r in rows["receipt"]]
        audit = [audit_row(a) for a in rows["audit"]]
        return History(resources, changes, receipts, audit, *derived_rows(resources, changes))


class PlanWriter(Protocol):
    """What an import writes through: `archive.Archive` (read-only attributes)."""

    @property
    def store(self) -> Store: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def ids(self) -> Ids: ...
    @property
    def bodies(self) -> BodyStore | None: ...

    def write_plan(
        self, tx: WriteTx, plan: Plan, epochs: dict[str, str], *, history: bool = True
    ) -> None:
        """The plan's writes inside the caller's transaction `tx`."""
