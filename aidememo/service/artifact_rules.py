"""The artifact lifecycle's rules that need no store (SPEC.md ART-*): the reservation
payload's checks, the fingerprints, when a reservation is no longer live, and the failure
gate's test hook.

`crash_point(name)` is the failure gate's hook (ART-9): inert unless the environment variable
`AIDEMEMO_TEST_CRASH_AT` names the point, then the process reports the point on stderr and
exits at once, as a SIGKILL would stop it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aidememo.domain.artifacts import (
    ARTIFACT_KIND,
    MAX_DIRECT_BODY_BYTES,
    RESERVATION_TTL_MS_DEFAULT,
    RESERVATION_TTL_MS_MAX,
    Publication,
    Reservation,
    State,
    validate_content_type,
    validate_path,
    validate_sha256,
)
from aidememo.domain.canonical import JsonValue, canonical_bytes, fingerprint_of_payload
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.domain.model import ChangeOp, ResourceRef, Scope
from aidememo.ports import ReadTx

CRASH_ENV = "AIDEMEMO_TEST_CRASH_AT"


def crash_point(name: str) -> None:
    """Exit the process here when `AIDEMEMO_TEST_CRASH_AT` is `name` (ART-9); else nothing."""
    if os.environ.get(CRASH_ENV) == name:
        sys.stderr.write(f"aidememo: crash point {name} reached\n")
        sys.stderr.flush()
        os._exit(137)


@dataclass(frozen=True, slots=True)
class ReserveRequest:
    """A reservation command's payload, validated."""

    path: str
    size_bytes: int
    content_type: str
    sha256: str | None
    mutation_token: str | None
    ttl_ms: int


def parse_reserve(payload: JsonValue, max_bytes: int = MAX_DIRECT_BODY_BYTES) -> ReserveRequest:
    """The strict payload of `POST .../artifact-reservations` (ART-2); `max_bytes` is the
    body store's upload limit (the direct route's, or a grant's: GRANT-3)."""
    if not isinstance(payload, dict):
        raise fail(ErrorCode.INVALID_COMMAND, "payload must be an object")
    allowed = {"path", "size_bytes", "content_type", "sha256", "mutation_token", "ttl_ms"}
    extra = sorted(set(payload) - allowed)
    if extra:
        raise fail(ErrorCode.INVALID_COMMAND, f"unknown payload field {extra[0]!r}")
    path = validate_path(payload.get("path"))
    size = payload.get("size_bytes")
    if type(size) is not int or size < 0:
        raise fail(ErrorCode.INVALID_COMMAND, "size_bytes must be a non-negative integer")
    if size > max_bytes:
        raise fail(
            ErrorCode.ARTIFACT_UPLOAD_TOO_LARGE,
            f"size_bytes is over the upload limit of {max_bytes} bytes",
        )
    content_type = validate_content_type(payload.get("content_type", "application/octet-stream"))
    sha = payload.get("sha256")
    sha256 = None if sha is None else validate_sha256(sha)
    token = payload.get("mutation_token")
    mutation_token = None if token is None else validate_id(token, "mutation_token")
    ttl = payload.get("ttl_ms", RESERVATION_TTL_MS_DEFAULT)
    if type(ttl) is not int or not 1 <= ttl <= RESERVATION_TTL_MS_MAX:
        raise fail(
            ErrorCode.INVALID_COMMAND, f"ttl_ms must be an integer in 1..{RESERVATION_TTL_MS_MAX}"
        )
    return ReserveRequest(path, size, content_type, sha256, mutation_token, ttl)


def fingerprint(project_id: str, operation: str, artifact_id: str, payload: JsonValue) -> str:
    return fingerprint_of_payload(
        project_id=project_id,
        expected_revision=None,
        operation=operation,
        resource_kind=ARTIFACT_KIND,
        resource_id=artifact_id,
        change=ChangeOp.UPSERT.value,
        payload_bytes=canonical_bytes(payload),
    )


def not_live(r: Reservation, now_ms: int) -> AidememoError | None:
    """Why a reservation can no longer take an upload or a publication, or None."""
    if r.state in (State.EXPIRED,) or (r.live and r.expires_at_ms <= now_ms):
        return fail(ErrorCode.ARTIFACT_RESERVATION_EXPIRED, "the reservation has expired")
    if r.state == State.ABORTED:
        return fail(ErrorCode.ARTIFACT_CONFLICT, "the reservation was aborted")
    if r.state == State.FAILED:
        return fail(ErrorCode.ARTIFACT_CONFLICT, "the reservation failed verification")
    if r.state == State.PUBLISHED:
        return fail(ErrorCode.ARTIFACT_CONFLICT, "the reservation is published already")
    return None


def current_publication(
    tx: ReadTx, scope: Scope, artifact_id: str
) -> tuple[int, Publication | None]:
    res = tx.get_resource(scope, ResourceRef(ARTIFACT_KIND, artifact_id))
    if res is None or res.body is None:
        return (0 if res is None else res.revision), None
    return res.revision, Publication.of(res.body)


def hashing(chunks: Iterator[bytes], digest: Any) -> Iterator[bytes]:
    for chunk in chunks:
        digest.update(chunk)
        yield chunk


def orphan(scope: Scope, pub: Publication) -> Reservation:
    """A stand-in reservation for a publication whose reservation row was pruned."""
    return Reservation(
        tenant_id=scope.tenant_id,
        project_id=scope.project_id,
        reservation_id=pub.reservation_id,
        command_id="",
        fingerprint="",
        actor_id="",
        path=pub.path,
        artifact_id=pub.artifact_id,
        generation=pub.generation,
        size_bytes=pub.size_bytes,
        content_type=pub.content_type,
        sha256=pub.sha256,
        base_revision=0,
        state=State.PUBLISHED,
        created_at_ms=0,
        expires_at_ms=0,
    )
