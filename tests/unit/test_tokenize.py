"""The shared lexical tokenizer (SRCH-2)."""

from __future__ import annotations

from aidememo.domain.ranking import POSTINGS_BUDGET, SEARCH_WINDOW, window_for
from aidememo.domain.tokenize import (
    MAX_QUERY_TERMS,
    index_terms,
    query_terms,
    split_query,
    tokenize,
)


def test_srch2_words_are_lowercased_runs_of_letters_and_digits() -> None:
    assert tokenize("Redis cluster_timeout, v2.0!") == ["redis", "cluster", "timeout", "v2", "0"]


def test_srch2_cjk_runs_become_overlapping_bigrams() -> None:
    assert tokenize("서버가") == ["서버", "버가"]
    assert tokenize("服务器 down") == ["服务", "务器", "down"]
    assert tokenize("字") == ["字"]
    assert "서버" in index_terms("redis 서버가 다운되었다").split()


def test_srch2_query_terms_are_distinct_and_bounded() -> None:
    assert query_terms("a b a") == ["a", "b"]
    assert len(query_terms(" ".join(f"w{i}" for i in range(1000)))) == MAX_QUERY_TERMS
    assert query_terms('"OR" NEAR(*) ^') == ["or", "near"]


def test_srch7_the_first_32_distinct_terms_are_searched_and_the_rest_counted() -> None:
    words = [f"w{i}" for i in range(40)]
    terms, dropped = split_query(" ".join(words + words))  # repeats count once
    assert (terms, dropped) == (words[:MAX_QUERY_TERMS], 8) and MAX_QUERY_TERMS == 32
    assert split_query("a b a") == (["a", "b"], 0)


def test_srch7_the_postings_budget_is_shared_by_the_terms() -> None:
    assert [window_for(n) for n in (1, 8)] == [SEARCH_WINDOW, SEARCH_WINDOW]
    for n in range(1, MAX_QUERY_TERMS + 1):
        assert n * window_for(n) <= max(POSTINGS_BUDGET, SEARCH_WINDOW)
    assert window_for(MAX_QUERY_TERMS) == 2_500
