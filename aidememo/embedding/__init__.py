"""Embedding providers behind the core's `aidememo.ports.Embedder` (SPEC.md SEM-2).

CPython only (numpy, onnxruntime, tokenizers from the `semantic` extra; the OpenAI-compatible
provider needs only the stdlib); the core, the edge and the client never import this package.
It is reusable on its own: `load_embedder(spec)` gives an `Embedder` for

- `bundled`: all-MiniLM-L6-v2 int8 ONNX (384 d) from registry packages, verified when asked
  for, its session made at the first embedding (`aidememo.embedding.bundled`);
- `onnx:DIR`: any local sentence-embedding directory holding `model.onnx` and
  `tokenizer.json` (`aidememo.embedding.onnx_model`);
- `openai:URL#MODEL`: an OpenAI-compatible `/embeddings` endpoint, its key read from the
  environment variable `AIDEMEMO_EMBEDDING_API_KEY` (`aidememo.embedding.openai_compat`).
"""

from __future__ import annotations

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.ports import Embedder

BUNDLED = "bundled"


def load_embedder(spec: str = BUNDLED, *, threads: int = 1) -> Embedder:
    """The provider `spec` names (see the module docstring); `threads` bounds an ONNX
    provider's CPU. Refuses an unknown spec or a missing model with `invalid_command`."""
    if spec == BUNDLED:
        from aidememo.embedding.bundled import lazy_bundled

        return lazy_bundled(threads=threads)
    if spec.startswith("onnx:"):
        from aidememo.embedding.onnx_model import load_onnx_dir

        return load_onnx_dir(spec.removeprefix("onnx:"), threads=threads)
    if spec.startswith("openai:"):
        from aidememo.embedding.openai_compat import OpenAICompatible

        url, _, model = spec.removeprefix("openai:").partition("#")
        return OpenAICompatible.connect(url, model)
    raise fail(
        ErrorCode.INVALID_COMMAND,
        "embedding provider must be bundled, onnx:DIR or openai:URL#MODEL",
    )


def installed_embedder() -> Embedder | None:
    """The bundled model where the `semantic` extra is installed and its files pass their pins,
    else None (an offline caller then searches by words alone)."""
    try:
        return load_embedder(BUNDLED)
    except (ImportError, AidememoError):
        return None
