"""The edge's semantic index parts (SPEC.md SEM-10, SEM-11): Workers AI embeds, Vectorize holds
the vectors, and a small ledger in the project object's own SQLite says which vectors it put
there.

- `FINGERPRINT` is what the canonical `semantic_state` row of a project indexed at the edge is
  pinned to (SEM-2): `workers-ai/@cf/baai/bge-small-en-v1.5@1:384`.
- `embed(ai, texts)`: `env.AI.run(MODEL, {"text": [...]})` answers `{shape: [n, 384], data}`;
  at most `AI_BATCH` texts per call. Vectors are packed (float32, unit length) as the core's
  `aidememo.domain.semantic.pack` makes them.
- Vectorize: one index (the `VECTORIZE` binding), a namespace per project. Vector ids are
  index-wide and at most 64 bytes while ids may be 128 (ID-1), so a vector's id is the
  SHA-256 hex of `tenant/project/fact` and its namespace that of `tenant/project`; the ledger
  maps ids back to facts. Each vector's metadata is `{"seq": n}` (the change that made it, so
  the indexer can tell an old vector from the new one) and `{"source_id": s}` when the fact
  has one (a search filters on it: the index needs a metadata index on `source_id`).
- `Ledger`: the table `aidememo_vectors` (one row per vector the object upserted or is
  deleting: its fact, the sequence of its change, and whether the write is still `PENDING`
  visibility) and `aidememo_index` (one row: the project the object indexes and the batch
  waiting to become visible: its `from_seq`, `to_seq` and project epoch). Both sit outside
  the canonical schema, like `aidememo_staging`: derived bookkeeping of this object, never
  tenant rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import Scope
from aidememo.domain.semantic import Fingerprint, pack
from aidememo.stores.sqlite.do_executor import DoSqlExecutor
from durable_objects.rpc import plain

try:  # Pyodide only
    from js import Object
    from pyodide.ffi import JsProxy, to_js
except ImportError:  # CPython: the runtime doubles take and return Python values
    Object = None
    JsProxy = None
    to_js = None

MODEL = "@cf/baai/bge-small-en-v1.5"
DIMENSIONS = 384
FINGERPRINT = Fingerprint("workers-ai", MODEL, "1", DIMENSIONS)
AI_BINDING = "AI"
VECTORIZE_BINDING = "VECTORIZE"
AI_BATCH = 100  # texts per `AI.run` (the model's input schema)
UPSERT_BATCH = 1000  # vectors per `upsert` from a Worker (Vectorize limits)
IDS_BATCH = 100  # ids per `getByIds` / `deleteByIds`
TOP_K_MAX = 100  # topK without values or metadata (Vectorize limits)

SETTLED, PENDING_UPSERT, PENDING_DELETE = 0, 1, 2

VECTORS = "aidememo_vectors"
INDEX = "aidememo_index"
_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {VECTORS} (vector_id TEXT PRIMARY KEY, fact_id TEXT NOT NULL, "
    "seq INTEGER NOT NULL, pending INTEGER NOT NULL) STRICT",
    f"CREATE TABLE IF NOT EXISTS {INDEX} (one INTEGER PRIMARY KEY CHECK (one = 1), "
    "tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, batch TEXT) STRICT",
)


def bindings(env: Any) -> tuple[Any, Any] | None:
    """`(env.AI, env.VECTORIZE)` as the JS bindings under the SDK's wrappers, or None when
    either is not bound (no semantic search). Arguments go over as JS values made by one
    `to_js` (`js`), answers come back through `plain`: the SDK's generic conversion is not
    needed for plain data."""
    ai = getattr(env, AI_BINDING, None)
    index = getattr(env, VECTORIZE_BINDING, None)
    return None if ai is None or index is None else (_raw(ai), _raw(index))


def _raw(binding: Any) -> Any:
    inner = getattr(binding, "_binding", None)
    return inner if JsProxy is not None and isinstance(inner, JsProxy) else binding


def js(value: Any) -> Any:
    """`value` (lists, str-keyed dicts, scalars) as a JS value under Pyodide, else itself."""
    if to_js is None:
        return value
    return to_js(value, dict_converter=Object.fromEntries)


def namespace(scope: Scope) -> str:
    """The project's Vectorize namespace (64 bytes, the limit)."""
    return hashlib.sha256(f"{scope.tenant_id}/{scope.project_id}".encode()).hexdigest()


def vector_id(scope: Scope, fact_id: str) -> str:
    """A fact's vector id, unique in the index (64 bytes, the limit)."""
    key = f"{scope.tenant_id}/{scope.project_id}/{fact_id}"
    return hashlib.sha256(key.encode()).hexdigest()


def _failed(what: str, exc: BaseException) -> AidememoError:
    if isinstance(exc, AidememoError):
        return exc
    return fail(ErrorCode.SEMANTIC_UNAVAILABLE, f"{what} failed: {exc}")


async def embed(ai: Any, texts: Sequence[str]) -> list[list[float]]:
    """The texts' embeddings from Workers AI, `AI_BATCH` per call, in order."""
    out: list[list[float]] = []
    for start in range(0, len(texts), AI_BATCH):
        chunk = list(texts[start : start + AI_BATCH])
        try:
            answer = plain(await ai.run(MODEL, js({"text": chunk})))
        except Exception as exc:
            raise _failed("Workers AI", exc) from exc
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or len(data) != len(chunk):
            raise fail(ErrorCode.SEMANTIC_UNAVAILABLE, "Workers AI answered no embeddings")
        out.extend([float(v) for v in row] for row in data)
    return out


def unit(values: list[float]) -> list[float]:
    """`values` scaled to unit length, as float32 (what the core stores and compares)."""
    from aidememo.domain.semantic import unpack

    return unpack(pack(values))


async def call(what: str, fn: Any, *args: Any) -> Any:
    """One Vectorize call, its failure as `semantic_unavailable`; the answer as plain data."""
    try:
        return plain(await fn(*[js(a) for a in args]))
    except Exception as exc:
        raise _failed(f"Vectorize {what}", exc) from exc


@dataclass(frozen=True, slots=True)
class Batch:
    """Changes `from_seq`..`to_seq` of epoch `epoch` written to Vectorize, not yet visible."""

    from_seq: int
    to_seq: int
    epoch: str


class Ledger:
    """The object's record of its vectors in Vectorize (see the module docstring)."""

    def __init__(self, storage: Any) -> None:
        self.x = DoSqlExecutor(storage)
        self._ready = False

    def _tables(self) -> None:
        if not self._ready:
            for statement in _CREATE:
                self.x.execute(statement)
            self._ready = True

    def scope(self) -> Scope | None:
        """The project this object indexes, once it has learnt it."""
        self._tables()
        rows = self.x.execute(f"SELECT tenant_id, project_id FROM {INDEX}")
        return Scope(str(rows[0][0]), str(rows[0][1])) if rows else None

    def learn(self, scope: Scope) -> None:
        """Remember the object's project (a commit names it; an alarm after eviction reads it)."""
        self._tables()
        self.x.execute(
            f"INSERT INTO {INDEX} (one, tenant_id, project_id) VALUES (1, ?, ?) "
            "ON CONFLICT (one) DO NOTHING",
            (scope.tenant_id, scope.project_id),
        )

    def batch(self) -> Batch | None:
        """The batch waiting for Vectorize, if any."""
        self._tables()
        rows = self.x.execute(f"SELECT batch FROM {INDEX}")
        if not rows or rows[0][0] is None:
            return None
        raw = json.loads(str(rows[0][0]))
        return Batch(int(raw["from_seq"]), int(raw["to_seq"]), str(raw["epoch"]))

    def begin(
        self,
        batch: Batch,
        upserts: Sequence[tuple[str, str, int]],
        deletes: Sequence[str],
    ) -> None:
        """Record a batch sent to Vectorize: `(vector_id, fact_id, seq)` upserted, vector ids
        being deleted; all pending until `settle`."""
        self._tables()
        text = json.dumps(
            {"from_seq": batch.from_seq, "to_seq": batch.to_seq, "epoch": batch.epoch}
        )

        def run() -> None:
            if not self.x.execute_count(f"UPDATE {INDEX} SET batch = ?", (text,)):
                raise fail(ErrorCode.STORAGE_FAILURE, "the index ledger names no project")
            for vid, fid, seq in upserts:
                self.x.execute(
                    f"INSERT INTO {VECTORS} (vector_id, fact_id, seq, pending) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (vector_id) DO UPDATE SET seq = excluded.seq, "
                    "pending = excluded.pending",
                    (vid, fid, seq, PENDING_UPSERT),
                )
            for vid in deletes:
                self.x.execute(
                    f"UPDATE {VECTORS} SET pending = ? WHERE vector_id = ?", (PENDING_DELETE, vid)
                )

        self.x.transaction(run)

    def pending(self) -> list[tuple[str, int, int]]:
        """`(vector_id, seq, pending)` of the writes not yet seen in Vectorize."""
        self._tables()
        rows = self.x.execute(f"SELECT vector_id, seq, pending FROM {VECTORS} WHERE pending != 0")
        return [(str(v), int(str(s)), int(str(p))) for v, s, p in rows]

    def settle(self) -> None:
        """The batch is visible: deleted rows go, upserted ones are settled."""
        self._tables()

        def run() -> None:
            self.x.execute(f"DELETE FROM {VECTORS} WHERE pending = ?", (PENDING_DELETE,))
            self.x.execute(f"UPDATE {VECTORS} SET pending = 0")
            self.x.execute(f"UPDATE {INDEX} SET batch = NULL")

        self.x.transaction(run)

    def facts(self, vector_ids: Sequence[str]) -> dict[str, str]:
        """Vector id -> fact id for those the ledger holds (not being deleted)."""
        self._tables()
        out: dict[str, str] = {}
        ids = list(vector_ids)
        for start in range(0, len(ids), IDS_BATCH):
            chunk = ids[start : start + IDS_BATCH]
            marks = ",".join("?" * len(chunk))
            rows = self.x.execute(
                f"SELECT vector_id, fact_id FROM {VECTORS} "
                f"WHERE vector_id IN ({marks}) AND pending != ?",
                (*chunk, PENDING_DELETE),
            )
            out.update((str(v), str(f)) for v, f in rows)
        return out

    def all_ids(self) -> list[str]:
        """Every vector id the object put in Vectorize."""
        self._tables()
        return [str(r[0]) for r in self.x.execute(f"SELECT vector_id FROM {VECTORS}")]

    def clear(self) -> None:
        """Forget every vector and the waiting batch (the namespace was cleared)."""
        self._tables()

        def run() -> None:
            self.x.execute(f"DELETE FROM {VECTORS}")
            self.x.execute(f"UPDATE {INDEX} SET batch = NULL")

        self.x.transaction(run)
