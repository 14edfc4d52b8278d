"""The model runtime of local semantic recall (`aidememo.agent_memory.semantic.ModelRuntime`,
SPEC.md MEM-22): the server's embedding providers (`aidememo.embedding`, onnxruntime and
tokenizers) and numpy cosine scoring. CPython only; numpy and the providers are imported when
a model is first needed, so `status`, `clear` and FTS recall never import them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.semantic_model import ModelFiles
from aidememo.agent_memory.sidecar import Descriptor, Vectors

# The bundled model's descriptor: the pins of aidememo.embedding.bundled, repeated here so
# `status` knows the fingerprint without importing numpy (tests/memory checks they agree).
BUNDLED = Descriptor("bundled", "all-MiniLM-L6-v2-int8", "8199be6f699a395f", 384)


class OnnxRuntime:
    """`ModelRuntime` over `aidememo.embedding`; `threads` bounds the model's CPU."""

    default = BUNDLED

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads

    def bundled(self) -> tuple[str, str] | None:
        if not _extra_installed():
            return None
        from aidememo.domain.errors import AidememoError
        from aidememo.embedding.bundled import bundled_files

        try:
            model, tokenizer = bundled_files()
        except AidememoError as exc:
            raise AgentMemoryError(
                C.SEMANTIC_MODEL_CHECKSUM_FAILED, f"Bundled semantic model: {exc.message}"
            ) from None
        return str(model), str(tokenizer)

    def describe(self, model: str, tokenizer: str, name: str) -> Descriptor:
        from aidememo.embedding.onnx_model import file_sha256

        embedder = self._onnx(model, tokenizer, "onnx-dir", name, "probe")
        revision = file_sha256(_path(model))[:16]
        return Descriptor("onnx-dir", name, revision, embedder.fingerprint.dimensions)

    def load(self, files: ModelFiles) -> Callable[[list[str]], list[bytes]]:
        d = files.descriptor
        embedder = self._onnx(files.model, files.tokenizer, d.provider_id, d.model, d.revision)
        if embedder.fingerprint.dimensions != d.dimensions:
            raise AgentMemoryError(
                C.SEMANTIC_MODEL_INVALID,
                "Semantic model dimensions differ from its manifest.",
                {"path": files.path},
            )

        def embed(texts: list[str]) -> list[bytes]:
            try:
                vectors: list[bytes] = embedder.embed(texts)
            except Exception as exc:  # onnxruntime's own errors
                raise AgentMemoryError(
                    C.SEMANTIC_PROVIDER_FAILED,
                    "Local semantic model inference failed.",
                    {"cause": str(exc)},
                ) from exc
            return vectors

        return embed

    def _onnx(self, model: str, tokenizer: str, provider: str, name: str, revision: str) -> Any:
        if not _extra_installed():
            raise AgentMemoryError(
                C.SEMANTIC_PROVIDER_MISSING,
                "Install aidememo[semantic] to use the local semantic provider.",
            )
        from aidememo.embedding.onnx_model import OnnxEmbedder

        try:
            return OnnxEmbedder(
                _path(model),
                _path(tokenizer),
                provider=provider,
                name=name,
                revision=revision,
                threads=self.threads,
            )
        except Exception as exc:  # onnxruntime or tokenizers refusing the files
            raise AgentMemoryError(
                C.SEMANTIC_PROVIDER_FAILED,
                "Local semantic model could not be loaded.",
                {"cause": str(exc)},
            ) from exc

    def top(
        self, vectors: Vectors, query: bytes, count: int, floor: float
    ) -> list[tuple[int, float]]:
        import numpy as np

        if vectors.prepared is None:
            matrix = np.frombuffer(b"".join(vectors.blobs), dtype="<f4")
            vectors.prepared = matrix.reshape(len(vectors.blobs), vectors.dimensions)
        matrix = vectors.prepared
        scores = matrix @ np.frombuffer(query, dtype="<f4")
        keep = np.flatnonzero(scores >= floor)
        if keep.size > count:
            keep = keep[np.argpartition(-scores[keep], count - 1)[:count]]
        found = [(int(i), float(scores[i])) for i in keep]
        found.sort(key=lambda pair: (-pair[1], vectors.ids[pair[0]]))
        return found


def _path(text: str) -> Any:
    from pathlib import Path

    return Path(text)


def _extra_installed() -> bool:
    import importlib.util

    return all(
        importlib.util.find_spec(name) is not None
        for name in ("numpy", "onnxruntime", "tokenizers")
    )
