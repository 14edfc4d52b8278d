"""The semantic sidecar `memories.semantic.sqlite` beside a store (SPEC.md MEM-22).

Derived and disposable: it holds one float32 little-endian vector per active memory (with the
memory's revision and scope when it was embedded) and a one-row metadata table naming the
provider that made them, in Nuzo 1.2's tables, so a Nuzo store carrying an aidememo sidecar
still opens in Nuzo, which reports the sidecar incompatible (another provider fingerprint).
It has no audit log and owns no lifecycle: canonical writes never touch it, so it goes stale
instead of failing a write, and deleting it only turns semantic recall off.

A rebuild writes a new file `<sidecar>.rebuild-<uuid>` (created owner-only, never through a
symbolic link), checks it (`integrity_check`, the row count) and only then renames it over
the previous index; a failure leaves the previous index as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C

SCHEMA_VERSION = 1
BATCH = 32
_DDL = """
CREATE TABLE semantic_metadata (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  schema_version INTEGER NOT NULL,
  provider_fingerprint TEXT NOT NULL,
  provider_id TEXT NOT NULL,
  model TEXT NOT NULL,
  model_revision TEXT NOT NULL,
  dimensions INTEGER NOT NULL,
  network TEXT NOT NULL,
  indexed_memories INTEGER NOT NULL,
  completed_at TEXT NOT NULL
);
CREATE TABLE semantic_vectors (
  memory_id TEXT PRIMARY KEY,
  revision INTEGER NOT NULL,
  scope TEXT NOT NULL,
  vector BLOB NOT NULL
);
CREATE INDEX idx_semantic_vectors_scope ON semantic_vectors(scope);
"""
MISSING = "Semantic index does not exist."
STALE = "Canonical memory changed after the semantic rebuild."
READY = "Semantic index is ready."
FOREIGN = "Provider fingerprint does not match the index."


def sidecar_path(store_path: str) -> str:
    """`x.sqlite` -> `x.semantic.sqlite` (any other name gets `.semantic.sqlite` appended)."""
    if store_path.endswith(".sqlite"):
        return store_path[: -len(".sqlite")] + ".semantic.sqlite"
    return store_path + ".semantic.sqlite"


@dataclass(frozen=True, slots=True)
class Descriptor:
    """What made a sidecar's vectors: the provider id, model, revision, dimensions; vectors
    of two descriptors are never compared."""

    provider_id: str
    model: str
    revision: str
    dimensions: int
    network: str = "none"

    def fingerprint(self) -> str:
        """SHA-256 hex of `{id, model, revision, dimensions, network}` as compact JSON (the
        form Nuzo computes, so the two never mistake each other's index for their own)."""
        text = json.dumps(
            {
                "id": self.provider_id,
                "model": self.model,
                "revision": self.revision,
                "dimensions": self.dimensions,
                "network": self.network,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def document(content: str, tags: Sequence[str]) -> str:
    """The text a memory is embedded as: its content, then `Tags: a, b`."""
    return f"{content}\nTags: {', '.join(tags)}"


def _status(
    state: str,
    path: str,
    fingerprint: str | None,
    indexed: int,
    active: int,
    stale: int,
    missing: int,
    reason: str,
) -> dict[str, Any]:
    return {
        "state": state,
        "path": path,
        "providerFingerprint": fingerprint,
        "indexedMemories": indexed,
        "activeMemories": active,
        "staleMemories": stale,
        "missingMemories": missing,
        "reason": reason,
    }


def _open_ro(path: str) -> sqlite3.Connection:
    """The sidecar read-only; `SEMANTIC_INDEX_INCOMPATIBLE` for another schema version."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version != SCHEMA_VERSION:
        conn.close()
        raise AgentMemoryError(
            C.SEMANTIC_INDEX_INCOMPATIBLE,
            "Semantic index schema is incompatible.",
            {"version": version, "supported": SCHEMA_VERSION},
        )
    return conn


@dataclass(slots=True)
class Vectors:
    """The rows of a sidecar for some scopes: ids, revisions, scopes and vector bytes;
    `prepared` is the scorer's own form of them (a matrix), made once per loaded file."""

    ids: list[str]
    revisions: list[int]
    scopes: list[str]
    blobs: list[bytes]
    dimensions: int
    prepared: Any = None


@dataclass(slots=True)
class Loaded:
    """What reading a sidecar found: a final state (`missing|incompatible|error`) with its
    reason, or the rows to compare with the canonical memories (`vectors`)."""

    state: str
    fingerprint: str | None
    indexed: int
    reason: str
    vectors: Vectors | None = None


def read(path: str, fingerprint: str, scopes: Sequence[str] | None = None) -> Loaded:
    """Read the sidecar's rows (of `scopes` only, when given) made by `fingerprint`; a broken,
    foreign or absent file is a final state, never an exception."""
    if not os.path.lexists(path):
        return Loaded("missing", None, 0, MISSING)
    try:
        conn = _open_ro(path)
    except AgentMemoryError as exc:
        state = "incompatible" if exc.code is C.SEMANTIC_INDEX_INCOMPATIBLE else "error"
        return Loaded(state, None, 0, exc.message)
    except sqlite3.Error as exc:
        return Loaded("error", None, 0, str(exc))
    try:
        meta = conn.execute(
            "SELECT provider_fingerprint, dimensions, indexed_memories FROM semantic_metadata"
            " WHERE singleton = 1"
        ).fetchone()
        if meta is None:
            return Loaded("error", None, 0, "Semantic metadata is missing.")
        if meta[0] != fingerprint:
            return Loaded("incompatible", meta[0], meta[2], FOREIGN)
        sql = "SELECT memory_id, revision, scope, vector FROM semantic_vectors"
        if scopes is None:
            rows = conn.execute(sql).fetchall()
        else:
            marks = ",".join("?" * len(scopes))
            rows = conn.execute(f"{sql} WHERE scope IN ({marks})", list(scopes)).fetchall()
    except sqlite3.Error as exc:
        return Loaded("error", None, 0, str(exc))
    finally:
        conn.close()
    if any(len(row[3]) != int(meta[1]) * 4 for row in rows):
        reason = "Semantic vector dimensions do not match index metadata."
        return Loaded("error", meta[0], len(rows), reason)
    vectors = Vectors(
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        [r[3] for r in rows],
        int(meta[1]),
    )
    return Loaded("ready", meta[0], len(rows), READY, vectors)


def judge(path: str, loaded: Loaded, active: Iterable[tuple[str, int, str]]) -> dict[str, Any]:
    """The status of a read sidecar against the active canonical memories `(id, revision,
    scope)`: `ready` only when every one has its vector at its revision and scope and no
    vector is left over."""
    active_rows = list(active)
    count = len(active_rows)
    vectors = loaded.vectors
    if vectors is None:
        return _status(
            loaded.state, path, loaded.fingerprint, loaded.indexed, count, 0, count, loaded.reason
        )
    indexed = dict(
        zip(vectors.ids, zip(vectors.revisions, vectors.scopes, strict=True), strict=True)
    )
    stale = missing = 0
    for memory_id, revision, scope in active_rows:
        seen = indexed.get(memory_id)
        if seen is None:
            missing += 1
        elif seen != (revision, scope):
            stale += 1
    stale += len(indexed.keys() - {row[0] for row in active_rows})
    state, reason = ("stale", STALE) if stale or missing else ("ready", READY)
    return _status(state, path, loaded.fingerprint, len(vectors.ids), count, stale, missing, reason)


def inspect(
    path: str,
    fingerprint: str,
    active: Iterable[tuple[str, int, str]],
    scopes: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The sidecar's status (`missing|ready|stale|incompatible|error`) against the active
    canonical memories (of `scopes` only, when given)."""
    return judge(path, read(path, fingerprint, scopes), active)


def _create_private(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    os.close(fd)


def rebuild(
    path: str,
    descriptor: Descriptor,
    memories: Sequence[tuple[str, int, str, str]],
    embed: Callable[[list[str]], list[bytes]],
    completed_at: str,
) -> dict[str, Any]:
    """Embed `memories` `(id, revision, scope, document)` in batches of `BATCH` (shortest
    texts first) into a new
    sidecar and put it in place of the old one once checked: `{path, providerFingerprint,
    indexedMemories}`. `embed` failures leave the old sidecar untouched."""
    fingerprint = descriptor.fingerprint()
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    if os.path.islink(path):
        raise AgentMemoryError(
            C.SEMANTIC_INDEX_FAILED, "Semantic index path is a symbolic link.", {"path": path}
        )
    temporary = f"{path}.rebuild-{uuid.uuid4()}"
    _create_private(temporary)
    conn = sqlite3.connect(temporary)
    try:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.executescript(_DDL)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        width = descriptor.dimensions * 4
        # Similar lengths batch together: a batch is padded to its longest text.
        ordered = sorted(memories, key=lambda m: len(m[3]))
        for start in range(0, len(ordered), BATCH):
            batch = ordered[start : start + BATCH]
            vectors = embed([m[3] for m in batch])
            if len(vectors) != len(batch) or any(len(v) != width for v in vectors):
                raise AgentMemoryError(
                    C.SEMANTIC_PROVIDER_INVALID,
                    "Embedding provider returned invalid document vectors.",
                    {"expected": len(batch), "actual": len(vectors)},
                )
            with conn:
                conn.executemany(
                    "INSERT INTO semantic_vectors (memory_id, revision, scope, vector)"
                    " VALUES (?, ?, ?, ?)",
                    [(m[0], m[1], m[2], v) for m, v in zip(batch, vectors, strict=True)],
                )
        with conn:
            conn.execute(
                "INSERT INTO semantic_metadata (singleton, schema_version, provider_fingerprint,"
                " provider_id, model, model_revision, dimensions, network, indexed_memories,"
                " completed_at) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    SCHEMA_VERSION,
                    fingerprint,
                    descriptor.provider_id,
                    descriptor.model,
                    descriptor.revision,
                    descriptor.dimensions,
                    descriptor.network,
                    len(memories),
                    completed_at,
                ),
            )
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        rows = conn.execute("SELECT COUNT(*) FROM semantic_vectors").fetchone()[0]
        if check != "ok" or rows != len(memories):
            raise AgentMemoryError(
                C.SEMANTIC_INDEX_FAILED, "Semantic index integrity check failed."
            )
        conn.close()
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
        os.chmod(path, 0o600)
    except BaseException as exc:
        conn.close()
        try:
            os.remove(temporary)
        except FileNotFoundError:
            pass
        if isinstance(exc, AgentMemoryError) or not isinstance(exc, Exception):
            raise
        raise AgentMemoryError(
            C.SEMANTIC_INDEX_FAILED, "Semantic index rebuild failed.", {"cause": str(exc)}
        ) from exc
    return {"path": path, "providerFingerprint": fingerprint, "indexedMemories": len(memories)}


def clear(path: str) -> bool:
    """Delete the sidecar and its `-shm`/`-wal` files; whether the sidecar existed."""
    existed = os.path.lexists(path)
    for name in (path, path + "-shm", path + "-wal"):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass
    return existed


def summary(path: str, store_path: str) -> dict[str, Any] | None:
    """What `integrity` and `doctor` report of a store's sidecar, `None` when it has none:
    its state against the store's active memories by the fingerprint it records (no model is
    inspected or loaded), with that fingerprint and the provider and model it names."""
    if not os.path.lexists(path):
        return None
    recorded: tuple[Any, ...] | None = None
    try:
        conn = _open_ro(path)
        try:
            recorded = conn.execute(
                "SELECT provider_fingerprint, provider_id, model FROM semantic_metadata"
                " WHERE singleton = 1"
            ).fetchone()
        finally:
            conn.close()
    except (AgentMemoryError, sqlite3.Error):
        pass
    try:
        store = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)
        try:
            active = store.execute(
                "SELECT id, revision, scope FROM memories WHERE archived_at IS NULL"
            ).fetchall()
        finally:
            store.close()
    except sqlite3.Error:
        active = []
    status = inspect(path, recorded[0] if recorded else "", active)
    status["provider"] = recorded[1] if recorded else None
    status["model"] = recorded[2] if recorded else None
    return status
