"""Semantic search's pure parts (SPEC.md SEM-*): the embedding fingerprint, the stored vector
format, the search modes and the fusion of a lexical and a semantic result list.

Stdlib only: the core, the edge and Pyodide import it. Vectors travel as bytes (float32,
little-endian, L2-normalised), the format the derived tables store and the CPython matrix
reads without copying; `pack`/`unpack` convert from and to floats where Python needs them.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MODE_LEXICAL = "lexical"
MODE_SEMANTIC = "semantic"
MODE_HYBRID = "hybrid"
MODE_AUTO = "auto"
MODES = (MODE_LEXICAL, MODE_SEMANTIC, MODE_HYBRID, MODE_AUTO)
# SEM-3: what `mode` means when a request leaves it out (chosen by scripts/bench_retrieval.py).
DEFAULT_MODE = MODE_AUTO

# Why a hybrid or auto search answered from the lexical index alone (SEM-5).
FALLBACK_UNAVAILABLE = "semantic_unavailable"  # no provider here (the edge, no extra installed)
FALLBACK_NOT_BUILT = "semantic_index_not_built"  # the project has no index for this model yet
FALLBACK_BEHIND = "semantic_index_behind"  # at_least_seq beyond the index after the deadline

# SEM-4: how many candidates each list contributes to a hybrid fusion.
CANDIDATES = 100
# SEM-4: the lexical share of a fused score, tuned on the dev split of bench_retrieval
# (docs/bench-notes.md).
LEXICAL_WEIGHT = 0.3
# SEM-4: semantic candidates of a lower cosine are left out of a hybrid fusion (chosen on the
# same dev split; docs/bench-notes.md).
SEMANTIC_FLOOR = 0.25


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a vector was made by (SEM-2): vectors of two fingerprints are never compared."""

    provider: str
    model: str
    revision: str
    dimensions: int

    def text(self) -> str:
        """`provider/model@revision:dimensions`, the form the index tables store."""
        return f"{self.provider}/{self.model}@{self.revision}:{self.dimensions}"

    def as_json(self) -> dict[str, object]:
        """The wire shape of `semantic_model`."""
        return {
            "provider": self.provider,
            "model": self.model,
            "revision": self.revision,
            "dimensions": self.dimensions,
        }

    @staticmethod
    def parse(text: str) -> Fingerprint:
        """The inverse of `text`."""
        head, _, dims = text.rpartition(":")
        provider_model, _, revision = head.rpartition("@")
        provider, _, model = provider_model.partition("/")
        return Fingerprint(provider, model, revision, int(dims))


def pack(values: Iterable[float]) -> bytes:
    """Float32 little-endian bytes of a vector, scaled to unit length."""
    floats = [float(v) for v in values]
    norm = math.sqrt(sum(v * v for v in floats)) or 1.0
    out = array("f", (v / norm for v in floats))
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CPU runs this
        out.byteswap()
    return out.tobytes()


def unpack(blob: bytes) -> list[float]:
    """The floats of a packed vector."""
    out = array("f")
    out.frombytes(blob)
    if sys.byteorder == "big":  # pragma: no cover
        out.byteswap()
    return out.tolist()


@dataclass(frozen=True, slots=True)
class Fused:
    """One fused result: its fact, the fused score and what each list said of it."""

    fact_id: str
    score: float
    lexical_score: float | None
    lexical_rank: int | None
    semantic_score: float | None
    semantic_rank: int | None


def _standardised(pairs: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Each score as its distance from the list's mean in standard deviations."""
    if not pairs:
        return {}
    values = [score for _, score in pairs]
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) or 1.0
    return {fid: (score - mean) / spread for fid, score in pairs}


def fuse(
    lexical: Sequence[tuple[str, float]],
    semantic: Sequence[tuple[str, float]],
    limit: int,
    lexical_weight: float = LEXICAL_WEIGHT,
    semantic_floor: float = SEMANTIC_FLOOR,
) -> list[Fused]:
    """Weighted score fusion (SEM-4) of two best-first lists `(fact_id, score)`.

    Each list's scores are standardised (minus the list's mean, over its standard deviation):
    BM25 has no fixed scale and a query's cosines bunch differently from one query to the
    next, so only how far a fact stands out of its own list is compared. A fact missing from
    the lexical list counts 0 there (it holds no query term, or too few to make the list); one
    missing from the semantic list counts that list's lowest. The fused score is
    `w * lexical + (1 - w) * semantic`; ties go to the fact id, as in SRCH-3. Semantic
    candidates whose cosine is below `semantic_floor` take no part (weak neighbours of a query
    that has no good one).
    """
    if semantic_floor > 0:
        semantic = [(fid, score) for fid, score in semantic if score >= semantic_floor]
    lex = _standardised(lexical)
    sem = _standardised(semantic)
    sem_floor = min(sem.values(), default=0.0)
    lex_rank = {fid: i + 1 for i, (fid, _) in enumerate(lexical)}
    sem_rank = {fid: i + 1 for i, (fid, _) in enumerate(semantic)}
    lex_score = dict(lexical)
    sem_score = dict(semantic)
    fused = [
        Fused(
            fid,
            lexical_weight * lex.get(fid, 0.0) + (1.0 - lexical_weight) * sem.get(fid, sem_floor),
            lex_score.get(fid),
            lex_rank.get(fid),
            sem_score.get(fid),
            sem_rank.get(fid),
        )
        for fid in {*lex, *sem}
    ]
    fused.sort(key=lambda f: (-f.score, f.fact_id))
    return fused[:limit]
