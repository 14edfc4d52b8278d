"""Recall across the tiers the storage seed orders (SPEC.md MEM-24): the project store's
active scope, then the user-level store's global scope, then an optional team tier.

Each tier answers with its own ranking; the results are listed tier by tier in that order
(scores of different stores, or of the team server, are never compared), each naming its
scope and tier. The tiers share the limit by precedence with one reserved slot: every later
tier that found something keeps one place, earlier tiers fill the rest in order. A restricted
session reads no scope outside its allowlist in any tier. The team tier is read-only and
bounded by its caller's timeout; when it cannot answer, the local tiers still do and the
answer says the team tier was skipped and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from aidememo.agent_memory.model import GLOBAL_SCOPE, RecallResult, field_values

if TYPE_CHECKING:
    from aidememo.agent_memory.scope_policy import ScopePolicy
    from aidememo.agent_memory.store import AgentMemory

PROJECT, USER, TEAM = "project", "user", "team"


@dataclass(frozen=True, slots=True)
class TeamFact:
    """One fact the team tier's search found."""

    fact_id: str
    content: str
    score: float
    scope: str  # `team:<project id>`
    actor_id: str
    session_id: str

    def to_camel(self) -> dict[str, Any]:
        return {
            "fact": {
                "id": self.fact_id,
                "scope": self.scope,
                "content": self.content,
                "actorId": self.actor_id,
                "sessionId": self.session_id,
            },
            "score": self.score,
            "reason": "Team search.",
            "tier": TEAM,
        }


class TeamUnavailable(Exception):
    """The team tier could not answer (unreachable, timed out, refused)."""


class TeamTier(Protocol):
    """The team's shared project, searched read-only through a saved agent profile."""

    scope: str  # `team:<project id>`
    name: str  # the profile's name

    def search(self, query: str, limit: int) -> list[TeamFact]:
        """At most `limit` facts, best first; `TeamUnavailable` when it cannot answer."""
        ...


@dataclass
class TierReport:
    """What one tier did: `searched` (with its result count) or `skipped` (with why)."""

    tier: str
    store: str
    scopes: list[str]
    status: str = "searched"
    found: int = 0
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return field_values(self)


@dataclass
class TieredAnswer:
    results: list[RecallResult | TeamFact] = field(default_factory=list)
    tiers: list[TierReport] = field(default_factory=list)
    diagnostics: dict[str, Any] = field(default_factory=dict)


def share(found: Sequence[Sequence[Any]], limit: int) -> list[int]:
    """How many results each tier keeps: in order, leaving one place for every later tier
    that found something (MEM-24)."""
    kept: list[int] = []
    left = limit
    for index, rows in enumerate(found):
        later = sum(1 for rest in found[index + 1 :] if rest)
        take = min(len(rows), max(left - later, 1 if rows and left > 0 else 0))
        kept.append(take)
        left -= take
    return kept


def _tag(results: Sequence[RecallResult], tier: str) -> list[RecallResult]:
    return [
        RecallResult(r.memory, r.score, r.reason, r.retrieval_mode, r.fallback_code, tier)
        for r in results
    ]


def tiered_recall(
    query: str,
    *,
    project: AgentMemory,
    user: AgentMemory | None,
    team: TeamTier | None,
    scope: str | None = None,
    limit: int | None = None,
    include_global: bool | None = None,
    retrieval_mode: str = "fts",
    semantic_fallback: str | None = None,
    policy: ScopePolicy | None = None,
    record_usage: bool = False,
) -> TieredAnswer:
    """Recall `query` from the project tier (the project store's scopes as a single-store
    recall searches them), the user tier (the user store's `user:default`, when
    `include_global` and the store is another file) and the team tier (MEM-24)."""
    count = project.recall_limit if limit is None else limit
    glob = project.include_global if include_global is None else include_global
    target = scope or project.scope
    answer = TieredAnswer()
    permits = policy.permits if policy is not None else (lambda _scope: True)
    first = project.recall_detailed(
        query,
        scope=target,
        limit=count,
        include_global=glob and permits(GLOBAL_SCOPE),
        retrieval_mode=retrieval_mode,
        semantic_fallback=semantic_fallback,
        record_usage=record_usage,
    )
    scopes = [target] + ([GLOBAL_SCOPE] if glob and permits(GLOBAL_SCOPE) else [])
    found: list[list[Any]] = [list(first["results"])]
    answer.tiers.append(TierReport(PROJECT, project.db.path, scopes))
    answer.diagnostics = dict(first["diagnostics"])
    names = [PROJECT]
    if user is not None and glob:
        report = TierReport(USER, user.db.path, [GLOBAL_SCOPE])
        if not permits(GLOBAL_SCOPE):
            report.status, report.reason = "skipped", "scope not allowed"
            found.append([])
        else:
            # The user store may have no sidecar of its own: its tier answers FTS then.
            second = user.recall_detailed(
                query,
                scope=GLOBAL_SCOPE,
                limit=count,
                include_global=False,
                team_scope=None,
                retrieval_mode=retrieval_mode,
                semantic_fallback="fts",
            )
            code = second["diagnostics"]["semanticFallbackCode"]
            if code is not None:
                report.reason = f"semantic fallback: {code}"
            found.append(list(second["results"]))
        answer.tiers.append(report)
        names.append(USER)
    if team is not None:
        report = TierReport(TEAM, team.name, [team.scope])
        rows: list[Any] = []
        if not permits(team.scope):
            report.status, report.reason = "skipped", "scope not allowed"
        else:
            try:
                rows = team.search(query, count)
            except TeamUnavailable as exc:
                report.status, report.reason = "skipped", str(exc)
        found.append(rows)
        answer.tiers.append(report)
        names.append(TEAM)
    for name, rows, take, report in zip(
        names, found, share(found, count), answer.tiers, strict=True
    ):
        report.found = len(rows)
        kept = rows[:take]
        answer.results += kept if name == TEAM else _tag(kept, name)
    return answer
