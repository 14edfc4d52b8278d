"""Typed create and transition requests, and the records they become (SPEC.md TYP-*).

Requests name no identity: `created_by`, `actor_id` and `from_actor` come from the token,
and `source_id` of facts, contexts and handoffs from their session.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from aidememo.domain.canonical import JsonValue
from aidememo.domain.envelope import check_fields, read_revision, read_str, require_object
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.handoff import HandoffRecord, Outcome
from aidememo.domain.ids import validate_id
from aidememo.domain.limits import CONTENT_MAX_BYTES, FOCUS_MAX_BYTES, TOPIC_MAX_BYTES

DEFAULT_SOURCE_ID = "default"
_CREATE = frozenset({"command_id", "payload"})
_TRANSITION = frozenset({"command_id", "expected_revision", "payload"})


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """`{command_id, payload}` of a typed create."""

    command_id: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TransitionRequest:
    """`{command_id, expected_revision, payload}` of a handoff transition (HO-1)."""

    command_id: str
    expected_revision: int
    payload: dict[str, Any]


def parse_create(value: JsonValue) -> CreateRequest:
    """Decode a typed create body."""
    obj = require_object(value, "request")
    check_fields(obj, _CREATE, frozenset(), "request")
    command_id = validate_id(obj["command_id"], "command_id")
    return CreateRequest(command_id, require_object(obj["payload"], "payload"))


def parse_transition(value: JsonValue) -> TransitionRequest:
    """Decode a transition body; `expected_revision` is required and positive."""
    obj = require_object(value, "request")
    check_fields(obj, _TRANSITION, frozenset(), "request")
    command_id = validate_id(obj["command_id"], "command_id")
    expected = read_revision(obj["expected_revision"], required=True)
    assert expected is not None  # required=True never yields None
    return TransitionRequest(command_id, expected, require_object(obj["payload"], "payload"))


def text_field(
    obj: dict[str, Any], key: str, max_bytes: int, *, optional: bool = False, topic: bool = False
) -> str | None:
    """A bounded text field; topics also refuse control characters and blank text."""
    value = read_str(obj, key, optional=optional)
    if value is None:
        return None
    size = len(value.encode("utf-8"))
    if not 0 < size <= max_bytes and not (optional and size == 0):
        raise fail(ErrorCode.INVALID_COMMAND, f"{key} must be 1-{max_bytes} bytes")
    if topic:
        if not value.strip():
            raise fail(ErrorCode.INVALID_COMMAND, f"{key} must not be blank")
        if any((ord(ch) < 32 and ch not in "\n\r\t") or ord(ch) == 127 for ch in value):
            raise fail(ErrorCode.INVALID_COMMAND, f"{key} must not contain control characters")
    return value


def optional_id(obj: dict[str, Any], key: str) -> str | None:
    """An optional identifier field."""
    value = obj.get(key)
    return None if value is None else validate_id(value, key)


@dataclass(frozen=True, slots=True)
class SessionInput:
    """`{session_id, source_id?, topic}`."""

    session_id: str
    source_id: str
    topic: str

    @classmethod
    def parse(cls, payload: dict[str, Any]) -> SessionInput:
        """Validate a session payload."""
        check_fields(
            payload, frozenset({"session_id", "topic"}), frozenset({"source_id"}), "payload"
        )
        session_id = validate_id(payload["session_id"], "session_id")
        source_id = optional_id(payload, "source_id") or DEFAULT_SOURCE_ID
        topic = text_field(payload, "topic", TOPIC_MAX_BYTES, topic=True)
        assert topic is not None
        return cls(session_id, source_id, topic)


@dataclass(frozen=True, slots=True)
class FactInput:
    """`{fact_id, session_id, content}`."""

    fact_id: str
    session_id: str
    content: str

    @classmethod
    def parse(cls, payload: dict[str, Any]) -> FactInput:
        """Validate a fact payload."""
        check_fields(
            payload, frozenset({"fact_id", "session_id", "content"}), frozenset(), "payload"
        )
        fact_id = validate_id(payload["fact_id"], "fact_id")
        session_id = validate_id(payload["session_id"], "session_id")
        content = text_field(payload, "content", CONTENT_MAX_BYTES)
        assert content is not None
        return cls(fact_id, session_id, content)


@dataclass(frozen=True, slots=True)
class ContextInput:
    """`{context_id, handoff_id, session_id, to_actor, content}`."""

    context_id: str
    handoff_id: str
    session_id: str
    to_actor: str
    content: str

    @classmethod
    def parse(cls, payload: dict[str, Any]) -> ContextInput:
        """Validate a handoff-context payload."""
        fields = frozenset({"context_id", "handoff_id", "session_id", "to_actor", "content"})
        check_fields(payload, fields, frozenset(), "payload")
        content = text_field(payload, "content", CONTENT_MAX_BYTES)
        assert content is not None
        return cls(
            validate_id(payload["context_id"], "context_id"),
            validate_id(payload["handoff_id"], "handoff_id"),
            validate_id(payload["session_id"], "session_id"),
            validate_id(payload["to_actor"], "to_actor"),
            content,
        )


@dataclass(frozen=True, slots=True)
class HandoffInput:
    """`{handoff_id, session_id, to_actor, focus?, done_when?, context_id?}`."""

    handoff_id: str
    session_id: str
    to_actor: str
    focus: str | None
    done_when: str | None
    context_id: str | None

    @classmethod
    def parse(cls, payload: dict[str, Any]) -> HandoffInput:
        """Validate a handoff payload."""
        check_fields(
            payload,
            frozenset({"handoff_id", "session_id", "to_actor"}),
            frozenset({"focus", "done_when", "context_id"}),
            "payload",
        )
        return cls(
            validate_id(payload["handoff_id"], "handoff_id"),
            validate_id(payload["session_id"], "session_id"),
            validate_id(payload["to_actor"], "to_actor"),
            text_field(payload, "focus", FOCUS_MAX_BYTES, optional=True),
            text_field(payload, "done_when", FOCUS_MAX_BYTES, optional=True),
            optional_id(payload, "context_id"),
        )

    def record(self, source_id: str, from_actor: str) -> HandoffRecord:
        """The pending handoff this request sends: the request's fields, the session's
        source and the sender."""
        return HandoffRecord(source_id=source_id, from_actor=from_actor, **asdict(self))


def parse_claim(payload: dict[str, Any]) -> str:
    """`{claim_id}` of accept and heartbeat."""
    check_fields(payload, frozenset({"claim_id"}), frozenset(), "payload")
    return validate_id(payload["claim_id"], "claim_id")


def parse_return(payload: dict[str, Any]) -> tuple[str, str, Outcome, str | None]:
    """`{claim_id, result_fact_id, outcome, result_artifact_id?}` of return (HO-9)."""
    check_fields(
        payload,
        frozenset({"claim_id", "result_fact_id", "outcome"}),
        frozenset({"result_artifact_id"}),
        "payload",
    )
    claim_id = validate_id(payload["claim_id"], "claim_id")
    fact_id = validate_id(payload["result_fact_id"], "result_fact_id")
    outcome = payload["outcome"]
    if outcome not in ("succeeded", "failed"):
        raise fail(ErrorCode.INVALID_COMMAND, "outcome must be succeeded or failed")
    artifact = payload.get("result_artifact_id")
    artifact_id = None if artifact is None else validate_id(artifact, "result_artifact_id")
    return claim_id, fact_id, Outcome(outcome), artifact_id
