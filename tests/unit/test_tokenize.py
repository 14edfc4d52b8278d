"""The shared lexical tokenizer (SRCH-2)."""

from __future__ import annotations

from aidememo.domain.tokenize import MAX_TERMS, index_terms, query_terms, tokenize


def test_srch2_words_are_lowercased_runs_of_letters_and_digits() -> None:
    assert tokenize("Redis cluster_timeout, v2.0!") == ["redis", "cluster", "timeout", "v2", "0"]


def test_srch2_cjk_runs_become_overlapping_bigrams() -> None:
    assert tokenize("서버가") == ["서버", "버가"]
    assert tokenize("服务器 down") == ["服务", "务器", "down"]
    assert tokenize("字") == ["字"]
    assert "서버" in index_terms("redis 서버가 다운되었다").split()


def test_srch2_query_terms_are_distinct_and_bounded() -> None:
    assert query_terms("a b a") == ["a", "b"]
    assert len(query_terms(" ".join(f"w{i}" for i in range(1000)))) == MAX_TERMS
    assert query_terms('"OR" NEAR(*) ^') == ["or", "near"]
