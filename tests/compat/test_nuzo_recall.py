"""Recall on the same store and query gives the memories Nuzo's recall gives, in Nuzo's order
(MEM-91): `recall --json` compared field by field, scores to the four significant digits Nuzo's
text rows print (and the text rows themselves compared whole).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.compat.nuzo_oracle import NOTES, Cli, Sample, nuzo_core_run
from tests.compat.nuzo_replay import Recording

QUERIES = [
    "cache",
    "migration",
    "cache migration",
    "staging port",
    "SQLite WAL sessions",
    "pnpm",
    "tooling pnpm docs",
    "数据库迁移每周五执行",
    "キャッシュは毎晩クリアする",
    "migração automática",
    "configuração",
    "concise answers",
    "rollback note",
    "Helix editor",
    "the and of",
    "deploy ci",
    "storage sqlite",
    'quote "inside" query',
    "worker-only after",
]

RECALL_CASES = [
    ("project:alpha", ()),
    ("project:alpha", ("--include-global",)),
    ("project:alpha", ("--no-include-global", "--limit", "2")),
    ("user:default", ()),
    ("team:core", ("--include-global",)),
    ("project:beta", ()),
]


def _sig4(value: float) -> float:
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.4g}")


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    results = [{**r, "score": _sig4(float(r["score"]))} for r in doc.get("results", [])]
    return {**doc, "results": results}


def _check_recall(nuzo: Cli, ours: Cli, query: str, scope: str, flags: tuple[str, ...]) -> None:
    theirs = nuzo.run("recall", query, "--json", *flags, scope=scope)
    mine = ours.run("recall", query, "--json", *flags, scope=scope)
    t, m = theirs.json(), mine.json()
    label = f"{query!r} in {scope} {flags}"
    assert [r["memory"]["id"] for r in m["results"]] == [r["memory"]["id"] for r in t["results"]], (
        label
    )
    assert _comparable(m) == _comparable(t), label
    for a, b in zip(m["results"], t["results"], strict=True):
        assert a["score"] == pytest.approx(b["score"], rel=1e-9), label
    text_theirs = nuzo.run("recall", query, *flags, scope=scope)
    text_mine = ours.run("recall", query, *flags, scope=scope)
    assert text_mine.stdout == text_theirs.stdout, label


@pytest.mark.parametrize(("scope", "flags"), RECALL_CASES, ids=str)
def test_mem91_recall_matches_nuzo_on_a_nuzo_store(
    nuzo: Cli, ours: Cli, scope: str, flags: tuple[str, ...]
) -> None:
    for query in QUERIES:
        _check_recall(nuzo, ours, query, scope, flags)


def test_mem91_recall_matches_nuzo_after_aidememo_writes(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample]
) -> None:
    _, ids = sample
    for content, tags in [
        ("Cache warmup runs before the migration window.", ["cache", "migration"]),
        ("缓存预热在迁移窗口之前运行", ["cache"]),
        ("The docs site uses pnpm workspaces too.", ["pnpm"]),
    ]:
        ours.run("remember", content, "--kind", "note", "--tag", *tags, scope="project:alpha")
    ours.run("update", ids.ids["accent"], "--tag", "cache", "migration", "pt")
    ours.run("forget", ids.ids["pnpm"], "--archive")
    for query in (
        "cache",
        "migration",
        "pnpm",
        "cache migration window",
        "缓存预热在迁移窗口之前运行",
    ):
        _check_recall(nuzo, ours, query, "project:alpha", ("--include-global",))


def test_mem91_recall_limit_and_empty_queries_match_nuzo(nuzo: Cli, ours: Cli) -> None:
    for flags in (("--limit", "1"), ("--limit", "50")):
        _check_recall(nuzo, ours, "cache", "project:alpha", ("--include-global", *flags))
    for bad in ("   ", "x" * 2001):
        theirs = nuzo.run("recall", bad, scope="project:alpha", check=False)
        mine = ours.run("recall", bad, scope="project:alpha", check=False)
        assert mine.returncode == theirs.returncode == 1
        assert mine.stderr.split(":")[0] == theirs.stderr.split(":")[0]


def test_mem91_the_benchmark_baseline_recalls_as_nuzos_cli(recorded: Recording, ours: Cli) -> None:
    """The benchmark's Nuzo baseline (Nuzo's core driven as its CLI drives it, recorded): the
    same memories give the same results, by score, as aidememo's recall on a store holding
    them."""
    memories = [
        {"content": content, "kind": kind, "scope": scope, "tags": tags}
        for _, scope, kind, content, tags in NOTES
    ]
    queries = [
        {"query": q, "scope": "project:alpha", "include_global": True, "limit": 8} for q in QUERIES
    ]
    run = nuzo_core_run(recorded, memories, queries)
    assert len(run.recall_ns) == len(QUERIES)
    fresh = ours.at(ours.store.with_name("fresh.sqlite"))
    for m in memories:
        tags = ["--tag", *m["tags"]] if m["tags"] else []
        fresh.run("remember", m["content"], "--kind", m["kind"], *tags, scope=m["scope"])
    for query, scores in zip(QUERIES, run.top_scores, strict=True):
        mine = fresh.run(
            "recall", query, "--json", "--include-global", scope="project:alpha"
        ).json()
        assert [_sig4(r["score"]) for r in mine["results"]] == [_sig4(s) for s in scores], query


def test_mem91_randomized_recall_on_a_nuzo_made_store_matches_nuzos_core(
    recorded: Recording, tmp_path: Path
) -> None:
    """The benchmark's corpus (English and CJK notes, tags, rare terms) in two scopes, written
    by Nuzo's core; 240 of the benchmark's queries, half also searching `user:default`: aidememo's
    recall on that store returns Nuzo's ids in Nuzo's order with Nuzo's scores."""
    import random

    from aidememo.agent_memory import AgentMemory
    from scripts.bench_memory import corpus, queries

    memories, rares, vocab = corpus(1200, seed=11)
    rng = random.Random(5)
    for m in memories:
        m["scope"] = "project:bench" if rng.random() < 0.7 else "user:default"
    qs = queries(240, rares, vocab, seed=11)
    for n, q in enumerate(qs):
        q["include_global"] = n % 2 == 0
        q["limit"] = (8, 3, 20)[n % 3]
        del q["kind"]
    store_path = tmp_path / "nuzo.sqlite"
    run = nuzo_core_run(recorded, memories, qs, store=store_path)
    store = AgentMemory.open(str(store_path), scope="project:bench")
    try:
        for q, ids, scores in zip(qs, run.top_ids, run.top_scores, strict=True):
            got = store.recall(
                q["query"], scope=q["scope"], limit=q["limit"], include_global=q["include_global"]
            )
            assert [r.memory.id for r in got] == ids, q
            assert [r.score for r in got] == pytest.approx(scores, rel=1e-9), q
    finally:
        store.close()
