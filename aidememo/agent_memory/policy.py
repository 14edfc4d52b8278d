"""Validation of memory writes and reads, run before any write transaction (SPEC.md MEM-4).

The checks, their order (the first failure wins) and their codes are Nuzo 1.2's, so a
multi-fault input gets the same error. Secrets are found by the one core detector
(`aidememo.domain.secrets`) and reported as `{findings: [{kind, message}]}`, never the value.
"""

from __future__ import annotations

import re
from typing import Any

from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.errors import invariant
from aidememo.agent_memory.jstext import is_blank, parse_date, utf16_len
from aidememo.agent_memory.model import (
    CONFIDENCE_STATES,
    DRAFT_FIELDS,
    EVENT_TYPES,
    KINDS,
    PROVENANCE_KINDS,
    RELATIONS,
    Memory,
)
from aidememo.domain.secrets import secret_kinds

SCOPE_PATTERN = re.compile(r"^(user|project|agent|team):[A-Za-z0-9._~:/-]+$")
TAG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
CONTENT_MAX = 8000
QUERY_MAX = 2000
TAGS_MAX = 32
SCOPE_MAX = 256
SOURCE_MAX = 256
ACTOR_MAX = 256
ID_MAX = 256
REASON_MAX = 1000
PROVENANCE_TEXT_MAX = 256
PROVENANCE_PATH_MAX = 512
DATE_MAX = 64
IMPORT_ITEMS_MAX = 1000
RECALL_LIMIT_MAX = 50
RECALL_LIMIT_DEFAULT = 8

# Nuzo's message for each kind it knows; the core detector's further kinds get the same style.
SECRET_MESSAGES = {
    "private_key": "Private key material should not be stored as memory.",
    "github_token": "GitHub tokens should not be stored as memory.",
    "npm_token": "npm access tokens should not be stored as memory.",
    "provider_api_key": "Provider API keys should not be stored as memory.",
    "aws_access_key": "AWS access keys should not be stored as memory.",
    "aws_secret_access_key": "AWS secret access keys should not be stored as memory.",
    "jwt": "JSON Web Tokens should not be stored as memory.",
    "bearer_token": "Bearer tokens should not be stored as memory.",
    "credential_url": "Database URLs containing credentials should not be stored as memory.",
    "session_cookie": "Cookie and session values should not be stored as memory.",
    "generic_api_key": "Credentials should not be stored as memory.",
    "password": "Passwords should not be stored as memory.",
    "slack_token": "Slack tokens should not be stored as memory.",
    "gitlab_token": "GitLab tokens should not be stored as memory.",
}


def secret_findings(text: str) -> list[dict[str, str]]:
    """Every kind of secret in `text` as `{kind, message}` (empty when none)."""
    return [
        {"kind": kind, "message": SECRET_MESSAGES.get(kind, "Secrets should not be stored.")}
        for kind in secret_kinds(text)
    ]


def check_no_secret(text: str, message: str) -> None:
    findings = secret_findings(text)
    invariant(not findings, C.MEMORY_SECRET_DETECTED, message, {"findings": findings})


def check_scope(scope: str) -> None:
    invariant(
        isinstance(scope, str) and len(scope) <= SCOPE_MAX and SCOPE_PATTERN.match(scope),
        C.MEMORY_SCOPE_INVALID,
        "Memory scope is invalid.",
        {"scope": scope, "maxLength": SCOPE_MAX},
    )


def check_tag(tag: str) -> None:
    invariant(
        isinstance(tag, str) and TAG_PATTERN.match(tag),
        C.MEMORY_TAG_INVALID,
        "Memory tag is invalid.",
        {"tag": tag},
    )


def check_tags(tags: list[str], what: str = "Memory has too many tags.") -> None:
    invariant(len(tags) <= TAGS_MAX, C.MEMORY_TAG_LIMIT_EXCEEDED, what, {"maxTags": TAGS_MAX})
    for tag in tags:
        check_tag(tag)


def check_date(value: str | None, name: str) -> None:
    if value is not None:
        invariant(
            isinstance(value, str) and parse_date(value) is not None,
            C.MEMORY_DATE_INVALID,
            "Memory date is invalid.",
            {"field": name},
        )


def _check_name(value: str, what: str, longest: int, empty: C, too_long: C) -> None:
    """A non-blank string of at most `longest` UTF-16 units."""
    invariant(
        isinstance(value, str) and not is_blank(value), empty, f"Memory {what} cannot be empty."
    )
    invariant(
        utf16_len(value) <= longest, too_long, f"Memory {what} is too long.", {"maxLength": longest}
    )


def check_memory(
    *,
    content: str,
    kind: str,
    scope: str,
    tags: list[str],
    source: str,
    confidence: float,
    confidence_state: str | None,
    provenance: dict[str, Any] | None,
    review_after: str | None,
    expires_at: str | None,
) -> None:
    """Nuzo's `assertCanRemember`, in its order."""
    _check_name(content, "content", CONTENT_MAX, C.MEMORY_CONTENT_EMPTY, C.MEMORY_CONTENT_TOO_LONG)
    invariant(
        kind in KINDS, C.MEMORY_KIND_UNSUPPORTED, "Memory kind is not supported.", {"kind": kind}
    )
    check_scope(scope)
    _check_name(source, "source", SOURCE_MAX, C.MEMORY_SOURCE_EMPTY, C.MEMORY_SOURCE_TOO_LONG)
    invariant(
        isinstance(confidence, int | float) and 0 <= confidence <= 1,
        C.MEMORY_CONFIDENCE_INVALID,
        "Memory confidence must be between 0 and 1.",
        {"confidence": confidence},
    )
    if confidence_state is not None:
        invariant(
            confidence_state in CONFIDENCE_STATES,
            C.MEMORY_CONFIDENCE_STATE_INVALID,
            "Memory confidence state is not supported.",
            {"confidenceState": confidence_state},
        )
    check_date(review_after, "reviewAfter")
    check_date(expires_at, "expiresAt")
    check_tags(tags)
    check_no_secret(content, "Memory content looks sensitive.")
    check_provenance(provenance)


def check_record(memory: Memory) -> None:
    """`check_memory` of a whole record: a stored memory about to be written changed."""
    check_memory(**memory.fields(*DRAFT_FIELDS))


def _provenance_text(value: object, name: str) -> None:
    if value is None:
        return
    invariant(
        isinstance(value, str) and not is_blank(value),
        C.MEMORY_PROVENANCE_FIELD_EMPTY,
        "Memory provenance field cannot be empty.",
        {"field": name},
    )
    assert isinstance(value, str)
    invariant(
        utf16_len(value) <= PROVENANCE_TEXT_MAX,
        C.MEMORY_PROVENANCE_FIELD_TOO_LONG,
        "Memory provenance field is too long.",
        {"field": name, "maxLength": PROVENANCE_TEXT_MAX},
    )
    invariant(
        not re.search(r"[\0\r\n]", value),
        C.MEMORY_PROVENANCE_FIELD_INVALID,
        "Memory provenance field contains unsafe characters.",
        {"field": name},
    )


def check_provenance(provenance: dict[str, Any] | None) -> None:
    if provenance is None:
        return
    invariant(
        isinstance(provenance, dict), C.MEMORY_PROVENANCE_INVALID, "Memory provenance is invalid."
    )
    kind = provenance.get("kind")
    invariant(
        kind in PROVENANCE_KINDS,
        C.MEMORY_PROVENANCE_KIND_INVALID,
        "Memory provenance kind is not supported.",
        {"kind": kind},
    )
    for name in ("host", "surface", "thread_id", "action"):
        _provenance_text(provenance.get(name), name)
    reason = provenance.get("reason")
    if reason is not None:
        invariant(
            isinstance(reason, str) and not is_blank(reason),
            C.MEMORY_PROVENANCE_FIELD_EMPTY,
            "Memory provenance field cannot be empty.",
            {"field": "reason"},
        )
        invariant(
            utf16_len(reason) <= REASON_MAX,
            C.MEMORY_PROVENANCE_FIELD_TOO_LONG,
            "Memory provenance field is too long.",
            {"field": "reason", "maxLength": REASON_MAX},
        )
    path = provenance.get("path")
    if path is not None:
        _provenance_text(path, "path")
        invariant(
            utf16_len(path) <= PROVENANCE_PATH_MAX,
            C.MEMORY_PROVENANCE_PATH_TOO_LONG,
            "Memory provenance path is too long.",
            {"maxLength": PROVENANCE_PATH_MAX},
        )
        invariant(
            not path.startswith("/")
            and not path.startswith("\\\\")
            and not re.match(r"^[A-Za-z]:[\\/]", path)
            and ".." not in re.split(r"[\\/]+", path),
            C.MEMORY_PROVENANCE_PATH_UNSAFE,
            "Memory provenance path must be relative and cannot contain parent segments.",
            {"path": path},
        )
    line = provenance.get("line")
    if line is not None:
        invariant(
            isinstance(line, int) and not isinstance(line, bool) and 0 < line <= 1_000_000_000,
            C.MEMORY_PROVENANCE_LINE_INVALID,
            "Memory provenance line must be a positive integer.",
            {"line": line},
        )
    if isinstance(reason, str):
        check_no_secret(reason, "Memory provenance reason looks sensitive.")


def check_actor(actor: str) -> None:
    _check_name(actor, "actor", ACTOR_MAX, C.MEMORY_ACTOR_EMPTY, C.MEMORY_ACTOR_INVALID)


def check_id(memory_id: str) -> None:
    _check_name(memory_id, "ID", ID_MAX, C.MEMORY_ID_EMPTY, C.MEMORY_ID_INVALID)


def check_reason(reason: str | None) -> None:
    if reason is not None:
        invariant(
            utf16_len(reason) <= REASON_MAX,
            C.MEMORY_REASON_TOO_LONG,
            "Memory reason is too long.",
            {"maxLength": REASON_MAX},
        )


def check_required_reason(reason: str) -> None:
    invariant(
        isinstance(reason, str) and not is_blank(reason),
        C.MEMORY_REASON_EMPTY,
        "Memory reason cannot be empty.",
    )
    check_reason(reason)


def check_relation(relation: str, source_id: str, target_id: str, reason: str | None) -> None:
    """Nuzo's `assertCanRelate` (administrator session)."""
    invariant(
        relation in RELATIONS,
        C.MEMORY_RELATION_UNSUPPORTED,
        "Memory relation is not supported.",
        {"relation": relation},
    )
    invariant(
        source_id != target_id,
        C.MEMORY_RELATION_SELF_INVALID,
        "A memory cannot be related to itself.",
        {"id": source_id},
    )
    if reason is not None:
        invariant(
            not is_blank(reason), C.MEMORY_REASON_EMPTY, "Memory relation reason cannot be empty."
        )
        invariant(
            utf16_len(reason) <= REASON_MAX,
            C.MEMORY_REASON_TOO_LONG,
            "Memory relation reason is too long.",
            {"maxLength": REASON_MAX},
        )
        check_no_secret(reason, "Memory relation reason looks sensitive.")


def check_recall(query: str, scope: str, limit: int) -> None:
    invariant(
        isinstance(query, str) and not is_blank(query),
        C.RECALL_QUERY_EMPTY,
        "Recall query cannot be empty.",
    )
    invariant(
        utf16_len(query) <= QUERY_MAX,
        C.RECALL_QUERY_TOO_LONG,
        "Recall query is too long.",
        {"maxLength": QUERY_MAX},
    )
    check_scope(scope)
    invariant(
        isinstance(limit, int) and not isinstance(limit, bool) and 0 < limit <= RECALL_LIMIT_MAX,
        C.RECALL_LIMIT_INVALID,
        "Recall limit must be 1-50.",
        {"limit": limit},
    )


def check_limit(limit: int | None, high: int, code: C, message: str) -> None:
    if limit is not None:
        invariant(
            isinstance(limit, int) and not isinstance(limit, bool) and 0 < limit <= high,
            code,
            message,
            {"limit": limit},
        )


def check_event_types(event_types: list[str]) -> None:
    invariant(
        len(event_types) <= len(EVENT_TYPES),
        C.MEMORY_AUDIT_EVENT_TYPE_LIMIT_EXCEEDED,
        "Audit event type filter has too many values.",
        {"maxEventTypes": len(EVENT_TYPES)},
    )
    for event_type in event_types:
        invariant(
            event_type in EVENT_TYPES,
            C.MEMORY_AUDIT_EVENT_TYPE_INVALID,
            "Audit event type is not supported.",
            {"eventType": event_type},
        )
