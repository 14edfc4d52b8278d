"""The memory store's records: memories, audit events, relations (SPEC.md MEM-1).

Timestamps are kept as the `toISOString()` text the store holds. Each record knows the JSON
shapes the surfaces print: snake_case for the CLI and the MCP tools, camelCase for the CLI's
`recall --json` (which prints the core response as Nuzo does).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from typing import Any

KINDS = ("preference", "project_decision", "fact", "instruction", "note")
CONFIDENCE_STATES = ("observed", "inferred", "user_confirmed", "needs_review", "deprecated")
RELATIONS = ("supersedes", "conflicts_with", "duplicate_of", "related_to")
PROVENANCE_KINDS = ("conversation", "file", "import", "cli", "mcp")
CHALLENGE_OUTCOMES = ("valid", "needs_review", "stale", "incorrect", "superseded")
CAPTURE_DECISIONS = ("create", "update", "keep_separate", "clarify", "reject")
EVENT_TYPES = (
    "memory.created",
    "memory.updated",
    "memory.archived",
    "memory.deleted",
    "memory.imported",
    "memory.exported",
    "memory.recalled",
    "memory.scope.rehomed",
    "memory.challenged",
    "memory.relation.created",
    "memory.relation.deleted",
)
GLOBAL_SCOPE = "user:default"
# The fields a writer gives a memory (the rest the store sets), in a capture draft's order.
DRAFT_FIELDS = (
    "content kind scope tags source confidence confidence_state provenance review_after expires_at"
).split()


def new_id(prefix: str) -> str:
    """`mem_`, `evt_` or `rel_` plus a random UUID (version 4)."""
    return f"{prefix}_{uuid.uuid4()}"


def field_values(record: Any) -> dict[str, Any]:
    """A dataclass record's fields by name, in their declared order: the snake_case JSON of a
    record whose fields are all JSON values."""
    return {f.name: getattr(record, f.name) for f in dataclass_fields(record)}


@dataclass(slots=True)
class Memory:
    """One row of `memories` (without the derived `capture_key`). Treated as a value: changes
    are new records (`evolve`). Not `frozen`: a frozen dataclass sets each of its 16 fields
    through `object.__setattr__`, which made building the rows a recall returns cost more
    than ranking them."""

    id: str
    revision: int
    scope: str
    kind: str
    content: str
    tags: list[str]
    source: str
    confidence: float
    confidence_state: str | None
    provenance: dict[str, Any] | None
    review_after: str | None
    expires_at: str | None
    created_at: str
    updated_at: str
    last_used_at: str | None = None
    archived_at: str | None = None

    def evolve(self, **changes: Any) -> Memory:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """The snake_case record (CLI `show --json`, MCP `memory.show`/`memory.update`)."""
        return {
            "id": self.id,
            "revision": self.revision,
            "scope": self.scope,
            "kind": self.kind,
            "content": self.content,
            "tags": list(self.tags),
            "source": self.source,
            "confidence": self.confidence,
            "confidence_state": self.confidence_state,
            "provenance": self.provenance,
            "review_after": self.review_after,
            "expires_at": self.expires_at,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "last_used_at": self.last_used_at,
            "archived_at": self.archived_at,
        }

    def fields(self, *names: str) -> dict[str, Any]:
        """These fields of the snake_case record, in this order."""
        out = self.to_json()
        return {name: out[name] for name in names}

    def to_capture_json(self) -> dict[str, Any]:
        """The snake_case record in the key order capture output uses (content before kind)."""
        out = self.to_json()
        return {key: out[key] for key in ("id", "revision", "content", "kind", "scope")} | {
            key: value
            for key, value in out.items()
            if key not in ("id", "revision", "content", "kind", "scope")
        }

    def to_camel(self) -> dict[str, Any]:
        """The camelCase record (CLI `recall --json`): `to_json` with camelCase keys."""
        return {_camel(key): value for key, value in self.to_json().items()}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclass(frozen=True, slots=True)
class Event:
    """One row of `memory_events`: metadata only, never content or a query."""

    id: str
    memory_id: str | None
    event_type: str
    actor: str
    payload: dict[str, Any]
    created_at: str

    def to_json(self) -> dict[str, Any]:
        return field_values(self)


@dataclass(frozen=True, slots=True)
class Relation:
    """One row of `memory_relations`: `source relation target` (e.g. A supersedes B)."""

    id: str
    source_memory_id: str
    target_memory_id: str
    relation: str
    reason: str | None
    created_at: str

    def to_json(self, perspective: str | None = None) -> dict[str, Any]:
        """The snake_case relation; `direction` seen from `perspective` (None when not given)."""
        direction: str | None = None
        if perspective is not None:
            direction = "outgoing" if self.source_memory_id == perspective else "incoming"
        return {
            "id": self.id,
            "source_memory_id": self.source_memory_id,
            "target_memory_id": self.target_memory_id,
            "direction": direction,
            "relation": self.relation,
            "reason": self.reason,
            "created_at": self.created_at,
        }

    def marker(self, perspective: str) -> str:
        """`relation->other` / `relation<-other` as the CLI prints it."""
        if self.source_memory_id == perspective:
            return f"{self.relation}->{self.target_memory_id}"
        if self.target_memory_id == perspective:
            return f"{self.relation}<-{self.source_memory_id}"
        return f"{self.source_memory_id}:{self.relation}->{self.target_memory_id}"


@dataclass(frozen=True, slots=True)
class RecallResult:
    """One recalled memory with its score and the reason it matched; `memory.scope` names the
    scope that produced it (MEM-6)."""

    memory: Memory
    score: float
    reason: str
    retrieval_mode: str | None = None  # set by semantic and hybrid recall (MEM-23)
    fallback_code: str | None = None  # the semantic refusal an FTS answer stands in for
    tier: str | None = None  # the store or tier that answered, in tiered recall (MEM-24)

    def to_camel(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "memory": self.memory.to_camel(),
            "score": self.score,
            "reason": self.reason,
        }
        if self.retrieval_mode is not None:
            out["retrievalMode"] = self.retrieval_mode
        if self.fallback_code is not None:
            out["semanticFallbackCode"] = self.fallback_code
        if self.tier is not None:
            out["tier"] = self.tier
        return out


@dataclass(slots=True)
class Unset:
    """Marks an update field that was not given (distinct from `None`, which clears it)."""

    marker: str = field(default="unset")


UNSET: Any = Unset()
