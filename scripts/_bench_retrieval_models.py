"""bench_retrieval's candidate models beside the bundled MiniLM: `wordllama` 0.4.0.post1's
256-d static model (`l2_supercat_256`, MIT; averaged token embeddings, no transformer).

Its wheel ships both files the model needs (`wordllama/weights/l2_supercat_256.safetensors`
and `wordllama/tokenizers/l2_supercat_tokenizer_config.json`), but `WordLlama.load()` looks for
the tokenizer under `wordllama/tokenizer/` (singular), misses it and downloads it from a model
hub, which fails with no network. So the model is built here from the two shipped files with
the package's own `WordLlamaInference`; nothing is downloaded. The package is not a dependency
of aidememo: when it is not installed (`pip install wordllama==0.4.0.post1`), the comparison
is skipped and the output says so.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aidememo.domain.semantic import Fingerprint

WORDLLAMA_VERSION = "0.4.0.post1"


class WordLlamaEmbedder:
    """`aidememo.ports.Embedder` over wordllama's shipped 256-d model."""

    def __init__(self, model: Any, version: str) -> None:
        self._model = model
        self.fingerprint = Fingerprint("wordllama", "l2_supercat_256", version, 256)

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        vectors = self._model.embed(list(texts), norm=True).astype("<f4")
        return [row.tobytes() for row in vectors]


def load_wordllama() -> tuple[WordLlamaEmbedder | None, str]:
    """The model and its version, or None and why not."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        return None, f"wordllama is not installed (pip install wordllama=={WORDLLAMA_VERSION})"
    from importlib.metadata import version

    from safetensors import safe_open  # type: ignore[import-not-found,unused-ignore]
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference  # type: ignore[import-untyped,import-not-found,unused-ignore]

    root = Path(next(iter(spec.submodule_search_locations)))
    tokenizer = Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json"))
    weights = root / "weights" / "l2_supercat_256.safetensors"
    with safe_open(str(weights), framework="np", device="cpu") as f:
        embedding = f.get_tensor("embedding.weight")
    installed = version("wordllama")
    return WordLlamaEmbedder(WordLlamaInference(embedding, tokenizer), installed), installed
