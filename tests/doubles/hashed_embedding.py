"""A deterministic embedding for contract tests (SPEC.md SEM-10): good enough that a fact
sharing words or word pieces with a query is nearer to it than one that shares none, and the
same vector for the same text on every backend.

Each lower-case word (`[a-z0-9]+`) adds 1.0 at the dimension its FNV-1a 32-bit hash picks,
and each character trigram of `#word#` adds 0.5 at its own; the vector is scaled to unit
length. tests/pyodide/ai_vectorize.mjs computes exactly this in JavaScript, so the Workers
AI double of both edge tiers and the origin's test embedder agree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from aidememo.domain.semantic import Fingerprint, pack

DIMENSIONS = 384
_WORD = re.compile(r"[a-z0-9]+")


def fnv1a(text: str) -> int:
    """FNV-1a, 32 bits, over the UTF-8 bytes of `text`."""
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def hashed_vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """The unit vector of `text` (all zeros but the first for a text without words)."""
    out = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        out[fnv1a(word) % dimensions] += 1.0
        marked = f"#{word}#"
        for i in range(len(marked) - 2):
            out[fnv1a(marked[i : i + 3]) % dimensions] += 0.5
    norm = math.sqrt(sum(v * v for v in out))
    if norm == 0.0:
        out[0] = 1.0
        return out
    return [v / norm for v in out]


class HashedEmbedder:
    """An `aidememo.ports.Embedder` of `hashed_vector` (the origin's side of the contract)."""

    fingerprint = Fingerprint("test-hashed", "trigrams", "1", DIMENSIONS)

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        self.calls += 1
        return [pack(hashed_vector(t)) for t in texts]
