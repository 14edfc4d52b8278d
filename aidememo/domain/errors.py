"""Error codes and their HTTP statuses, defined once.

Every failure the service reports carries one `ErrorCode`; clients switch on the code, never
on the message. `HTTP_STATUS` is the only place a code is mapped to a status, so the origin
and the edge answer identically.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Stable, snake_case error codes of the wire contract (SPEC.md ERR-1)."""

    INVALID_IDENTIFIER = "invalid_identifier"
    IDENTITY_MISMATCH = "identity_mismatch"
    AUTHENTICATION_FAILED = "authentication_failed"
    PROJECT_UNAUTHORIZED = "project_unauthorized"
    PROJECT_SCOPE_MISMATCH = "project_scope_mismatch"
    COMMAND_CONFLICT = "command_conflict"
    HANDOFF_ACTOR_MISMATCH = "handoff_actor_mismatch"
    HANDOFF_CONFLICT = "handoff_conflict"
    STALE_REVISION = "stale_revision"
    RESOURCE_NOT_FOUND = "resource_not_found"
    RESOURCE_ALREADY_EXISTS = "resource_already_exists"
    CURSOR_EPOCH_MISMATCH = "cursor_epoch_mismatch"
    CURSOR_OUT_OF_RANGE = "cursor_out_of_range"
    INVALID_CHANGE_BATCH = "invalid_change_batch"
    SNAPSHOT_REQUIRED = "snapshot_required"
    SNAPSHOT_EXPIRED = "snapshot_expired"
    INVALID_ARTIFACT_PATH = "invalid_artifact_path"
    INVALID_ARTIFACT_REFERENCE = "invalid_artifact_reference"
    CONFORMANCE_VIOLATION = "conformance_violation"
    INVALID_COMMAND = "invalid_command"
    STORAGE_FAILURE = "storage_failure"
    STORAGE_FULL = "storage_full"
    # The artifact data plane's codes (SPEC.md ART-*).
    ARTIFACT_STORE_UNAVAILABLE = "artifact_store_unavailable"
    ARTIFACT_TRANSFER_MODE_MISMATCH = "artifact_transfer_mode_mismatch"
    ARTIFACT_CONFLICT = "artifact_conflict"
    ARTIFACT_RESERVATION_EXPIRED = "artifact_reservation_expired"
    ARTIFACT_NOT_FOUND = "artifact_not_found"
    ARTIFACT_BODY_MISMATCH = "artifact_body_mismatch"
    ARTIFACT_UPLOAD_TOO_LARGE = "artifact_upload_too_large"
    ARTIFACT_INTERNAL_ERROR = "artifact_internal_error"
    LENGTH_REQUIRED = "length_required"  # a body upload without Content-Length (ART-3)
    # Request checks that run before the command pipeline (SPEC.md HTTP-1).
    ROUTE_NOT_FOUND = "route_not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    INSECURE_TRANSPORT = "insecure_transport"
    RATE_LIMITED = "rate_limited"
    ADMIN_REQUIRED = "admin_required"
    ADMIN_DISABLED = "admin_disabled"
    # The live change feed (SPEC.md LIVE-*).
    UPGRADE_REQUIRED = "upgrade_required"
    FEED_OVERFLOW = "feed_overflow"
    # The origin's transport limits, answered before any route is known (SPEC.md HTTP-4, HTTP-5).
    HEADERS_TOO_LARGE = "headers_too_large"
    REQUEST_TIMEOUT = "request_timeout"
    # A written text holds what looks like a secret (SPEC.md SEC-*).
    SECRET_REJECTED = "secret_rejected"
    # An `Origin` header outside the MCP endpoint's allowlist (SPEC.md MCP-7).
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    # Semantic search (SPEC.md SEM-*): no provider here; the index behind `at_least_seq`.
    SEMANTIC_UNAVAILABLE = "semantic_unavailable"
    INDEX_NOT_READY = "index_not_ready"


HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_IDENTIFIER: 400,
    ErrorCode.IDENTITY_MISMATCH: 403,
    ErrorCode.AUTHENTICATION_FAILED: 401,
    ErrorCode.PROJECT_UNAUTHORIZED: 403,
    ErrorCode.PROJECT_SCOPE_MISMATCH: 403,
    ErrorCode.COMMAND_CONFLICT: 409,
    ErrorCode.HANDOFF_ACTOR_MISMATCH: 403,
    ErrorCode.HANDOFF_CONFLICT: 409,
    ErrorCode.STALE_REVISION: 409,
    ErrorCode.RESOURCE_NOT_FOUND: 404,
    ErrorCode.RESOURCE_ALREADY_EXISTS: 409,
    ErrorCode.CURSOR_EPOCH_MISMATCH: 409,
    ErrorCode.CURSOR_OUT_OF_RANGE: 409,
    ErrorCode.INVALID_CHANGE_BATCH: 400,
    ErrorCode.SNAPSHOT_REQUIRED: 409,
    ErrorCode.SNAPSHOT_EXPIRED: 409,
    ErrorCode.INVALID_ARTIFACT_PATH: 400,
    ErrorCode.INVALID_ARTIFACT_REFERENCE: 400,
    # Never sent over HTTP: the test suite raises it (ERR-3). Mapped for completeness.
    ErrorCode.CONFORMANCE_VIOLATION: 500,
    ErrorCode.INVALID_COMMAND: 400,
    # Always 503 with Retry-After (ERR-2): a client may retry the identical command.
    ErrorCode.STORAGE_FAILURE: 503,
    # 507 Insufficient Storage without Retry-After (ERR-4): a full disk does not clear by itself.
    ErrorCode.STORAGE_FULL: 507,
    ErrorCode.ARTIFACT_STORE_UNAVAILABLE: 503,
    ErrorCode.ARTIFACT_TRANSFER_MODE_MISMATCH: 409,
    ErrorCode.ARTIFACT_CONFLICT: 409,
    ErrorCode.ARTIFACT_RESERVATION_EXPIRED: 409,
    ErrorCode.ARTIFACT_NOT_FOUND: 404,
    ErrorCode.ARTIFACT_BODY_MISMATCH: 409,
    ErrorCode.ARTIFACT_UPLOAD_TOO_LARGE: 413,
    ErrorCode.ARTIFACT_INTERNAL_ERROR: 500,
    ErrorCode.LENGTH_REQUIRED: 411,
    ErrorCode.ROUTE_NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.INSECURE_TRANSPORT: 426,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.ADMIN_REQUIRED: 403,
    ErrorCode.ADMIN_DISABLED: 403,
    ErrorCode.UPGRADE_REQUIRED: 426,
    ErrorCode.FEED_OVERFLOW: 429,
    ErrorCode.HEADERS_TOO_LARGE: 431,
    ErrorCode.REQUEST_TIMEOUT: 408,
    ErrorCode.SECRET_REJECTED: 422,
    ErrorCode.ORIGIN_NOT_ALLOWED: 403,
    ErrorCode.SEMANTIC_UNAVAILABLE: 422,
    ErrorCode.INDEX_NOT_READY: 409,
}

# Seconds a client should wait before retrying a 503 (ERR-2).
STORAGE_RETRY_AFTER_S = 1

# What a storage failure says on the wire: internals never leak to clients.
STORAGE_FAILURE_MESSAGE = "canonical storage temporarily unavailable"
STORAGE_FULL_MESSAGE = (
    "canonical storage is full: nothing was written; writes resume once space is freed"
)

# What a store reports to `/ready` and `/health` (READY-1), and what a storage error says
# about it (`AidememoError.store_state`).
STORE_OK = "ok"
STORE_READ_ONLY = "read_only"
STORE_FULL = "full"
STORE_UNAVAILABLE = "unavailable"
STORE_STATES = (STORE_OK, STORE_READ_ONLY, STORE_FULL, STORE_UNAVAILABLE)

# The wire message of the storage codes: internals never leak to clients (ERR-2, ERR-4).
_FIXED_MESSAGES = {
    ErrorCode.STORAGE_FAILURE: STORAGE_FAILURE_MESSAGE,
    ErrorCode.STORAGE_FULL: STORAGE_FULL_MESSAGE,
}


class AidememoError(Exception):
    """A failure with a stable code; the only exception type the service raises on purpose."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        store_state: str | None = None,
        index_seq: int | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self._store_state = store_state
        self.index_seq = index_seq  # `index_not_ready`: the sequence the index has (SEM-5)

    @property
    def store_state(self) -> str | None:
        """What this error says about the canonical store (READY-1): `full` for
        `storage_full`, the state a store classified (`read_only`) or `unavailable` for
        `storage_failure`, None for every other code."""
        if self.code is ErrorCode.STORAGE_FULL:
            return STORE_FULL
        if self.code is ErrorCode.STORAGE_FAILURE:
            return self._store_state or STORE_UNAVAILABLE
        return None

    @property
    def http_status(self) -> int:
        """The HTTP status of this error's code (mapped in `HTTP_STATUS`)."""
        return HTTP_STATUS[self.code]

    def to_json(self) -> dict[str, dict[str, object]]:
        """The wire shape `{"error": {"code", "message"}}`, plus `index_seq` when the error
        carries one (SEM-5)."""
        message = _FIXED_MESSAGES.get(self.code, self.message)
        error: dict[str, object] = {"code": self.code.value, "message": message}
        if self.index_seq is not None:
            error["index_seq"] = self.index_seq
        return {"error": error}


def fail(code: ErrorCode, message: str, store_state: str | None = None) -> AidememoError:
    """Build an `AidememoError`; written `raise fail(...)` so call sites read as one line."""
    return AidememoError(code, message, store_state)
