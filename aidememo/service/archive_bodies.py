"""Artifact bodies in an export (`admin export --include-bodies`, SPEC.md ART-12).

An export with bodies has `"bodies": true` in its header and, after every project's rows and
before the manifest, `artifact_body` lines: `{type, project_id, generation, offset,
size_bytes, sha256, data}`, `data` being base64 of at most `BODY_CHUNK` bytes, in order, for
the body of every current publication of the exported projects. The manifest counts and
hashes them like any line, so a tenant moves with its bodies.

On import the chunks of one generation are spooled to a temporary file and created in the
importing body store once complete, their SHA-256 checked. Each created body is first queued
as a GC intent due after the receipt retention, so a failed import leaves nothing behind for
long; a successful one publishes the generation, and the GC keeps what a publication names.
"""

from __future__ import annotations

import base64
import hashlib
import tempfile
from collections.abc import Iterator
from typing import IO, Any

from aidememo.domain.artifacts import (
    ARTIFACT_KIND,
    RECEIPT_RETENTION_MS,
    GcIntent,
    Publication,
)
from aidememo.domain.canonical import canonical_bytes, decode_stored
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.ports import BodyStore, Store
from aidememo.service.archive_rows import line

BODY_TYPE = "artifact_body"
BODY_CHUNK = 512 << 10
SPOOL_IN_MEMORY = 1 << 20


def published_bodies(data: bytes) -> tuple[str, Publication] | None:
    """`(project_id, publication)` of a `resource` export line holding an artifact."""
    if b'"kind":"artifact"' not in data:
        return None
    record = decode_stored(data)
    if not isinstance(record, dict) or record.get("kind") != ARTIFACT_KIND:
        return None
    body = record.get("body")
    if not isinstance(body, dict):
        return None
    return str(record["project_id"]), Publication.of(canonical_bytes(body))


def missing_bodies(bodies: BodyStore, publications: list[tuple[str, Publication]]) -> None:
    """Refuse an export whose publications' bodies are not all stored, before its first
    line is sent (a streamed answer cannot change its status afterwards)."""
    for _, pub in publications:
        if bodies.head(pub.generation) != pub.size_bytes:
            raise fail(
                ErrorCode.ARTIFACT_NOT_FOUND,
                f"the body of {pub.path} (generation {pub.generation}) is not in the body store",
            )


def body_records(
    bodies: BodyStore, publications: list[tuple[str, Publication]]
) -> Iterator[dict[str, Any]]:
    """The `artifact_body` records of every publication whose body is stored."""
    for project_id, pub in publications:
        if bodies.head(pub.generation) != pub.size_bytes:
            raise fail(
                ErrorCode.ARTIFACT_NOT_FOUND,
                f"the body of {pub.path} (generation {pub.generation}) is not in the body store",
            )
        offset = 0
        pending = b""
        for chunk in bodies.read(pub.generation):
            pending += chunk
            while len(pending) >= BODY_CHUNK:
                piece, pending = pending[:BODY_CHUNK], pending[BODY_CHUNK:]
                yield chunk_record(project_id, pub, offset, piece)
                offset += len(piece)
        if pending or offset == 0:
            yield chunk_record(project_id, pub, offset, pending)


def chunk_record(project_id: str, pub: Publication, offset: int, data: bytes) -> dict[str, Any]:
    """One `artifact_body` record: `data` at `offset` of the publication's body."""
    return {
        "type": BODY_TYPE,
        "project_id": project_id,
        "generation": pub.generation,
        "offset": offset,
        "size_bytes": pub.size_bytes,
        "sha256": pub.sha256,
        "data": base64.b64encode(data).decode(),
    }


def export_body_lines(
    bodies: BodyStore, publications: list[tuple[str, Publication]]
) -> Iterator[bytes]:
    """The body records as export lines."""
    for record in body_records(bodies, publications):
        yield line(record)


class BodyChunk:
    """One `artifact_body` record of an import, parsed: `invalid_command` when malformed."""

    __slots__ = ("data", "generation", "offset", "sha256", "size")

    def __init__(self, record: dict[str, Any]) -> None:
        try:
            self.generation = validate_id(record["generation"], "generation")
            self.offset, self.size = int(record["offset"]), int(record["size_bytes"])
            self.data = base64.b64decode(record["data"], validate=True)
            self.sha256 = str(record["sha256"])
        except (KeyError, ValueError, TypeError) as exc:
            raise fail(ErrorCode.INVALID_COMMAND, f"malformed artifact_body: {exc}") from None


class ChunkOrder:
    """The order rules of an import's body chunks, one generation after another: each
    generation's chunks in order from offset 0, none past its size, no body left half-way,
    and the SHA-256 of the whole. The origin spools the bytes, the edge holds them; both
    feed each chunk through here first."""

    def __init__(self) -> None:
        self.generation: str | None = None
        self.seen = 0
        self.digest = hashlib.sha256()

    def feed(self, chunk: BodyChunk) -> tuple[bool, bool]:
        """Check one chunk: `(starts a body, completes it)`; a completed body's SHA-256 is
        checked (`artifact_body_mismatch`)."""
        starts = chunk.generation != self.generation
        if starts:
            self.finish()
            self.generation, self.seen, self.digest = chunk.generation, 0, hashlib.sha256()
        if chunk.offset != self.seen:
            raise fail(ErrorCode.INVALID_COMMAND, "artifact body chunks are out of order")
        self.digest.update(chunk.data)
        self.seen += len(chunk.data)
        if self.seen > chunk.size:
            raise fail(ErrorCode.INVALID_COMMAND, "an artifact body is longer than its size")
        if self.seen < chunk.size:
            return starts, False
        if self.digest.hexdigest() != chunk.sha256:
            raise fail(
                ErrorCode.ARTIFACT_BODY_MISMATCH, f"body {chunk.generation}: SHA-256 differs"
            )
        self.generation = None
        return starts, True

    def finish(self) -> None:
        """After the last line (or before another body): no body left half-way."""
        if self.generation is not None:
            raise fail(ErrorCode.INVALID_COMMAND, "an artifact body ended early")


class BodyImport:
    """Bodies arriving in an import, one generation at a time."""

    def __init__(self, store: Store, bodies: BodyStore | None, now_ms: int) -> None:
        self.store = store
        self.bodies = bodies
        self.now_ms = now_ms
        self.order = ChunkOrder()
        self.spool: IO[bytes] | None = None
        self.created: set[str] = set()

    def add(self, record: dict[str, Any]) -> None:
        """One `artifact_body` record."""
        if self.bodies is None:
            raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "no body store to import bodies into")
        chunk = BodyChunk(record)
        starts, complete = self.order.feed(chunk)
        if starts:
            self.spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
        assert self.spool is not None
        self.spool.write(chunk.data)
        if complete:
            self._create(chunk.generation, chunk.size, chunk.sha256)

    def _create(self, generation: str, size: int, sha: str) -> None:
        assert self.spool is not None and self.bodies is not None
        intent = GcIntent(
            body_key=generation,
            tenant_id="",
            project_id="",
            artifact_id="",
            reason="imported",
            not_before_ms=self.now_ms + RECEIPT_RETENTION_MS,
            created_at_ms=self.now_ms,
        )
        self.store.transaction(lambda tx: tx.put_gc_intent(intent))
        spool = self.spool
        spool.seek(0)
        stored = self.bodies.create(generation, iter(lambda: spool.read(1 << 16), b""), size)
        spool.close()
        self.spool = None
        if stored[1] != sha:
            raise fail(ErrorCode.ARTIFACT_CONFLICT, f"body {generation} exists with other bytes")
        self.created.add(generation)

    def finish(self) -> None:
        """After the last line: no body left half-way."""
        self.order.finish()
