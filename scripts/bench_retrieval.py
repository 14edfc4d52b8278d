#!/usr/bin/env python3
"""Retrieval quality and speed of search's modes (SPEC.md SEM-3, SEM-4, SEM-7).

The labelled set is built here from the hand-written templates and vocabularies of
`scripts/data/retrieval_set.json`: four agent-team projects, each with eight components; for
every (concept, component) one fact stating it (decisions, errors, conventions), in English,
or in Japanese or Chinese for a share of them, each with a keyword token of its own
(`ERR-4821`, `ADR-311`, `CONV-207`), among generated noise notes of the same team. LedgerReads are
labelled by construction (the facts the query was made from): `paraphrase` (an agent's
question that shares little more than the component's name with the fact), `keyword` (the
fact's token and component), `multi` (two concepts of one component in one question: both
facts relevant) and `cjk` (a Japanese or Chinese question for a CJK fact).

Every fact is written through the product's own `fact.create` on a SQLite file store; the
semantic indexer then follows the feed with the bundled model (one thread, no duty-cycle
sleep, so its figure is facts per second of one core). One third of the queries (every third)
is the dev split, on which hybrid's lexical weight is tuned over a grid; the rest (held out) is
what the figures report, for lexical alone, dense (semantic) alone and hybrid, all through
`Searches.search` in the same run. Latency: hybrid and lexical searches (query embedding
included) on one project of `--large` facts (default 10,000).

The machine is shared with other engineers: latency and throughput figures are noisy.
Last line: one JSON object (`_bench_common.emit`).
Run: `.venv/bin/python scripts/bench_retrieval.py`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _bench_common import emit, latency_summary, note, peak_rss_mib, target
from _bench_retrieval_models import load_wordllama
from _bench_retrieval_scale import run_scale

from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.records import CreateRequest
from aidememo.domain.semantic import LEXICAL_WEIGHT, fuse
from aidememo.domain.semantic_index import NearestQuery
from aidememo.domain.tokenize import query_terms
from aidememo.embedding import load_embedder
from aidememo.embedding.matrix import MatrixSearch
from aidememo.http.app import Services
from aidememo.service.access import Caller
from aidememo.service.search_modes import Searches
from aidememo.service.semantic_indexer import IndexerSettings, SemanticIndexer
from aidememo.stores.sqlite.store import SqliteStore

DATA = Path(__file__).resolve().parent / "data" / "retrieval_set.json"
TENANT, ACTOR = "bench", "bench-agent"
KEY_PREFIX = {"error": "ERR", "decision": "ADR", "convention": "CONV"}
WEIGHTS = [round(0.05 * i, 2) for i in range(21)]
FLOORS = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4]


@dataclass
class Query:
    project: str
    text: str
    kind: str
    relevant: set[str]
    dev: bool = False


@dataclass
class LabelledSet:
    facts: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # project -> (id, text)
    queries: list[Query] = field(default_factory=list)


def build_set(seed: int, noise_per_project: int, cjk_share: float) -> LabelledSet:
    """Facts and labelled queries from the templates, deterministic for a seed."""
    spec = json.loads(DATA.read_text(encoding="utf-8"))
    rng = random.Random(seed)
    out = LabelledSet()
    people = spec["people"]
    used_keys: set[str] = set()
    for project, components in spec["projects"].items():
        facts: list[tuple[str, str]] = []
        by_pair: dict[tuple[str, str], str] = {}
        for ci, concept in enumerate(spec["concepts"]):
            for comp in components:
                while True:
                    key = f"{KEY_PREFIX[concept['kind']]}-{rng.randint(100, 9999)}"
                    if key not in used_keys:
                        used_keys.add(key)
                        break
                slots = {
                    "c": comp,
                    "n": str(rng.randint(2, 90)),
                    "m": str(rng.randint(20, 400)),
                    "p": rng.choice(people),
                    "k": key,
                }
                lang = "en"
                if rng.random() < cjk_share:
                    lang = rng.choice(["ja", "zh"])
                template = concept[lang] if lang != "en" else rng.choice(concept["facts"])
                fact_id = f"f-{project}-{ci:02d}-{comp}"
                facts.append((fact_id, template.format(**slots)))
                by_pair[(concept["id"], comp)] = fact_id
                q_comp = {"c": comp}
                if lang == "en":
                    out.queries.append(
                        Query(
                            project,
                            rng.choice(concept["ask"]).format(**q_comp),
                            "paraphrase",
                            {fact_id},
                        )
                    )
                else:
                    out.queries.append(
                        Query(project, concept[f"{lang}_ask"].format(**q_comp), "cjk", {fact_id})
                    )
                out.queries.append(Query(project, f"{key} {comp}", "keyword", {fact_id}))
        for i in range(noise_per_project):
            slots = {
                "c": rng.choice(components),
                "p": rng.choice(people),
                "q": rng.choice(people),
                "n": str(rng.randint(2, 60)),
            }
            facts.append((f"n-{project}-{i:04d}", rng.choice(spec["noise"]).format(**slots)))
        concepts = spec["concepts"]
        for _ in range(40):
            a, b = rng.sample(concepts, 2)
            comp = rng.choice(components)
            text = rng.choice(spec["multi"]).format(c=comp, a=a["short"], b=b["short"])
            out.queries.append(
                Query(project, text, "multi", {by_pair[(a["id"], comp)], by_pair[(b["id"], comp)]})
            )
        rng.shuffle(facts)
        out.facts[project] = facts
    # Keep every CJK and multi query, and a sample of the rest, so each kind weighs in.
    keep: list[Query] = []
    for kind, share in (("paraphrase", 0.35), ("keyword", 0.12), ("multi", 1.0), ("cjk", 1.0)):
        chosen = [q for q in out.queries if q.kind == kind]
        keep.extend(rng.sample(chosen, int(len(chosen) * share)))
    for i, q in enumerate(keep):
        q.dev = i % 3 == 0
    out.queries = keep
    return out


def _write_project(services: Services, project: str, facts: list[tuple[str, str]]) -> None:
    services.identity.bootstrap(tenant_id=TENANT, project_id=project, actor_id=ACTOR)
    caller = Caller(TENANT, ACTOR)
    services.typed_writes.create_session(
        caller,
        project,
        CreateRequest(f"cmd-s-{project}", {"session_id": "s1", "source_id": "team", "topic": "t"}),
    )
    for fact_id, text in facts:
        services.typed_writes.create_fact(
            caller,
            project,
            CreateRequest(
                f"cmd-{fact_id}", {"fact_id": fact_id, "session_id": "s1", "content": text}
            ),
        )


def _metrics(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    def recall(k: int) -> float:
        return len(relevant & set(ranked[:k])) / len(relevant)

    rr = next((1.0 / (i + 1) for i, f in enumerate(ranked) if f in relevant), 0.0)
    dcg = sum(1.0 / math.log2(i + 2) for i, f in enumerate(ranked[:10]) if f in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return {"recall@5": recall(5), "recall@10": recall(10), "mrr": rr, "ndcg@10": dcg / ideal}


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = rows[0].keys() if rows else []
    return {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in keys}


def _run_mode(searches: Searches, queries: list[Query], mode: str) -> dict[str, Any]:
    caller = Caller(TENANT, ACTOR)
    rows: list[dict[str, float]] = []
    by_kind: dict[str, list[dict[str, float]]] = {}
    for q in queries:
        found = searches.search(
            caller, q.project, q=q.text, source_id=None, limit=10, at_least_seq=None, mode=mode
        )
        ranked = [str(r["fact_id"]) for r in found.results]
        m = _metrics(ranked, q.relevant)
        rows.append(m)
        by_kind.setdefault(q.kind, []).append(m)
    out: dict[str, Any] = _mean(rows)
    out["recall@10_by_kind"] = {k: _mean(v)["recall@10"] for k, v in sorted(by_kind.items())}
    return out


Lists = list[tuple[list[tuple[str, float]], list[tuple[str, float]]]]


def _candidates(store: SqliteStore, engine: MatrixSearch, queries: list[Query]) -> Lists:
    """Each query's lexical and semantic candidate lists (100 each), as hybrid reads them."""
    lists: Lists = []
    for q in queries:
        scope = Caller(TENANT, ACTOR).scope(q.project)
        vec = engine.embed_query(q.text)

        def read(tx: Any, scope: Any = scope, vec: bytes = vec, text: str = q.text) -> Any:
            state = tx.semantic_state(scope)
            terms = query_terms(text)
            lex = tx.search(scope, terms, None, 100).hits if terms else []
            sem = engine.nearest(tx, scope, state, NearestQuery(vec, 100, None))
            return [(h.fact_id, h.score) for h in lex], sem

        lists.append(store.read(read))
    return lists


def _tune(lists: Lists, queries: list[Query]) -> tuple[float, dict[str, float]]:
    """The lexical weight with the best dev recall@10 (then MRR), from each query's two
    candidate lists fused offline."""
    scores: dict[float, tuple[float, float]] = {}
    for w in WEIGHTS:
        rows = [
            _metrics([f.fact_id for f in fuse(lex, sem, 10, w)], q.relevant)
            for (lex, sem), q in zip(lists, queries, strict=True)
        ]
        mean = _mean(rows)
        scores[w] = (mean["recall@10"], mean["mrr"])
    best = max(WEIGHTS, key=lambda w: (scores[w], -abs(w - LEXICAL_WEIGHT)))
    return best, {str(w): scores[w][0] for w in WEIGHTS}


def _tune_floor(lists: Lists, queries: list[Query], weight: float) -> tuple[float, dict[str, Any]]:
    """The similarity floor (semantic candidates under it left out of the fusion) with the
    best dev recall@10 (then MRR) at `weight`; ties to the lowest floor (0: none)."""
    scores: dict[float, tuple[float, float]] = {}
    for floor in FLOORS:
        rows = [
            _metrics([f.fact_id for f in fuse(lex, sem, 10, weight, floor)], q.relevant)
            for (lex, sem), q in zip(lists, queries, strict=True)
        ]
        mean = _mean(rows)
        scores[floor] = (mean["recall@10"], mean["mrr"])
    best = max(FLOORS, key=lambda f: (scores[f], -f))
    return best, {str(f): list(scores[f]) for f in FLOORS}


def _timed(searches: Searches, project: str, texts: list[str], mode: str) -> dict[str, float]:
    """Wall-clock latency of one search per text (`{mode}_p50_ms`, ...) and the process's CPU
    time per search (`{mode}_cpu_p50_ms`, `{mode}_cpu_p95_ms`: every thread of this process,
    where nothing else runs meanwhile; on a shared machine it moves far less than the wall
    clock)."""
    caller = Caller(TENANT, ACTOR)
    wall: list[int] = []
    cpu: list[int] = []
    for text in texts:
        started, started_cpu = time.perf_counter_ns(), time.process_time_ns()
        searches.search(
            caller, project, q=text, source_id=None, limit=10, at_least_seq=None, mode=mode
        )
        wall.append(time.perf_counter_ns() - started)
        cpu.append(time.process_time_ns() - started_cpu)
    on_cpu = latency_summary(cpu, f"{mode}_cpu")
    return {
        **latency_summary(wall, mode),
        **{k: v for k, v in on_cpu.items() if k.endswith(("_p50_ms", "_p95_ms"))},
    }


@dataclass
class Evaluation:
    """One model over the labelled set: its store (open), what it measured."""

    store: SqliteStore
    services: Services
    searches: Searches  # tuned on the dev split
    engine: MatrixSearch
    indexer: SemanticIndexer
    throughput: float
    per_cpu_s: float
    weight: float
    grid: dict[str, float]
    floor: float
    floor_grid: dict[str, Any]
    lexical: dict[str, Any]
    dense: dict[str, Any]
    hybrid: dict[str, Any]
    hybrid_without_floor: dict[str, Any]


def evaluate(embedder: Any, labelled: LabelledSet, tmp: str, name: str) -> Evaluation:
    """Write the set, index it with `embedder`, tune the weight and the floor on the dev
    split and measure the three modes on the held-out split."""
    engine = MatrixSearch(embedder, cached_queries=0)  # every query embedded: no cache hits
    store = SqliteStore.open_file(Path(tmp) / f"bench-{name}.sqlite")
    services = Services(store, SystemClock(), RandomIds(), 60_000, semantic=engine)
    started = time.perf_counter()
    for project, facts in labelled.facts.items():
        _write_project(services, project, facts)
    note(f"{name}: wrote the facts in {time.perf_counter() - started:.1f}s")
    indexer = SemanticIndexer(store, embedder, IndexerSettings(duty=1.0))
    started, started_cpu = time.perf_counter(), time.process_time()
    indexer.run_until_idle()
    index_s = time.perf_counter() - started
    throughput = indexer.stats.facts / index_s
    per_cpu_s = indexer.stats.facts / max(time.process_time() - started_cpu, 1e-9)
    note(f"{name}: indexed {indexer.stats.facts} facts in {index_s:.1f}s ({throughput:.0f}/s)")
    dev = [q for q in labelled.queries if q.dev]
    held_out = [q for q in labelled.queries if not q.dev]
    lists = _candidates(store, engine, dev)
    weight, grid = _tune(lists, dev)
    floor, floor_grid = _tune_floor(lists, dev, weight)
    note(f"{name}: dev-tuned lexical weight {weight}, similarity floor {floor}")
    searches = replace(services.searches, lexical_weight=weight, semantic_floor=0.0)
    without_floor = _run_mode(searches, held_out, "hybrid")
    searches = replace(searches, semantic_floor=floor)
    return Evaluation(
        store, services, searches, engine, indexer, throughput, per_cpu_s, weight, grid, floor,
        floor_grid,
        _run_mode(searches, held_out, "lexical"), _run_mode(searches, held_out, "semantic"),
        _run_mode(searches, held_out, "hybrid"), without_floor,
    )  # fmt: skip


def _large_latency(
    ev: Evaluation, labelled: LabelledSet, args: argparse.Namespace
) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """Hybrid and lexical latency on one project of `--large` facts written as commands and
    indexed by the indexer with the model; the query texts, for the scale part."""
    rng = random.Random(args.seed + 1)
    pool = [text for facts in labelled.facts.values() for _, text in facts]
    large = [(f"l-{i:06d}", f"{rng.choice(pool)} #{i}") for i in range(args.large)]
    _write_project(ev.services, "large", large)
    started = time.perf_counter()
    ev.indexer.run_until_idle()
    note(f"indexed the large project in {time.perf_counter() - started:.1f}s")
    texts = [q.text for q in rng.sample(labelled.queries, args.latency_queries + 5)]
    _timed(ev.searches, "large", texts[-5:], "hybrid")  # load the project's matrix
    texts = texts[: args.latency_queries]
    hybrid_ms = _timed(ev.searches, "large", texts, "hybrid")
    lexical_ms = _timed(ev.searches, "large", texts, "lexical")
    return hybrid_ms, lexical_ms, texts


def _candidate(labelled: LabelledSet, minilm: Evaluation) -> dict[str, Any]:
    """wordllama over the same set, beside the bundled model (or why it did not run)."""
    model, version = load_wordllama()
    if model is None:
        return {"skipped": version}
    with tempfile.TemporaryDirectory() as tmp:
        ev = evaluate(model, labelled, tmp, "wordllama")
        ev.store.close()
    return {
        "package": f"wordllama {version}",
        "dense": ev.dense,
        "hybrid": ev.hybrid,
        "lexical_weight": ev.weight,
        "semantic_floor": ev.floor,
        "indexer_facts_per_s_one_core": round(ev.throughput, 1),
        "hybrid_recall@10_minus_minilm_hybrid": round(
            ev.hybrid["recall@10"] - minilm.hybrid["recall@10"], 4
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--noise", type=int, default=620, help="noise notes per project")
    parser.add_argument("--cjk-share", type=float, default=0.15)
    parser.add_argument("--large", type=int, default=10_000, help="facts of the latency project")
    parser.add_argument("--latency-queries", type=int, default=200)
    parser.add_argument("--huge", type=int, default=100_000, help="facts of the scale project")
    parser.add_argument("--huge-stores", default="sqlite,postgres", help="stores of the scale part")
    parser.add_argument("--no-candidates", action="store_true", help="skip wordllama")
    args = parser.parse_args()

    labelled = build_set(args.seed, args.noise, args.cjk_share)
    n_facts = sum(len(f) for f in labelled.facts.values())
    note(f"{n_facts} facts, {len(labelled.queries)} queries")
    embedder = load_embedder(threads=1)
    with tempfile.TemporaryDirectory() as tmp:
        ev = evaluate(embedder, labelled, tmp, "minilm")
        hybrid_ms, lexical_ms, texts = _large_latency(ev, labelled, args)
        index_bytes = ev.engine.memory_bytes()
        ev.store.close()
    lexical, dense, hybrid, weight, grid = ev.lexical, ev.dense, ev.hybrid, ev.weight, ev.grid
    throughput = ev.throughput
    held_out = [q for q in labelled.queries if not q.dev]
    dev = [q for q in labelled.queries if q.dev]
    candidate = {"skipped": "--no-candidates"} if args.no_candidates else _candidate(labelled, ev)
    pool = [text for facts in labelled.facts.values() for _, text in facts]
    stores = [s for s in args.huge_stores.split(",") if s] if args.huge else []
    scale = run_scale(stores, embedder, TENANT, ACTOR, pool, args.huge, texts, _timed)

    figures = {
        "facts": n_facts,
        "queries": len(labelled.queries),
        "held_out_queries": len(held_out),
        "dev_queries": len(dev),
        "hybrid": hybrid,
        "lexical_weight": weight,
        "dev_recall@10_by_weight": grid,
        "semantic_floor": ev.floor,
        "dev_recall@10_mrr_by_floor": ev.floor_grid,
        "hybrid_without_floor": ev.hybrid_without_floor,
        **hybrid_ms,
        "indexer_facts_per_s_one_core": round(throughput, 1),
        "indexer_facts_per_cpu_s": round(ev.per_cpu_s, 1),
        "large_project_facts": args.large,
        "index_memory_bytes_per_fact": round(index_bytes / (n_facts + args.large), 1),
        "scale": {k: v for k, v in scale.items() if "lexical" not in k},
        "wordllama": candidate,
        "peak_rss_mib": peak_rss_mib(),
        "noisy_machine": "2 shared cores; latency and throughput are noisy",
    }
    baseline = {
        "lexical": lexical,
        "dense": dense,
        **lexical_ms,
        "scale": {k: v for k, v in scale.items() if "lexical" in k},
    }
    targets = {
        "hybrid_recall10_minus_lexical": target(
            hybrid["recall@10"] - lexical["recall@10"], ">= 0.10"
        ),
        "hybrid_recall10_minus_dense": target(hybrid["recall@10"] - dense["recall@10"], ">= 0.05"),
        "hybrid_p95_ms_at_10k": target(hybrid_ms["hybrid_p95_ms"], "<= 40"),
        "indexer_facts_per_s_per_core": target(throughput, ">= 50"),
        "index_bytes_per_fact": target(index_bytes / (n_facts + args.large), "<= 2048"),
        **{
            f"hybrid_p95_ms_at_{k.removesuffix('_hybrid_p95_ms')}": target(v, "<= 80")
            for k, v in scale.items()
            if k.endswith("_hybrid_p95_ms")
        },
        # the same on the process's CPU clock, which the machine's other work moves far less
        "hybrid_cpu_p95_ms_at_10k": target(hybrid_ms["hybrid_cpu_p95_ms"], "<= 40"),
        **{
            f"hybrid_cpu_p95_ms_at_{k.removesuffix('_hybrid_cpu_p95_ms')}": target(v, "<= 80")
            for k, v in scale.items()
            if k.endswith("_hybrid_cpu_p95_ms")
        },
        "indexer_facts_per_cpu_s": target(ev.per_cpu_s, ">= 50"),
        "floor_keeps_held_out_recall10": target(
            hybrid["recall@10"] - ev.hybrid_without_floor["recall@10"], ">= 0"
        ),
    }
    emit("bench_retrieval", figures, baseline, targets)


if __name__ == "__main__":
    main()
