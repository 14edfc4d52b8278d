"""A sentence-embedding model in ONNX, run with onnxruntime and a `tokenizers` tokenizer:
word pieces (truncated to `max_tokens`), the transformer's last hidden state, mean pooling
over the attention mask, L2 normalisation (the pipeline all-MiniLM-L6-v2 was trained with).

`load_onnx_dir(DIR)` serves any directory with `model.onnx` and `tokenizer.json`; its
fingerprint's revision is the model file's SHA-256 prefix, so a new file is a new index.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.semantic import Fingerprint

MAX_TOKENS = 256
BATCH = 32


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class OnnxEmbedder:
    """`aidememo.ports.Embedder` over an ONNX session; thread-safe (one run at a time)."""

    def __init__(
        self,
        model: Path,
        tokenizer: Path,
        *,
        provider: str,
        name: str,
        revision: str,
        threads: int = 1,
        max_tokens: int = MAX_TOKENS,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.enable_padding()  # a text alone is not padded (a file may ask for 128)
        self._pad_id = int((self._tokenizer.padding or {}).get("pad_id", 0))
        self._lock = threading.Lock()
        dims = int(self._session.get_outputs()[0].shape[-1])
        self.fingerprint = Fingerprint(provider, name, revision, dims)

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        """One packed unit vector per text (`aidememo.ports.Embedder`)."""
        out: list[bytes] = []
        for start in range(0, len(texts), BATCH):
            matrix = self.embed_matrix(texts[start : start + BATCH])
            out.extend(row.tobytes() for row in matrix)
        return out

    def embed_matrix(self, texts: Sequence[str]) -> Any:
        """The vectors as a float32 little-endian matrix, one row per text."""
        if not texts:
            return np.zeros((0, self.fingerprint.dimensions), dtype="<f4")
        # one text at a time on this thread (`encode_batch` would spread the batch over a
        # thread pool on every core, against the one-thread bound of SEM-7)
        encodings = [self._tokenizer.encode(text) for text in texts]
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = encoding.attention_mask
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        with self._lock:
            hidden = self._session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype("<f4")


def load_onnx_dir(directory: str, *, threads: int = 1) -> OnnxEmbedder:
    """An operator's model directory (`model.onnx` + `tokenizer.json`)."""
    root = Path(directory)
    model, tokenizer = root / "model.onnx", root / "tokenizer.json"
    if not model.is_file() or not tokenizer.is_file():
        raise fail(
            ErrorCode.INVALID_COMMAND, f"{directory} must hold model.onnx and tokenizer.json"
        )
    revision = file_sha256(model)[:16]
    return OnnxEmbedder(
        model, tokenizer, provider="onnx-dir", name=root.name, revision=revision, threads=threads
    )
