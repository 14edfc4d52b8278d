#!/usr/bin/env python3
"""Benchmark of the local memory store (aidememo/agent_memory): remember throughput and recall
latency.

For each size (default 1,000, 10,000 and 100,000 memories in one scope; English notes with a
tenth in CJK, tags, rare terms) the store is filled through the store's own insert path, then:

* recall: `--queries` queries of 1-3 terms from the notes' vocabulary, half with a rare term,
  plus tag-boosted queries, timed per call (p50/p95/p99), beside a raw `sqlite3` FTS5
  `MATCH ... ORDER BY bm25` query with the same MATCH text on the same rows (which of the two
  runs a query first alternates, so neither always finds the other's warm caches); with
  `--rounds` > 1 also `rare_best`, each rare query's fastest round;
* remember: `--remember` calls of `AgentMemory.remember` (one transaction each) beside a raw
  insert loop (the same three INSERTs per memory, one transaction each) at the same size.

* semantic (`--semantic-sizes`, default 1,000 and 10,000): FTS, semantic and hybrid recall
  of a labelled paraphrase set among the synthetic notes, and the sidecar's rebuild rate
  (scripts/_bench_memory_semantic.py; FTS is that part's same-run baseline).

The same-run baseline is the raw FTS5 query and the raw insert loop. Beside them each size
that has them carries the reference Nuzo 1.2.0's figures as cited figures (`nuzo_cited`, from
scripts/data/nuzo_1_2_0_bench.json: one recorded run of this benchmark's Nuzo baseline with the
same corpus, queries and seed, on another day under other load), never as a same-run baseline.
Prints one JSON line. Usage: scripts/bench_memory.py [--sizes 1000,10000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from aidememo.agent_memory import AgentMemory  # noqa: E402
from aidememo.agent_memory.model import new_id  # noqa: E402
from aidememo.agent_memory.recall import fts_query  # noqa: E402
from aidememo.agent_memory.schema import capture_key  # noqa: E402

SCOPE = "project:bench"
WORDS = """
deploy staging release branch review merge commit build test suite flaky retry timeout cache
database migration schema index query latency throughput service endpoint request response
error budget alert page incident rollback canary feature flag config secret vault token rotate
certificate domain proxy gateway worker queue message event stream batch job schedule cron
backup restore snapshot replica primary failover region cluster node container image registry
pipeline lint format type check coverage benchmark profile memory leak thread lock deadlock
python node rust go typescript package version pin upgrade dependency vendor license audit
docs readme changelog guide onboarding runbook owner team oncall handoff meeting decision note
prefer avoid always never must should use keep write read delete archive update create move
small large fast slow stable safe clear short long simple strict local remote shared private
user customer tenant project session agent model prompt context window embedding vector search
ranking score filter tag label scope global default fallback limit page cursor export import
""".split()
CJK = """
東京 大阪 会議 設計 仕様 障害 復旧 監視 警告 配備 検証 試験 性能 遅延 記憶 検索 索引 更新
削除 保存 共有 権限 認証 鍵 証明書 通知 予定 担当 決定 方針 北京 上海 数据 服务 部署 测试
""".split()
TAGS = "infra ci docs release security storage api frontend python node ops data".split()
KINDS = ("note", "fact", "instruction", "preference", "project_decision")


def vocabulary(seed: int) -> list[str]:
    """The notes' words, most frequent first: the English words above, then 4,000 made-up
    words of 2-4 syllables (project names, identifiers, jargon)."""
    rng = random.Random(seed)
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    made: set[str] = set()
    while len(made) < 4000:
        made.add("".join(rng.choices(syllables, k=rng.randint(2, 4))))
    return WORDS + sorted(made)


def corpus(n: int, seed: int) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """`n` memories ({content, kind, scope, tags}), the rare terms in them, the vocabulary."""
    rng = random.Random(seed)
    vocab = vocabulary(seed)
    weights = [1 / (rank + 1) ** 1.05 for rank in range(len(vocab))]
    rare_pool = [f"zq{i:05d}x" for i in range(max(n // 4, 50))]
    memories, rares = [], []
    for i in range(n):
        if i % 10 == 9:
            words = rng.choices(CJK, k=rng.randint(4, 10))
        else:
            words = rng.choices(vocab, weights=weights, k=rng.randint(8, 24))
        if rng.random() < 0.3:
            rare = rng.choice(rare_pool)
            words.insert(rng.randrange(len(words) + 1), rare)
            rares.append(rare)
        content = " ".join(words).capitalize() + f". Note {i}."
        tags = rng.sample(TAGS, rng.randint(0, 3))
        memories.append(
            {"content": content, "kind": rng.choice(KINDS), "scope": SCOPE, "tags": tags}
        )
    return memories, rares, vocab


def queries(count: int, rares: list[str], vocab: list[str], seed: int) -> list[dict[str, Any]]:
    """`count` queries of 1-3 terms. Half carry a rare term: `rare` with 0-2 further words of
    the vocabulary's long tail, `rare_mixed` (one in four of them) with one of the English
    words, whose matches dominate the cost. The other half: `tag` (a tag and a word), `cjk`,
    `frequent` (one of the 20 most frequent words, the worst case) and `common` (1-3 words drawn
    uniformly from the whole vocabulary)."""
    rng = random.Random(seed + 1)
    head, tail = vocab[: len(WORDS)], vocab[len(WORDS) :]
    out = []
    for i in range(count):
        words = rng.sample(vocab, 3)
        if i % 2 == 0 and rares:
            if i % 8 == 6:
                terms, kind = [rng.choice(rares), rng.choice(head)], "rare_mixed"
            else:
                terms, kind = [rng.choice(rares), *rng.sample(tail, rng.randint(0, 2))], "rare"
        elif i % 4 == 1:
            terms, kind = [rng.choice(TAGS), *words[: rng.randint(0, 1)]], "tag"
        elif i % 12 == 3:
            terms, kind = rng.sample(CJK, rng.randint(1, 2)), "cjk"
        elif i % 12 == 7:
            terms, kind = [rng.choice(vocab[:20]), words[0]], "frequent"
        else:
            terms, kind = words[: rng.randint(1, 3)], "common"
        out.append(
            {
                "query": " ".join(terms),
                "scope": SCOPE,
                "include_global": False,
                "limit": 8,
                "kind": kind,
            }
        )
    return out


def fill(store: AgentMemory, memories: list[dict[str, Any]]) -> None:
    for start in range(0, len(memories), 5000):
        with store.db.write():
            for m in memories[start : start + 5000]:
                memory = store.new_memory(
                    content=m["content"],
                    kind=m["kind"],
                    scope=SCOPE,
                    tags=m["tags"],
                    source="bench:memory",
                    confidence=None,
                    confidence_state="user_confirmed",
                    provenance=None,
                    review_after=None,
                    expires_at=None,
                )
                store.persist(memory, "bench")


def pct(samples_ns: list[int], q: float) -> float:
    ordered = sorted(samples_ns)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[index] / 1e6, 3)


def summary(samples_ns: list[int]) -> dict[str, float]:
    return {
        "p50_ms": pct(samples_ns, 0.50),
        "p95_ms": pct(samples_ns, 0.95),
        "p99_ms": pct(samples_ns, 0.99),
    }


RAW_SQL = (
    "SELECT m.id, m.content, m.tags, bm25(memories_fts, 0.0, 0.0, 1.0, 5.0) * -1 AS score"
    " FROM memories_fts JOIN memories m ON m.id = memories_fts.id"
    " WHERE memories_fts MATCH ? AND m.archived_at IS NULL AND m.scope = ?"
    " ORDER BY bm25(memories_fts, 0.0, 0.0, 1.0, 5.0) LIMIT ?"
)


def time_recall(store: AgentMemory, qs: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    """Per query kind: wall-clock percentiles, the same for this thread's CPU time (`cpu`), and
    the raw FTS5 query's; `rare_best`: percentiles of each rare query's fastest round (with
    `--rounds` > 1, what a shared, loaded machine perturbs least)."""
    ours: dict[str, list[int]] = {}
    ours_cpu: dict[str, list[int]] = {}
    raw: dict[str, list[int]] = {}
    raw_cpu: dict[str, list[int]] = {}
    best_ours = [2**62] * len(qs)
    best_raw = [2**62] * len(qs)
    conn = store.db.conn

    def run_ours(i: int, q: dict[str, Any]) -> None:
        cpu, start = time.thread_time_ns(), time.perf_counter_ns()
        store.recall(q["query"], scope=SCOPE, limit=q["limit"])
        took = time.perf_counter_ns() - start
        ours.setdefault(q["kind"], []).append(took)
        ours_cpu.setdefault(q["kind"], []).append(time.thread_time_ns() - cpu)
        best_ours[i] = min(best_ours[i], took)

    def run_raw(i: int, q: dict[str, Any]) -> None:
        match = fts_query(q["query"])
        cpu, start = time.thread_time_ns(), time.perf_counter_ns()
        if match:
            conn.execute(RAW_SQL, (match, SCOPE, q["limit"] * 8)).fetchall()
        took = time.perf_counter_ns() - start
        raw.setdefault(q["kind"], []).append(took)
        raw_cpu.setdefault(q["kind"], []).append(time.thread_time_ns() - cpu)
        best_raw[i] = min(best_raw[i], took)

    # The second of the two runs a query finds its pages and the CPU caches warm from the
    # first: which one goes first alternates, query by query and round by round.
    for round_no in range(rounds):
        for i, q in enumerate(qs):
            first, second = (run_ours, run_raw) if (i + round_no) % 2 == 0 else (run_raw, run_ours)
            first(i, q)
            second(i, q)

    def flat(by_kind: dict[str, list[int]]) -> list[int]:
        return [v for values in by_kind.values() for v in values]

    out: dict[str, Any] = {
        "all": summary(flat(ours)) | {"cpu": summary(flat(ours_cpu))},
        "raw_fts_all": summary(flat(raw)) | {"cpu": summary(flat(raw_cpu))},
    }
    for kind in sorted(ours):
        out[kind] = summary(ours[kind]) | {
            "cpu": summary(ours_cpu[kind]),
            "raw_fts": summary(raw[kind]) | {"cpu": summary(raw_cpu[kind])},
        }
    rare_at = [i for i, q in enumerate(qs) if q["kind"] == "rare"]
    if rare_at:
        # Each rare query's fastest round (wall clock): what a loaded machine perturbs least.
        out["rare_best"] = summary([best_ours[i] for i in rare_at]) | {
            "raw_fts": summary([best_raw[i] for i in rare_at])
        }
        out["rare_best_vs_raw_p95"] = round(
            out["rare_best"]["p95_ms"] / max(out["rare_best"]["raw_fts"]["p95_ms"], 1e-6), 2
        )
    rare = out.get("rare")
    if rare:
        out["rare_vs_raw_p95"] = round(rare["p95_ms"] / max(rare["raw_fts"]["p95_ms"], 1e-6), 2)
        out["rare_vs_raw_cpu_p95"] = round(
            rare["cpu"]["p95_ms"] / max(rare["raw_fts"]["cpu"]["p95_ms"], 1e-6), 2
        )
    return out


def raw_insert_loop(path: str, memories: list[dict[str, Any]]) -> tuple[float, float]:
    """The same three INSERTs per memory, one transaction each, on the same store file."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    start, cpu = time.perf_counter(), time.thread_time()
    for m in memories:
        memory_id, now = new_id("raw"), "2026-12-01T00:00:00.000Z"
        tags = json.dumps(m["tags"], separators=(",", ":"))
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO memories (id, revision, scope, kind, content, capture_key, tags, source,"
            " confidence, confidence_state, provenance, review_after, expires_at, created_at,"
            " updated_at, last_used_at, archived_at) VALUES"
            " (?, 1, ?, ?, ?, ?, ?, 'bench:raw', 1.0, 'user_confirmed', NULL, NULL, NULL, ?, ?,"
            " NULL, NULL)",
            (memory_id, SCOPE, m["kind"], m["content"], capture_key(m["content"]), tags, now, now),
        )
        conn.execute(
            "INSERT INTO memories_fts (id, scope, content, tags) VALUES (?, ?, ?, ?)",
            (memory_id, SCOPE, m["content"], " ".join(m["tags"])),
        )
        conn.execute(
            "INSERT INTO memory_events (id, memory_id, event_type, actor, payload, created_at)"
            " VALUES (?, ?, 'memory.created', 'bench', ?, ?)",
            (new_id("evt"), memory_id, json.dumps({"scope": SCOPE, "tags": m["tags"]}), now),
        )
        conn.execute("COMMIT")
    elapsed = (time.perf_counter() - start, time.thread_time() - cpu)
    conn.close()
    return elapsed


def time_remember(store: AgentMemory, memories: list[dict[str, Any]]) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.thread_time()
    for m in memories:
        store.remember(
            m["content"],
            kind=m["kind"],
            scope=SCOPE,
            tags=m["tags"],
            source="bench:memory",
            actor="bench",
        )
    return time.perf_counter() - start, time.thread_time() - cpu


NUZO_CITED = Path(__file__).with_name("data") / "nuzo_1_2_0_bench.json"


def nuzo_cited() -> dict[str, Any]:
    """The reference Nuzo's recorded figures per size, and what they are."""
    data: dict[str, Any] = json.loads(NUZO_CITED.read_text(encoding="utf-8"))
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200, help="recall queries a size")
    parser.add_argument("--rounds", type=int, default=1, help="times each query runs")
    parser.add_argument("--remember", type=int, default=300, help="timed remember calls a size")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--semantic-sizes", default="1000,10000", help="sizes of the semantic part ('' skips it)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    result: dict[str, Any] = {
        "bench": "memory",
        "scope": SCOPE,
        "queries": args.queries,
        "rounds": args.rounds,
        "sizes": {},
    }
    cited = nuzo_cited()
    result["nuzo_cited"] = {"what": cited["what"], "source": cited["source"]}
    with tempfile.TemporaryDirectory(prefix="aidememo-bench-memory-") as tmp:
        for size in sizes:
            memories, rares, vocab = corpus(size + 2 * args.remember, args.seed)
            base, extra = memories[:size], memories[size:]
            path = os.path.join(tmp, f"store-{size}.sqlite")
            store = AgentMemory.open(path, scope=SCOPE)
            start = time.perf_counter()
            fill(store, base)
            fill_s = time.perf_counter() - start
            present = rares[: max(1, len(rares) * size // len(memories))]
            qs = queries(args.queries, present, vocab, args.seed)
            store.db.conn.execute("PRAGMA optimize")
            row: dict[str, Any] = {"fill_s": round(fill_s, 2)}
            row["recall"] = time_recall(store, qs, args.rounds)
            raw_s = raw_insert_loop(path, extra[: args.remember])
            ours_s = time_remember(store, extra[args.remember :])
            row["remember"] = {
                "per_s": round(args.remember / ours_s[0], 1),
                "raw_insert_per_s": round(args.remember / raw_s[0], 1),
                "vs_raw": round(raw_s[0] / ours_s[0], 2),
                "cpu_us": round(ours_s[1] / args.remember * 1e6, 1),
                "raw_cpu_us": round(raw_s[1] / args.remember * 1e6, 1),
            }
            store.close()
            nuzo = cited["sizes"].get(str(size), {}).get("nuzo")
            if nuzo is not None and args.seed == 7 and args.queries == 200:
                row["nuzo_cited"] = nuzo
                rare_o = row["recall"].get("rare") or {}
                if rare_o:
                    row["vs_nuzo_cited_rare_p95"] = round(
                        nuzo["rare"]["p95_ms"] / max(rare_o["p95_ms"], 1e-6), 1
                    )
            result["sizes"][str(size)] = row
    semantic_sizes = [int(s) for s in args.semantic_sizes.split(",") if s]
    if semantic_sizes:
        from _bench_memory_semantic import run as run_semantic

        result["semantic"] = run_semantic(
            semantic_sizes, lambda n: corpus(n, args.seed)[0], fill, SCOPE
        )
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
