"""Artifacts: logical paths, reservations, publications and GC intents (SPEC.md ART-*).

An artifact is a file body published under a logical path of its project. The path names it
in the catalog only: it never becomes a file-system path or an object-store key. Bodies live
in a `BodyStore` under random generation keys; the catalog (reservations, the publication
resource of kind `artifact`, GC intents) lives in the canonical store.

The lifecycle (ART-2..ART-6): a writer reserves a path (with the current publication's
mutation token to replace it), uploads the exact bytes under the reservation's generation,
then publishes: the service re-observes the stored bytes, rechecks the reservation and the
path's revision, and writes the publication with its change entry. Every generation that
becomes unreachable (replaced, aborted, expired, failed) gets a GC intent in the same
transaction.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from typing import Any

from aidememo.domain.canonical import canonical_bytes, decode_stored
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import is_valid_id

ARTIFACT_KIND = "artifact"

# Defaults and bounds (ART-1).
MAX_DIRECT_BODY_BYTES = 64 << 20  # the direct upload route's limit
RESERVATION_TTL_MS_DEFAULT = 15 * 60 * 1000
RESERVATION_TTL_MS_MAX = 24 * 60 * 60 * 1000
SETTLEMENT_GRACE_MS = 60 * 1000
RECEIPT_RETENTION_MS = 24 * 60 * 60 * 1000
PATH_MAX_BYTES = 512
CONTENT_TYPE_MAX_BYTES = 128
# GC backoff (ART-7): 30 s doubling to 1 h.
GC_BACKOFF_FIRST_MS = 30 * 1000
GC_BACKOFF_MAX_MS = 60 * 60 * 1000
GC_LEASE_MS = 5 * 60 * 1000
GC_BATCH_DEFAULT = 100

# The body-store identity of local files (ART-8): credential-free, names the layout only.
LOCAL_BODY_STORE_IDENTITY = "local:v1"


class State:
    """A reservation's state; `LIVE` ones may still be uploaded and published."""

    RESERVED = "reserved"
    UPLOADED = "uploaded"
    PUBLISHED = "published"
    ABORTED = "aborted"
    EXPIRED = "expired"
    FAILED = "failed"
    LIVE = frozenset({RESERVED, UPLOADED})
    ALL = frozenset({RESERVED, UPLOADED, PUBLISHED, ABORTED, EXPIRED, FAILED})


# -- logical paths (ART-1) ------------------------------------------------------------------

_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_NAME = re.compile(_SEGMENT)
_SEQ = re.compile(r"[0-9]{1,19}")


def validate_path(value: object) -> str:
    """Return `value` if it is a logical artifact path of the namespace, else raise
    `invalid_artifact_path`.

    The namespace: `sessions/<s>/canvas.md`, `sessions/<s>/artifacts/<name>`,
    `handoffs/<h>/request.json`, `handoffs/<h>/result.json`, `branches/<actor>/<segment>.jsonl`,
    `snapshots/<seq>/manifest.json`. Ids follow ID-1; a name is 1-128 bytes of
    `[A-Za-z0-9._-]` starting with a letter or digit (so never `.` or `..`).
    """
    if not isinstance(value, str) or not value or len(value.encode()) > PATH_MAX_BYTES:
        raise _bad_path()
    parts = value.split("/")
    head = parts[0]
    ok = False
    if head == "sessions" and len(parts) >= 3 and _is_id(parts[1]):
        if len(parts) == 3:
            ok = parts[2] == "canvas.md"
        elif len(parts) == 4:
            ok = parts[2] == "artifacts" and _NAME.fullmatch(parts[3]) is not None
    elif head == "handoffs" and len(parts) == 3 and _is_id(parts[1]):
        ok = parts[2] in ("request.json", "result.json")
    elif head == "branches" and len(parts) == 3 and _is_id(parts[1]):
        leaf = parts[2]
        ok = leaf.endswith(".jsonl") and _NAME.fullmatch(leaf[: -len(".jsonl")]) is not None
    elif head == "snapshots" and len(parts) == 3 and _SEQ.fullmatch(parts[1]) is not None:
        ok = parts[2] == "manifest.json"
    if not ok:
        raise _bad_path()
    return value


def _is_id(value: str) -> bool:
    return is_valid_id(value) and value not in (".", "..")


def _bad_path() -> Exception:
    return fail(
        ErrorCode.INVALID_ARTIFACT_PATH,
        "path must be one of sessions/<s>/canvas.md, sessions/<s>/artifacts/<name>, "
        "handoffs/<h>/request.json|result.json, branches/<actor>/<segment>.jsonl, "
        "snapshots/<seq>/manifest.json",
    )


def handoff_of(path: str) -> str | None:
    """The handoff id of a `handoffs/<h>/...` path (VIS-2), else None."""
    parts = path.split("/")
    return parts[1] if parts[0] == "handoffs" else None


def artifact_id_of(path: str) -> str:
    """The artifact id of a path: stable across replacements, derived from the path only."""
    return "art_" + hashlib.sha256(path.encode()).hexdigest()[:32]


_CONTENT_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def validate_content_type(value: object) -> str:
    """A lower-case `type/subtype` media type without parameters (ART-1)."""
    if (
        isinstance(value, str)
        and len(value) <= CONTENT_TYPE_MAX_BYTES
        and _CONTENT_TYPE.fullmatch(value) is not None
    ):
        return value
    raise fail(ErrorCode.INVALID_COMMAND, "content_type must be a lower-case type/subtype")


def validate_sha256(value: object) -> str:
    """64 lower-case hex digits."""
    if isinstance(value, str) and _SHA256.fullmatch(value) is not None:
        return value
    raise fail(ErrorCode.INVALID_COMMAND, "sha256 must be 64 lower-case hex digits")


# -- catalog rows -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reservation:
    """A reserved generation of a path; also the reservation command's replay receipt.

    `base_revision` is the publication revision the reservation replaces (0: none);
    `settled_at_ms` is when it left the live states (publication, abort, expiry, failure):
    the row is kept as a replay receipt until `RECEIPT_RETENTION_MS` after it (ART-3).
    """

    tenant_id: str
    project_id: str
    reservation_id: str
    command_id: str
    fingerprint: str
    actor_id: str
    path: str
    artifact_id: str
    generation: str
    size_bytes: int
    content_type: str
    sha256: str | None
    base_revision: int
    state: str
    created_at_ms: int
    expires_at_ms: int
    settled_at_ms: int | None = None

    @property
    def live(self) -> bool:
        """Still uploadable and publishable (before its expiry)."""
        return self.state in State.LIVE

    def settled(self, state: str, at_ms: int) -> Reservation:
        """This reservation moved to a final state at `at_ms`."""
        return replace(self, state=state, settled_at_ms=at_ms)

    def to_json(self) -> dict[str, Any]:
        """The answer to a reservation (and its replay)."""
        return {
            "reservation_id": self.reservation_id,
            "path": self.path,
            "artifact_id": self.artifact_id,
            "generation": self.generation,
            "size_bytes": self.size_bytes,
            "content_type": self.content_type,
            "sha256": self.sha256,
            "state": self.state,
            "expires_at_ms": self.expires_at_ms,
        }


@dataclass(frozen=True, slots=True)
class GcIntent:
    """A body-store key to delete once nothing names it (ART-7); keyed by the key alone,
    outside tenant scope, so a tenant's deletion leaves its intents behind (ARC-4)."""

    body_key: str
    tenant_id: str
    project_id: str
    artifact_id: str
    reason: str
    not_before_ms: int
    attempts: int = 0
    last_error: str | None = None
    leased_until_ms: int = 0
    created_at_ms: int = 0


def intent_for(r: Reservation, reason: str, not_before_ms: int, now_ms: int) -> GcIntent:
    """The GC intent of a reservation's generation."""
    return GcIntent(
        body_key=r.generation,
        tenant_id=r.tenant_id,
        project_id=r.project_id,
        artifact_id=r.artifact_id,
        reason=reason,
        not_before_ms=not_before_ms,
        created_at_ms=now_ms,
    )


def backoff_ms(attempts: int) -> int:
    """The wait after the `attempts`-th failed delete: 30 s doubling, at most 1 h (ART-7)."""
    return int(min(GC_BACKOFF_FIRST_MS * (2 ** max(attempts - 1, 0)), GC_BACKOFF_MAX_MS))


# -- publications -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Publication:
    """The body of an `artifact` resource at one revision (ART-5)."""

    artifact_id: str
    path: str
    size_bytes: int
    content_type: str
    sha256: str
    generation: str
    mutation_token: str
    reservation_id: str
    from_actor: str | None = None  # a handoff path's participants (VIS-2)
    to_actor: str | None = None

    def _reference(self) -> dict[str, Any]:
        """What names the published body: id, path, size, type, hash, generation, tokens."""
        return {
            "artifact_id": self.artifact_id,
            "path": self.path,
            "size_bytes": self.size_bytes,
            "content_type": self.content_type,
            "sha256": self.sha256,
            "generation": self.generation,
            "mutation_token": self.mutation_token,
            "reservation_id": self.reservation_id,
        }

    def body(self) -> bytes:
        """The canonical JSON bytes stored as the resource body."""
        record = self._reference()
        if self.from_actor is not None and self.to_actor is not None:
            record["from_actor"] = self.from_actor
            record["to_actor"] = self.to_actor
        return canonical_bytes(record)

    @classmethod
    def of(cls, body: bytes) -> Publication:
        """The publication a stored body holds."""
        record = decode_stored(body)
        if not isinstance(record, dict):
            raise fail(ErrorCode.STORAGE_FAILURE, "an artifact body is not an object")
        return cls(
            artifact_id=str(record["artifact_id"]),
            path=str(record["path"]),
            size_bytes=int(record["size_bytes"]),
            content_type=str(record["content_type"]),
            sha256=str(record["sha256"]),
            generation=str(record["generation"]),
            mutation_token=str(record["mutation_token"]),
            reservation_id=str(record["reservation_id"]),
            from_actor=_opt_str(record.get("from_actor")),
            to_actor=_opt_str(record.get("to_actor")),
        )

    def visible_to(self, actor_id: str) -> bool:
        """A handoff path's artifact is its sender's and receiver's only (VIS-2)."""
        if self.from_actor is None or self.to_actor is None:
            return handoff_of(self.path) is None
        return actor_id in (self.from_actor, self.to_actor)

    def to_json(self, revision: int, project_seq: int | None = None) -> dict[str, Any]:
        """The answer to a publication or a resolve."""
        out: dict[str, Any] = {"artifact_id": self.artifact_id, "revision": revision}
        out |= self._reference()
        if project_seq is not None:
            out["project_seq"] = project_seq
        return out


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None
