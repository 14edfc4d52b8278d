"""SEM-4: hybrid fusion of a lexical and a semantic list, and the stored vector format."""

from __future__ import annotations

import pytest

from aidememo.domain.semantic import Fingerprint, fuse, pack, unpack


def test_sem4_a_fact_in_both_lists_outranks_one_in_a_single_list() -> None:
    lexical = [("both", 9.0), ("words_only", 8.0), ("w2", 1.0), ("w3", 1.0)]
    semantic = [("meaning_only", 0.80), ("both", 0.78), ("s2", 0.2), ("s3", 0.1)]
    fused = fuse(lexical, semantic, 10, lexical_weight=0.3, semantic_floor=0.0)
    assert fused[0].fact_id == "both"
    top = fused[0]
    assert (top.lexical_rank, top.semantic_rank) == (1, 2)
    assert (top.lexical_score, top.semantic_score) == (9.0, 0.78)
    by_id = {f.fact_id: f for f in fused}
    assert by_id["words_only"].semantic_score is None and by_id["words_only"].semantic_rank is None
    assert by_id["meaning_only"].lexical_rank is None


def test_sem4_weights_move_the_order_and_ties_go_to_the_fact_id() -> None:
    lexical = [("lex", 10.0), ("x", 1.0), ("y", 1.0)]
    semantic = [("sem", 0.9), ("x", 0.1), ("y", 0.1)]
    assert fuse(lexical, semantic, 1, lexical_weight=0.9, semantic_floor=0.0)[0].fact_id == "lex"
    assert fuse(lexical, semantic, 1, lexical_weight=0.1, semantic_floor=0.0)[0].fact_id == "sem"
    tied = fuse([("b", 1.0), ("a", 1.0)], [], 2, lexical_weight=0.5)
    assert [f.fact_id for f in tied] == ["a", "b"]
    assert fuse([], [], 5) == []


def test_sem2_vectors_are_unit_float32_and_fingerprints_round_trip() -> None:
    blob = pack([3.0, 4.0])
    assert len(blob) == 8
    assert unpack(blob) == pytest.approx([0.6, 0.8])
    f = Fingerprint("bundled", "all-MiniLM-L6-v2-int8", "8199be6f699a395f", 384)
    assert Fingerprint.parse(f.text()) == f
    assert f.as_json()["dimensions"] == 384


def test_sem4_semantic_candidates_under_the_floor_take_no_part() -> None:
    lexical = [("word", 5.0), ("other", 1.0)]
    semantic = [("near", 0.62), ("weak", 0.12), ("weaker", 0.08)]
    kept = {f.fact_id for f in fuse(lexical, semantic, 10, semantic_floor=0.25)}
    assert kept == {"word", "other", "near"}
    assert {f.fact_id for f in fuse(lexical, semantic, 10, semantic_floor=0.0)} == {
        "word", "other", "near", "weak", "weaker"
    }  # fmt: skip
    # nothing of the query is near: the lexical list alone decides
    only_words = fuse(lexical, [("weak", 0.1)], 10, semantic_floor=0.25)
    assert [f.fact_id for f in only_words] == ["word", "other"]
