"""Stable command and claim ids derived from the operation (SPEC.md ID-4).

A client that repeats an operation after a transport error must send the same command id, so
the receipt check (CMD-3) replays the first answer instead of applying the operation twice.
These functions derive that id from what identifies the operation: a create from the resource
id, an accept's claim from the actor and attempt number, a heartbeat from the claim and the
revision it renews, a return from the claim and its exact evidence. Every client (the Python
SDK, the CLI, an MCP server at the edge) calls these, so they agree on every runtime.

An id is `prefix + "_" + sha256(material).hexdigest()`, where the material is the prefix and
then each part, every one written as its UTF-8 length (8 bytes, big-endian) followed by its
UTF-8 bytes. Length framing keeps `("ab", "c")` and `("a", "bc")` apart, and the prefix in
the material keeps the kinds of id apart even where their parts coincide. The longest result
is 82 ASCII characters of `[a-z0-9_]`, so it is always a valid identifier (ID-1).
"""

from __future__ import annotations

import hashlib

from aidememo.domain.canonical import canonical_bytes
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id

CREATE_PREFIXES = {
    "session": "command_session",
    "fact": "command_fact",
    "handoff_context": "command_context",
    "handoff": "command_send",
}
"""The prefix of a create's command id, by the kind of record the create writes."""

CLAIM = "claim"
ACCEPT = "command_accept"
HEARTBEAT = "command_heartbeat"
RETURN = "command_return"
OUTCOMES = ("succeeded", "failed")

_LENGTH_BYTES = 8


def stable_id(prefix: str, *parts: str | bytes) -> str:
    """`prefix_` and the SHA-256 hex of the length-framed prefix and parts (ID-4).

    A `str` part is hashed as its UTF-8 bytes; a `bytes` part as it is.
    """
    digest = hashlib.sha256()
    for part in (prefix, *parts):
        data = part.encode("utf-8") if isinstance(part, str) else part
        digest.update(len(data).to_bytes(_LENGTH_BYTES, "big"))
        digest.update(data)
    return f"{prefix}_{digest.hexdigest()}"


def _positive(value: object, field: str) -> str:
    """`value` as decimal ASCII, if it is a positive integer (not a bool)."""
    if type(value) is not int or value < 1:
        raise fail(ErrorCode.INVALID_COMMAND, f"{field} must be a positive integer")
    return str(value)


def create_command_id(project_id: str, kind: str, resource_id: str) -> str:
    """The command id of creating record `kind`/`resource_id` in `project_id` (ID-4).

    `kind` is one of `session`, `fact`, `handoff_context` and `handoff` (a send).
    """
    prefix = CREATE_PREFIXES.get(kind)
    if prefix is None:
        kinds = ", ".join(CREATE_PREFIXES)
        raise fail(ErrorCode.INVALID_COMMAND, f"kind must be one of {kinds}")
    return stable_id(
        prefix, validate_id(project_id, "project_id"), validate_id(resource_id, "resource_id")
    )


def claim_id(project_id: str, actor_id: str, handoff_id: str, attempt: int) -> str:
    """The claim `actor_id` accepts `handoff_id` with on attempt number `attempt` (ID-4).

    `attempt` is the handoff's `attempt_count` after the accept: 1 for the first claim, and
    one more for each claim that replaces an expired or failed one (HO-2, HO-3).
    """
    return stable_id(
        CLAIM,
        validate_id(project_id, "project_id"),
        validate_id(actor_id, "actor_id"),
        validate_id(handoff_id, "handoff_id"),
        _positive(attempt, "attempt"),
    )


def accept_command_id(project_id: str, actor_id: str, handoff_id: str, claim: str) -> str:
    """The command id of `actor_id` accepting `handoff_id` with `claim` (ID-4)."""
    return stable_id(
        ACCEPT,
        validate_id(project_id, "project_id"),
        validate_id(actor_id, "actor_id"),
        validate_id(handoff_id, "handoff_id"),
        validate_id(claim, "claim_id"),
    )


def heartbeat_command_id(
    project_id: str, actor_id: str, handoff_id: str, claim: str, expected_revision: int
) -> str:
    """The command id of a heartbeat of `claim` sent with `expected_revision` (ID-4).

    The revision is the heartbeat's evidence: it tells one renewal from the next, so the
    identical request replays and the next heartbeat is a new command.
    """
    return stable_id(
        HEARTBEAT,
        validate_id(project_id, "project_id"),
        validate_id(actor_id, "actor_id"),
        validate_id(handoff_id, "handoff_id"),
        validate_id(claim, "claim_id"),
        _positive(expected_revision, "expected_revision"),
    )


def return_evidence(
    result_fact_id: str, outcome: str, result_artifact_id: str | None = None
) -> bytes:
    """The canonical bytes (CJ-1) of a return's evidence `{outcome, result_fact_id}`, with
    `result_artifact_id` only when the return names one (HO-9)."""
    if outcome not in OUTCOMES:
        raise fail(ErrorCode.INVALID_COMMAND, "outcome must be succeeded or failed")
    fact = validate_id(result_fact_id, "result_fact_id")
    evidence = {"result_fact_id": fact, "outcome": outcome}
    if result_artifact_id is not None:
        evidence["result_artifact_id"] = validate_id(result_artifact_id, "result_artifact_id")
    return canonical_bytes(evidence)


def return_command_id(
    project_id: str,
    actor_id: str,
    handoff_id: str,
    claim: str,
    result_fact_id: str,
    outcome: str,
    result_artifact_id: str | None = None,
) -> str:
    """The command id of returning `handoff_id` under `claim` with this evidence (ID-4)."""
    return stable_id(
        RETURN,
        validate_id(project_id, "project_id"),
        validate_id(actor_id, "actor_id"),
        validate_id(handoff_id, "handoff_id"),
        validate_id(claim, "claim_id"),
        return_evidence(result_fact_id, outcome, result_artifact_id),
    )
