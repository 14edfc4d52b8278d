"""The bundled model's session is made at its first embedding (SPEC.md SEM-2): a process that
never embeds (a server never asked a semantic question, an indexer with nothing to index) does
not pay for it, while the pins are still checked when the provider is asked for."""

from __future__ import annotations

import pytest

from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.embedding import bundled, load_embedder

pytest.importorskip("onnxruntime")


def test_sem2_bundled_model_loads_at_its_first_embedding() -> None:
    lazy = load_embedder()
    assert isinstance(lazy, bundled.LazyBundled) and not lazy.loaded
    eager = bundled.load_bundled()
    assert lazy.fingerprint == eager.fingerprint
    assert lazy.embed(["the pool is exhausted"]) == eager.embed(["the pool is exhausted"])
    assert lazy.loaded


def test_sem2_a_changed_pin_is_refused_when_the_provider_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bundled, "MODEL_SHA256", "0" * 64)
    with pytest.raises(AidememoError) as refused:
        load_embedder()
    assert refused.value.code is ErrorCode.SEMANTIC_UNAVAILABLE
