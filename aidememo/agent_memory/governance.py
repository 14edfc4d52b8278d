"""Read-only relation-governance review (SPEC.md MEM-21).

`review_relations` runs the bounded capture classifier (`aidememo.agent_memory.capture`, MEM-7) with
each reviewed memory of one scope as the draft, against the scope's other active memories, and
reports the pairs it would ask a person about: exact duplicates, possible revisions, shared
subjects and uncertain classifications. It writes nothing (no memory, relation, lifecycle or
audit rows) and its report carries ids, revisions, scopes and reason codes only, never content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aidememo.agent_memory import capture, policy
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.errors import invariant
from aidememo.agent_memory.model import DRAFT_FIELDS, Memory, Relation
from aidememo.agent_memory.schema import capture_key

if TYPE_CHECKING:
    from aidememo.agent_memory.store import AgentMemory

MEMORY_SCAN_LIMIT = 200
DEFAULT_CANDIDATE_LIMIT = 50
_PRIORITY = {"exact_duplicate": 0, "update_candidate": 1, "related": 2, "uncertain": 3}
_REASON = {
    "exact_duplicate": "exact_normalized_content",
    "update_candidate": "possible_revision",
    "related": "shared_subject",
    "uncertain": "classification_uncertain",
}


def _pair_key(left: str, right: str) -> tuple[str, str]:
    return (left, right) if left < right else (right, left)


def lifecycle(memory: Memory, now: str) -> str:
    """`archived`, `expired`, `review_due` (`needs_review` or review date reached) or `active`."""
    if memory.archived_at is not None:
        return "archived"
    if memory.expires_at is not None and memory.expires_at <= now:
        return "expired"
    if memory.confidence_state == "needs_review" or (
        memory.review_after is not None and memory.review_after <= now
    ):
        return "review_due"
    return "active"


def reason_codes(relationship: str, terms: int, tags: int, truncated: bool) -> list[str]:
    codes = [_REASON[relationship]]
    if tags > 0:
        codes.append("shared_tags")
    if terms > 0:
        codes.append("shared_terms")
    if truncated:
        codes.append("candidate_scan_truncated")
    return codes


def _draft(memory: Memory) -> dict[str, Any]:
    return memory.fields(*DRAFT_FIELDS) | {"reason": "Read-only relation governance review."}


def check_limit(limit: int | None) -> int:
    """The candidate limit (default 50), or `MEMORY_RELATION_REVIEW_LIMIT_INVALID` unless 1-200."""
    candidate_limit = DEFAULT_CANDIDATE_LIMIT if limit is None else limit
    invariant(
        isinstance(candidate_limit, int)
        and not isinstance(candidate_limit, bool)
        and 1 <= candidate_limit <= MEMORY_SCAN_LIMIT,
        C.MEMORY_RELATION_REVIEW_LIMIT_INVALID,
        "Relation governance candidate limit must be 1-200.",
        {"limit": candidate_limit},
    )
    return candidate_limit


def review_relations(
    store: AgentMemory,
    *,
    scope: str | None = None,
    include_archived: bool = False,
    needs_review: bool = False,
    limit: int | None = None,
) -> dict[str, Any]:
    """The snake_case governance report of one scope (`--json` shape of `review-relations`)."""
    candidate_limit = check_limit(limit)
    target = scope or store.scope
    policy.check_scope(target)
    now = store.now()
    db = store.db
    primary_rows = db.list_memories(
        scope=target,
        tags=(),
        include_archived=include_archived,
        review_due_at=now if needs_review else None,
        limit=MEMORY_SCAN_LIMIT + 1,
        after=None,
    )
    active_rows = db.list_memories(
        scope=target,
        tags=(),
        include_archived=False,
        review_due_at=None,
        limit=MEMORY_SCAN_LIMIT + 1,
        after=None,
    )
    primaries = primary_rows[:MEMORY_SCAN_LIMIT]
    scanned = active_rows[:MEMORY_SCAN_LIMIT]
    pairs: dict[tuple[str, str], dict[str, Any]] = {}
    for primary in primaries:
        duplicate, memories, exhaustive = capture.find_candidates(
            store,
            primary.scope,
            capture_key(primary.content),
            primary.content,
            primary.tags,
            include_candidates=True,
            exclude=primary.id,
        )
        _status, relationship, evidence = capture.bounded(
            _draft(primary), duplicate, memories, exhaustive
        )
        if relationship == "independent":
            continue
        for item in evidence["candidates"]:
            other: Memory = item["memory"]
            if other.id == primary.id:
                continue
            key = _pair_key(primary.id, other.id)
            found = {
                "primary_memory_id": primary.id,
                "primary_revision": primary.revision,
                "primary_scope": primary.scope,
                "primary_lifecycle": lifecycle(primary, now),
                "candidate_memory_id": other.id,
                "candidate_revision": other.revision,
                "candidate_scope": other.scope,
                "candidate_lifecycle": lifecycle(other, now),
                "relationship": relationship,
                "reason_codes": reason_codes(
                    relationship,
                    len(item["matched_terms"]),
                    len(item["matched_tags"]),
                    not evidence["search_exhaustive"],
                ),
            }
            current = pairs.get(key)
            if current is None or _PRIORITY[relationship] < _PRIORITY[current["relationship"]]:
                pairs[key] = found
    ids = [i for c in pairs.values() for i in (c["primary_memory_id"], c["candidate_memory_id"])]
    existing: dict[tuple[str, str], list[Relation]] = {}
    for relation in db.relations_among(ids):
        key = _pair_key(relation.source_memory_id, relation.target_memory_id)
        if key in pairs:
            existing.setdefault(key, []).append(relation)
    candidates: list[dict[str, Any]] = []
    for key, found in pairs.items():
        relations = sorted(existing.get(key, []), key=lambda r: r.id)
        candidates.append(
            found
            | {
                "state": "already_related" if relations else "unreviewed",
                "existing_relations": [
                    {
                        "id": r.id,
                        "relation": r.relation,
                        "direction": "outgoing"
                        if r.source_memory_id == found["primary_memory_id"]
                        else "incoming",
                    }
                    for r in relations
                ],
            }
        )
    candidates.sort(
        key=lambda c: (
            c["state"] == "already_related",
            _PRIORITY[c["relationship"]],
            c["primary_memory_id"],
            c["candidate_memory_id"],
        )
    )
    return {
        "version": 1,
        "mode": "read_only",
        "memory_writes": False,
        "relation_writes": False,
        "lifecycle_writes": False,
        "audit_writes": False,
        "scope": target,
        "include_archived": include_archived,
        "needs_review": needs_review,
        "memory_scan_limit": MEMORY_SCAN_LIMIT,
        "candidate_limit": candidate_limit,
        "scanned_memories": len(scanned),
        "reviewed_memories": len(primaries),
        "memory_scan_truncated": len(primary_rows) > MEMORY_SCAN_LIMIT
        or len(active_rows) > MEMORY_SCAN_LIMIT,
        "candidate_results_truncated": len(candidates) > candidate_limit,
        "candidates": candidates[:candidate_limit],
    }


def format_review(report: dict[str, Any]) -> str:
    """The text report: a header, one tab-separated row per candidate pair, two hint lines."""
    from aidememo.agent_memory.render import inline

    lines = [
        "Relation governance review (read-only)",
        "\t".join(
            (
                f"scope={inline(report['scope'])}",
                f"reviewed={report['reviewed_memories']}",
                f"scanned={report['scanned_memories']}/{report['memory_scan_limit']}",
                f"candidates={len(report['candidates'])}/{report['candidate_limit']}",
                f"memory_scan_truncated={str(report['memory_scan_truncated']).lower()}",
                "candidate_results_truncated=" + str(report["candidate_results_truncated"]).lower(),
            )
        ),
    ]
    for c in report["candidates"]:
        existing = (
            ",".join(f"{r['direction']}:{r['relation']}:{r['id']}" for r in c["existing_relations"])
            or "none"
        )
        lines.append(
            "\t".join(
                (
                    inline(c["primary_memory_id"]),
                    f"rev={c['primary_revision']}",
                    f"scope={inline(c['primary_scope'])}",
                    f"lifecycle={c['primary_lifecycle']}",
                    f"candidate={inline(c['candidate_memory_id'])}",
                    f"candidate_rev={c['candidate_revision']}",
                    f"candidate_scope={inline(c['candidate_scope'])}",
                    f"candidate_lifecycle={c['candidate_lifecycle']}",
                    f"relationship={c['relationship']}",
                    f"state={c['state']}",
                    f"reasons={','.join(c['reason_codes'])}",
                    f"existing={inline(existing)}",
                )
            )
        )
    lines.append("No changes were made. Inspect each ID with `aidememo memory show <id>`.")
    lines.append(
        "Confirm a decision only through `aidememo memory relate ...` or"
        " `aidememo memory challenge ...`."
    )
    return "\n".join(lines)
