"""Stand-ins for the Workers AI binding (`env.AI`) and a Vectorize index binding
(`env.VECTORIZE`) with the shapes and limits Cloudflare documents; they count their calls.

Workers AI: `await AI.run("@cf/baai/bge-small-en-v1.5", {"text": str | [str]})` answers
`{"shape": [n, 384], "data": [[...], ...], "pooling": "mean"}`; at most `AI_BATCH` texts per
call, another model or an empty text list is refused. The embedding is
`tests.doubles.hashed_embedding.hashed_vector` (deterministic, word and trigram hashes).

Vectorize (V2, cosine): `upsert(vectors)` / `insert(vectors)` with `{id, values, namespace,
metadata}` (id 1-64 bytes, `dimensions` values, at most 1000 vectors a call, metadata at most
10 KiB of JSON, namespace at most 64 bytes) answer `{"mutationId"}`; `deleteByIds(ids)`
likewise; `query(vector, {topK, namespace, returnValues, returnMetadata, filter})` answers
`{"count", "matches": [{id, score, values?, metadata?, namespace?}]}` best first, topK at most
20 with values or metadata and 100 without; a `filter` is honoured only on properties with a
metadata index (`indexed`), equality or `{"$eq": v}`; `getByIds(ids)` answers the vectors
with values, metadata and namespace; `describe()` the dimensions and vector count.
Writes are asynchronous as in Vectorize: a mutation becomes visible `delay_ms` after it was
made on the runtime's clock (`settle()` makes every one visible now), and reads see only
visible mutations, in order. Vector ids are index-wide, namespaces filter queries.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aidememo.ports import Clock
from tests.doubles.do_storage import JsDict
from tests.doubles.hashed_embedding import DIMENSIONS, hashed_vector

MODEL = "@cf/baai/bge-small-en-v1.5"
AI_BATCH = 100
UPSERT_MAX = 1000
TOP_K_PLAIN = 100
TOP_K_RICH = 20
ID_BYTES = 64
NAMESPACE_BYTES = 64
METADATA_BYTES = 10 * 1024
DIMENSIONS_MAX = 1536


class BindingError(Exception):
    """What a binding throws for a refused call (a JS error across the boundary)."""


def _plain(value: Any) -> Any:
    """A JS object argument as plain Python (the double takes mappings or proxies)."""
    to_py = getattr(value, "to_py", None)
    return to_py() if callable(to_py) else value


class WorkersAI:
    """`env.AI` with the one model the edge uses."""

    def __init__(self) -> None:
        self.calls = 0
        self.texts = 0

    async def run(self, model: str, inputs: Any) -> JsDict:
        self.calls += 1
        if model != MODEL:
            raise BindingError(f"AiError: no such model {model}")
        text = _plain(inputs).get("text")
        texts = [text] if isinstance(text, str) else text
        if not isinstance(texts, list) or not texts or len(texts) > AI_BATCH:
            raise BindingError(f"AiError: text must be a string or 1..{AI_BATCH} strings")
        if not all(isinstance(t, str) and t for t in texts):
            raise BindingError("AiError: every text must be a non-empty string")
        self.texts += len(texts)
        data = [hashed_vector(t) for t in texts]
        return JsDict(shape=[len(texts), DIMENSIONS], data=data, pooling="mean")


@dataclass
class _Vector:
    id: str
    values: list[float]
    namespace: str | None
    metadata: dict[str, Any] | None


@dataclass
class VectorizeIndex:
    """`env.VECTORIZE`: one index of `dimensions` (cosine), on the runtime's clock."""

    clock: Clock
    dimensions: int = DIMENSIONS
    delay_ms: int = 2000
    indexed: tuple[str, ...] = ("source_id",)
    calls: dict[str, int] = field(default_factory=dict)
    _visible: dict[str, _Vector] = field(default_factory=dict)
    _queue: list[tuple[int, Callable[[], None]]] = field(default_factory=list)
    _mutations: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.dimensions <= DIMENSIONS_MAX:
            raise ValueError(f"an index has 1..{DIMENSIONS_MAX} dimensions")

    def _count(self, what: str) -> None:
        self.calls[what] = self.calls.get(what, 0) + 1
        self._apply_due()

    def _apply_due(self) -> None:
        now = self.clock.now_ms()
        while self._queue and self._queue[0][0] <= now:
            self._queue.pop(0)[1]()

    def settle(self) -> None:
        """Make every mutation made so far visible now."""
        while self._queue:
            self._queue.pop(0)[1]()

    def _mutate(self, apply: Callable[[], None]) -> JsDict:
        self._mutations += 1
        self._queue.append((self.clock.now_ms() + self.delay_ms, apply))
        return JsDict(mutationId=f"mutation-{self._mutations:08d}")

    def _checked(self, raw: Any) -> _Vector:
        v = _plain(raw)
        vid, values = v.get("id"), _plain(v.get("values"))
        if not isinstance(vid, str) or not 0 < len(vid.encode()) <= ID_BYTES:
            raise BindingError(f"VECTOR_INVALID: id must be 1..{ID_BYTES} bytes")
        if not isinstance(values, list) or len(values) != self.dimensions:
            raise BindingError(f"VECTOR_DIMENSION_MISMATCH: {self.dimensions} values expected")
        space = v.get("namespace")
        if space is not None and len(str(space).encode()) > NAMESPACE_BYTES:
            raise BindingError(f"VECTOR_INVALID: namespace over {NAMESPACE_BYTES} bytes")
        metadata = _plain(v.get("metadata"))
        if metadata is not None:
            metadata = dict(metadata)
            if len(json.dumps(metadata).encode()) > METADATA_BYTES:
                raise BindingError("VECTOR_INVALID: metadata over 10 KiB")
        return _Vector(vid, [float(x) for x in values], space, metadata)

    async def upsert(self, vectors: Any) -> JsDict:
        self._count("upsert")
        rows = [self._checked(v) for v in _plain(vectors)]
        if not 0 < len(rows) <= UPSERT_MAX:
            raise BindingError(f"VECTOR_INVALID: 1..{UPSERT_MAX} vectors per call")

        def apply() -> None:
            for row in rows:
                self._visible[row.id] = row

        return self._mutate(apply)

    async def insert(self, vectors: Any) -> JsDict:
        self._count("insert")
        rows = [self._checked(v) for v in _plain(vectors)]

        def apply() -> None:
            for row in rows:
                self._visible.setdefault(row.id, row)

        return self._mutate(apply)

    async def deleteByIds(self, ids: Any) -> JsDict:
        self._count("deleteByIds")
        gone = [str(i) for i in _plain(ids)]

        def apply() -> None:
            for vid in gone:
                self._visible.pop(vid, None)

        return self._mutate(apply)

    async def getByIds(self, ids: Any) -> list[JsDict]:
        self._count("getByIds")
        found = [self._visible.get(str(i)) for i in _plain(ids)]
        return [self._shape(v, 1.0, True, True) for v in found if v is not None]

    async def describe(self) -> JsDict:
        self._count("describe")
        return JsDict(dimensions=self.dimensions, vectorCount=len(self._visible))

    async def query(self, vector: Any, options: Any = None) -> JsDict:
        self._count("query")
        values = [float(x) for x in _plain(vector)]
        if len(values) != self.dimensions:
            raise BindingError(f"VECTOR_QUERY_ERROR: {self.dimensions} values expected")
        opts = dict(_plain(options) or {})
        top_k = int(opts.get("topK", 5))
        with_values = bool(opts.get("returnValues", False))
        level = opts.get("returnMetadata", "none")
        with_metadata = level not in (False, None, "none")
        cap = TOP_K_RICH if with_values or with_metadata else TOP_K_PLAIN
        if not 1 <= top_k <= cap:
            raise BindingError(f"VECTOR_QUERY_ERROR: topK must be 1..{cap}")
        space = opts.get("namespace")
        wanted = dict(_plain(opts.get("filter")) or {})
        scored = [
            (_cosine(values, v.values), v)
            for v in self._visible.values()
            if (space is None or v.namespace == space) and _matches(v, wanted, self.indexed)
        ]
        scored.sort(key=lambda sv: (-sv[0], sv[1].id))
        matches = [self._shape(v, s, with_values, with_metadata) for s, v in scored[:top_k]]
        return JsDict(count=len(matches), matches=matches)

    @staticmethod
    def _shape(v: _Vector, score: float, values: bool, metadata: bool) -> JsDict:
        out = JsDict(id=v.id, score=score)
        if values:
            out["values"] = list(v.values)
        if metadata:
            out["metadata"] = dict(v.metadata or {})
            out["namespace"] = v.namespace
        return out

    def vector_ids(self) -> set[str]:
        """The visible vectors' ids (for tests)."""
        return set(self._visible)


def _matches(v: _Vector, wanted: dict[str, Any], indexed: tuple[str, ...]) -> bool:
    for key, cond in wanted.items():
        if key not in indexed:
            continue  # Vectorize filters only on metadata indexes
        want = cond.get("$eq") if isinstance(cond, dict) else cond
        if (v.metadata or {}).get(key) != want:
            return False
    return True


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a)) or 1.0
    nb = math.sqrt(sum(y * y for y in b)) or 1.0
    return dot / (na * nb)
