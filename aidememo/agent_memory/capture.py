"""Capture suggestion and confirmation (SPEC.md MEM-7).

`suggest_capture` validates a draft an agent inferred and reports an exact duplicate (same scope,
active, equal `capture_key`) without writing. In `bounded` mode it also classifies the draft's
relationship to existing memories from bounded evidence: every active memory of the scope while
it has at most 100, otherwise at most 20 FTS-prefiltered candidates, and such evidence is
reported as not exhaustive, so it can never establish that a draft is independent.
`confirm_capture` applies the user's decision; a confirmed `create` re-checks for the exact
duplicate inside its write transaction, so two identical confirmations create one memory.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aidememo.agent_memory import policy
from aidememo.agent_memory.db import COLUMNS, memory_from_row
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.jstext import js_trim
from aidememo.agent_memory.model import CAPTURE_DECISIONS, DRAFT_FIELDS, UNSET, Memory
from aidememo.agent_memory.recall import fts_query
from aidememo.agent_memory.schema import capture_key

if TYPE_CHECKING:
    from aidememo.agent_memory.core import AgentMemoryCore

EXHAUSTIVE_SCAN_LIMIT = 100
CANDIDATE_LIMIT = 20
RETURNED_LIMIT = 3
TERM_LIMIT = 8
REASON_LIMIT = 1000
# A confirmed capture creates its memory with these governance fields unless they are given.
_CONFIRMED_GOVERNANCE = {
    "confidence_state": "user_confirmed",
    "provenance": None,
    "review_after": None,
    "expires_at": None,
}


def find_candidates(
    store: AgentMemoryCore,
    scope: str,
    key: str,
    query: str,
    tags: Sequence[str],
    *,
    include_candidates: bool,
    exclude: str | None = None,
) -> tuple[Memory | None, list[Memory], bool]:
    """`(exact duplicate, candidates, exhaustive)` through `idx_memories_active_capture_key`."""
    conn = store.db.conn
    excl = "" if exclude is None else " AND id <> ?"
    extra: tuple[str, ...] = () if exclude is None else (exclude,)
    row = conn.execute(
        f"SELECT {COLUMNS} FROM memories WHERE scope = ? AND archived_at IS NULL AND"
        f" capture_key = ?{excl} ORDER BY id ASC LIMIT 1",
        (scope, key, *extra),
    ).fetchone()
    duplicate = None if row is None else memory_from_row(row)
    if not include_candidates or duplicate is not None:
        return duplicate, [], True
    count = conn.execute(
        f"SELECT COUNT(*) FROM memories WHERE scope = ? AND archived_at IS NULL{excl}",
        (scope, *extra),
    ).fetchone()[0]
    if count <= EXHAUSTIVE_SCAN_LIMIT:
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM memories WHERE scope = ? AND archived_at IS"
            f" NULL{excl} ORDER BY id ASC",
            (scope, *extra),
        ).fetchall()
        return None, [memory_from_row(r) for r in rows], True
    match = fts_query(f"{query} {' '.join(tags)}")
    if not match:
        return None, [], False
    cols = ", ".join(f"m.{c.strip()}" for c in COLUMNS.split(","))
    rows = conn.execute(
        f"SELECT {cols} FROM memories_fts JOIN memories m ON m.id = memories_fts.id"
        " WHERE memories_fts MATCH ? AND m.scope = ? AND m.archived_at IS NULL"
        f"{'' if exclude is None else ' AND m.id <> ?'}"
        " ORDER BY bm25(memories_fts, 0.0, 0.0, 1.0, 5.0), m.id ASC LIMIT ?",
        (match, scope, *extra, CANDIDATE_LIMIT),
    ).fetchall()
    return None, [memory_from_row(r) for r in rows], False


# -- bounded relationship evidence ---------------------------------------------------------

_STOP = frozenset(
    "a an and are as at before by com da de do does e em for from has have in is it la le na no"
    " o of on or os para por que should the to use uses user with workflow process review revisao"
    " revisão now change changes important は の する".split()
)
_GENERIC = frozenset({"release", "branch", "branches", "deployment", "deploy"})
_DOMAIN_PAIRS = (
    "answer:response answers:response resposta:response respostas:response 応答:response"
    " final:response concise:brevity objetiva:brevity objetivas:brevity 簡潔:brevity"
    " detailed:detail detalhada:detail detalhadas:detail 詳細:detail timezone:schedule"
    " schedules:schedule utc:schedule sao:schedule paulo:schedule npm:npm publishing:npm"
    " publish:npm provenance:npm sqlite:storage postgresql:storage storage:storage stores:storage"
    " memory:memory memories:memory documentation:docs docs:docs mkdocs:docs"
    " validation:validation preview:validation deploy:deploy deployment:deploy"
    " implantacao:deploy producao:deploy rollback:deploy api:api json:api correlation:api"
    " backup:backup export:backup exports:backup recovery:backup accessibility:accessibility"
    " frontend:accessibility screen:accessibility reader:accessibility keyboard:accessibility"
    " controls:accessibility forms:accessibility wcag:accessibility dependency:dependency"
    " dependencies:dependency versions:dependency pin:dependency critical:dependency"
    " release:release branch:release branches:release security:security"
    " bezpieczenstwa:security logi:logging logs:logging logging:logging checklist:deploy"
    " component:deploy components:deploy owner:ownership"
)
_DOMAINS = dict(pair.split(":") for pair in _DOMAIN_PAIRS.split())
_CONTRADICTIONS = (
    ("concise", "detailed"),
    ("objetiva", "detalhada"),
    ("sqlite", "postgresql"),
    ("trusted publishing", "manual token"),
    ("america sao paulo", "utc"),
    ("every finished", "weekly"),
    ("only mkdocs", "preview build"),
    ("簡潔", "詳細"),
)
_NON_WORD = re.compile(r"[^\w]+|_+")


def _normalize(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).lower()


def _terms(text: str) -> set[str]:
    out = set()
    for word in _NON_WORD.sub(" ", _normalize(text)).split():
        term = re.sub(r"(?:ing|ed|es|s)$", "", word) if re.fullmatch(r"[a-z0-9]+", word) else word
        if len(term) >= 2 and term not in _STOP:
            out.add(term)
    return out


def _domains(text: str, tags: Sequence[str]) -> set[str]:
    found = {_DOMAINS.get(t, t) for t in _terms(text)}
    for tag in tags:
        found |= {_DOMAINS.get(t, t) for t in _terms(tag)}
    return found


def _matched_terms(left: str, right: str) -> list[str]:
    return sorted(_terms(left) & _terms(right))[:TERM_LIMIT]


def _contradiction(left: str, right: str) -> int:
    combined = f"{_normalize(left)} {_normalize(right)}"
    score = 2 if re.search(r"\b(instead|rather than|instead of|now|manual|only)\b", combined) else 0
    score += 2 if re.search(r"\b(agora|em vez)\b", combined) else 0
    return score + sum(2 for a, b in _CONTRADICTIONS if a in combined and b in combined)


def _score(draft: dict[str, Any], memory: Memory) -> dict[str, Any]:
    terms = _matched_terms(draft["content"], memory.content)
    tags = sorted(set(draft["tags"]) & set(memory.tags))[:TERM_LIMIT]
    domain = len(_domains(draft["content"], draft["tags"]) & _domains(memory.content, memory.tags))
    subject = len(terms) + len(_domains(draft["content"], []) & _domains(memory.content, []))
    contra = _contradiction(draft["content"], memory.content)
    d_dom, m_dom = _domains(draft["content"], []), _domains(memory.content, memory.tags)
    focus = sum(
        2
        for d in ("dependency", "accessibility", "backup", "api", "docs", "npm", "response")
        if d in d_dom and d in m_dom
    )
    score = len(terms) * 2 + len(tags) + domain * 2 + subject + contra + focus
    return {
        "memory": memory,
        "terms": terms,
        "tags": tags,
        "subject": subject,
        "domain": domain,
        "contra": contra,
        "score": score,
    }


def _is_update(c: dict[str, Any]) -> bool:
    return bool(
        c["contra"] >= 2 and (c["subject"] >= 2 or c["domain"] >= 1 or len(c["terms"]) >= 3)
    )


def _is_related(c: dict[str, Any]) -> bool:
    cand_domains = _domains(c["memory"].content, c["memory"].tags)
    significant = any(
        c["domain"] > 0 and d in cand_domains
        for d in (
            "api",
            "accessibility",
            "dependency",
            "backup",
            "docs",
            "npm",
            "response",
            "logging",
            "security",
        )
    ) or ("deploy" in cand_domains and len(c["terms"]) >= 2)
    specific = len([t for t in c["terms"] if t not in _GENERIC]) >= 2
    return bool(c["score"] >= 4 and (significant or specific or len(c["tags"]) >= 1))


def _candidate(c: dict[str, Any]) -> dict[str, Any]:
    cues = []
    if c["contra"] > 0:
        cues.append("revision cue")
    if c["domain"] > 0:
        cues.append("shared durable subject")
    if c["tags"]:
        cues.append("tag overlap")
    if c["terms"]:
        cues.append("matched terms: " + ", ".join(c["terms"][:TERM_LIMIT]))
    reason = "; ".join(cues) if cues else "Bounded same-scope candidate."
    return {
        "memory": c["memory"],
        "matched_terms": c["terms"],
        "matched_tags": c["tags"],
        "reason": reason[:REASON_LIMIT],
    }


def _evidence(
    reason: str,
    primary: str | None,
    evaluated: int,
    exhaustive: bool,
    truncated: bool,
    candidates: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "version": 1,
        "primary_memory_id": primary,
        "candidate_limit": CANDIDATE_LIMIT,
        "returned_limit": RETURNED_LIMIT,
        "evaluated_count": evaluated,
        "search_exhaustive": exhaustive,
        "evidence_truncated": truncated,
        "reason": reason[:REASON_LIMIT],
        "candidates": candidates,
    }


def bounded(
    draft: dict[str, Any], duplicate: Memory | None, memories: list[Memory], exhaustive: bool
) -> tuple[str, str, dict[str, Any]]:
    """`(status, relationship, evidence)` of the bounded relationship classifier."""
    if duplicate is not None:
        return (
            "duplicate",
            "exact_duplicate",
            _evidence(
                "The draft matches an active same-scope memory after exact capture normalization.",
                duplicate.id,
                1,
                True,
                False,
                [
                    {
                        "memory": duplicate,
                        "matched_terms": _matched_terms(draft["content"], duplicate.content),
                        "matched_tags": sorted(set(draft["tags"]) & set(duplicate.tags))[
                            :TERM_LIMIT
                        ],
                        "reason": "Exact normalized content match in the same active scope.",
                    }
                ],
            ),
        )
    pool = sorted(
        (m for m in memories if m.archived_at is None and m.scope == draft["scope"]),
        key=lambda m: m.id,
    )
    scored = [c for c in (_score(draft, m) for m in pool) if c["score"] >= 4]
    scored.sort(
        key=lambda c: (-c["score"], -c["contra"], -c["domain"], -c["subject"], c["memory"].id)
    )
    evaluated = scored[:CANDIDATE_LIMIT]
    complete = exhaustive and len(scored) <= CANDIDATE_LIMIT
    returned = [_candidate(c) for c in evaluated if _is_update(c) or _is_related(c)][
        :RETURNED_LIMIT
    ]
    truncated = not exhaustive or len(evaluated) > RETURNED_LIMIT or len(scored) > CANDIDATE_LIMIT
    normalized = _normalize(draft["content"])
    vague = (
        sum(
            term in normalized
            for term in ("preferred", "process", "workflow", "different", "padrao", "preferido")
        )
        >= 2
    )
    if vague and len(_terms(draft["content"])) <= TERM_LIMIT:
        return (
            "review",
            "uncertain",
            _evidence(
                "The draft uses broad or underspecified wording, so the relationship cannot be"
                " classified safely.",
                None,
                len(evaluated),
                complete,
                truncated,
                returned,
            ),
        )
    for test, kind, reason in (
        (
            _is_update,
            "update_candidate",
            "The draft appears to revise an active same-scope memory"
            " rather than add a separate memory.",
        ),
        (
            _is_related,
            "related",
            "The draft shares durable subject matter with an active"
            " same-scope memory, but does not clearly replace it.",
        ),
    ):
        hit = next((c for c in evaluated if test(c)), None)
        if hit is not None:
            return (
                "review",
                kind,
                _evidence(
                    reason, hit["memory"].id, len(evaluated), complete, truncated, [_candidate(hit)]
                ),
            )
    if not complete:
        return (
            "review",
            "uncertain",
            _evidence(
                "Candidate retrieval was not exhaustive enough to safely classify the draft as"
                " independent.",
                None,
                len(evaluated),
                False,
                truncated,
                returned,
            ),
        )
    return (
        "ready",
        "independent",
        _evidence(
            "No active same-scope candidate met the bounded evidence threshold.",
            None,
            len(evaluated),
            True,
            False,
            [],
        ),
    )


def capture_json(value: Any) -> Any:
    """A capture answer as JSON values: each memory in it as its capture record."""
    if isinstance(value, Memory):
        return value.to_capture_json()
    if isinstance(value, dict):
        return {k: capture_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [capture_json(v) for v in value]
    return value


# -- operations ----------------------------------------------------------------------------


def suggest_capture(
    store: AgentMemoryCore,
    content: str,
    *,
    kind: str,
    reason: str,
    scope: str | None = None,
    tags: Sequence[str] = (),
    source: str = "aidememo:capture-suggestion",
    confidence: float | None = None,
    confidence_state: str | None = "inferred",
    provenance: dict[str, Any] | None = None,
    review_after: str | None = None,
    expires_at: str | None = None,
    relationship_mode: str = "exact",
) -> dict[str, Any]:
    """Validate a draft and report duplicates (and, `bounded`, its relationship); never writes."""
    policy.check_required_reason(reason)
    checked = store.new_memory(
        content=content,
        kind=kind,
        scope=scope or store.scope,
        tags=tags,
        source=source,
        confidence=confidence,
        confidence_state=confidence_state,
        provenance=provenance,
        review_after=review_after,
        expires_at=expires_at,
    )
    draft = checked.fields(*DRAFT_FIELDS) | {"reason": js_trim(reason)}
    duplicate, candidates, exhaustive = find_candidates(
        store,
        draft["scope"],
        capture_key(draft["content"]),
        draft["content"],
        draft["tags"],
        include_candidates=relationship_mode == "bounded",
    )
    out: dict[str, Any] = {
        "status": "duplicate" if duplicate else "ready",
        "memory_writes": False,
        "requires_confirmation": True,
        "draft": draft,
        "duplicate": duplicate,
    }
    if relationship_mode == "bounded":
        status, relationship, evidence = bounded(draft, duplicate, candidates, exhaustive)
        out |= {
            "status": status,
            "relationship_mode": "bounded",
            "relationship": relationship,
            "relationship_evidence": evidence,
        }
    return out


def confirm_capture(
    store: AgentMemoryCore,
    content: str,
    *,
    decision: str,
    kind: str,
    reason: str,
    scope: str | None = None,
    tags: Sequence[str] = (),
    source: str = "aidememo:capture-confirmed",
    confidence: float | None = None,
    confidence_state: Any = UNSET,
    provenance: Any = UNSET,
    review_after: Any = UNSET,
    expires_at: Any = UNSET,
    confirm: bool = False,
    target_memory_id: str | None = None,
    expected_revision: int | None = None,
    actor: str = "core",
) -> dict[str, Any]:
    """Apply a user's decision on a draft: create, update, keep_separate, clarify or reject."""
    policy.check_required_reason(reason)
    policy.check_actor(actor)
    result = {
        "decision": decision,
        "status": "skipped",
        "memory_writes": False,
        "requires_confirmation": False,
        "reason": js_trim(reason),
        "memory": None,
    }
    if decision == "reject":
        return result
    if decision == "clarify":
        return result | {"status": "needs_clarification"}
    if decision not in CAPTURE_DECISIONS:
        raise AgentMemoryError(
            C.MEMORY_CAPTURE_DECISION_INVALID,
            "Capture decision is invalid.",
            {"decision": decision},
        )
    if confirm is not True:
        raise AgentMemoryError(
            C.MEMORY_CAPTURE_CONFIRMATION_REQUIRED,
            "Confirmed capture writes require explicit confirmation.",
            {"decision": decision},
        )
    target = scope or store.scope
    # The draft as an update gives it: an UNSET governance field is left as it is.
    draft = {
        "content": content,
        "kind": kind,
        "scope": target,
        "tags": list(tags),
        "confidence": confidence,
        "confidence_state": confidence_state,
        "provenance": provenance,
        "review_after": review_after,
        "expires_at": expires_at,
    }
    if decision == "update":
        if target_memory_id is None:
            raise AgentMemoryError(
                C.MEMORY_TARGET_REQUIRED,
                "Confirmed capture updates require a target memory.",
                {"decision": decision},
            )
        policy.check_id(target_memory_id)
        if expected_revision is None:
            raise AgentMemoryError(
                C.MEMORY_EXPECTED_REVISION_REQUIRED,
                "Confirmed capture updates require the displayed expected revision.",
                {"decision": decision, "targetMemoryId": target_memory_id},
            )
        memory = store.update(
            target_memory_id, expected_revision=expected_revision, actor=actor, **draft
        )
        return result | {"status": "updated", "memory_writes": True, "memory": memory}
    fields = draft | {"source": source}
    for name, default in _CONFIRMED_GOVERNANCE.items():
        if fields[name] is UNSET or fields[name] is None:
            fields[name] = default
    if decision == "keep_separate":
        memory = store.remember(actor=actor, **fields)
        return result | {"status": "created", "memory_writes": True, "memory": memory}
    fresh = store.new_memory(**fields)
    with store.db.write():
        duplicate, _, _ = find_candidates(
            store, target, capture_key(content), content, tags, include_candidates=False
        )
        if duplicate is None:
            store.persist(fresh, actor)
    if duplicate is not None:
        return result | {"memory": duplicate}
    return result | {"status": "created", "memory_writes": True, "memory": fresh}
