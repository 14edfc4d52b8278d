"""bench_memory's semantic part: recall by meaning beside FTS on a labelled paraphrase set.

For each size the store holds bench_memory's synthetic notes and the 60 labelled memories of
scripts/data/memory_paraphrases.json (`size` in all); the sidecar is rebuilt with the bundled
model (one intra-op thread, so the rate is per core), then each labelled query is recalled in
`fts`, `semantic` and `hybrid` mode (limit 8, the process warm: the model loaded and the
sidecar's vectors read once), timing each call, query embedding included. Reported per mode:
top-1 (the labelled memory ranked first), recall@5, p50/p95 latency; and the rebuild rate.
`fusion_variants` scores other fusion settings on the same FTS and semantic lists (no timing):
what the fusion choice in SPEC.md MEM-23 was measured against.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aidememo.agent_memory import AgentMemory, semantic
from aidememo.agent_memory.model import RecallResult
from aidememo.cli.memory.vectors import OnnxRuntime

CASES = Path(__file__).with_name("data") / "memory_paraphrases.json"
LIMIT = 8
FLOORS = (0.34, 0.25, 0.2)
VARIANTS = {
    "nuzo_fuse1_ties_by_id": semantic.Settings(fusion_limit=1, ties_to_semantic=False),
    "fuse1_ties_to_semantic": semantic.Settings(fusion_limit=1, ties_to_semantic=True),
    "fuse3_ties_to_semantic": semantic.Settings(fusion_limit=3, ties_to_semantic=True),
    "fuse8_ties_by_id": semantic.Settings(fusion_limit=LIMIT, ties_to_semantic=False),
}


def cases() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(CASES.read_text(encoding="utf-8"))["cases"]
    return data


def _ms(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1e3, 2)


def _quality(ranked: list[list[str]], targets: list[str]) -> dict[str, float]:
    top1 = sum(1 for ids, t in zip(ranked, targets, strict=True) if ids[:1] == [t])
    at5 = sum(1 for ids, t in zip(ranked, targets, strict=True) if t in ids[:5])
    return {"top1": round(top1 / len(targets), 3), "recall_at_5": round(at5 / len(targets), 3)}


def run(
    sizes: list[int],
    filler: Callable[[int], list[dict[str, Any]]],
    fill: Callable[[AgentMemory, list[dict[str, Any]]], None],
    scope: str,
) -> dict[str, Any]:
    labelled = cases()
    runtime = OnnxRuntime(threads=1)
    out: dict[str, Any] = {"cases": len(labelled), "limit": LIMIT, "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="aidememo-bench-memory-semantic-") as tmp:
        model_dir = os.path.join(tmp, "model")
        semantic.provision(model_dir, runtime, yes=True)
        for size in sizes:
            path = os.path.join(tmp, f"store-{size}.sqlite")
            store = AgentMemory.open(path, scope=scope)
            fill(store, filler(size - len(labelled)))
            targets = [
                store.remember(c["memory"], kind="note", tags=c["tags"], actor="bench").id
                for c in labelled
            ]
            wall, cpu = time.perf_counter(), time.process_time()
            semantic.rebuild(store, runtime, model_dir)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            store.semantic = semantic.SemanticRecall(runtime, model_dir)
            store.recall("warm up", retrieval_mode="hybrid")  # loads the model and vectors
            row: dict[str, Any] = {
                "rebuild": {
                    "memories": size,
                    "s": round(wall, 1),
                    "per_s": round(size / wall, 1),
                    "per_cpu_s": round(size / max(cpu, 1e-9), 1),
                }
            }
            lists: dict[str, list[list[RecallResult]]] = {}
            for mode in ("fts", "semantic", "hybrid"):
                took, cpu_took, found = [], [], []
                for case in labelled:
                    cpu_start, start = time.thread_time(), time.perf_counter()
                    results = store.recall(case["query"], retrieval_mode=mode, limit=LIMIT)
                    took.append(time.perf_counter() - start)
                    cpu_took.append(time.thread_time() - cpu_start)
                    found.append(results)
                lists[mode] = found
                ranked = [[r.memory.id for r in results] for results in found]
                row[mode] = _quality(ranked, targets) | {
                    "overlapping_top1": _quality(ranked[40:], targets[40:])["top1"],
                    "p50_ms": _ms(took, 0.5),
                    "p95_ms": _ms(took, 0.95),
                    "cpu_p95_ms": _ms(cpu_took, 0.95),
                }
            # Every semantic candidate (no floor) once, then each setting's floor and fusion.
            raw = semantic.SemanticRecall(runtime, model_dir, semantic.Settings(floor=-1.0))
            unfloored = [raw.search(store, c["query"], [scope], LIMIT) for c in labelled]
            variants: dict[str, Any] = {}
            for floor in FLOORS:
                for name, settings in VARIANTS.items():
                    chosen = dataclasses.replace(settings, floor=floor)
                    ranked = [
                        [
                            r.memory.id
                            for r in semantic.fuse(
                                f, [x for x in u if x.score >= floor], LIMIT, chosen
                            )
                        ]
                        for f, u in zip(lists["fts"], unfloored, strict=True)
                    ]
                    variants[f"floor{floor}_{name}"] = _quality(ranked, targets)
                kept = [[r.memory.id for r in u if r.score >= floor] for u in unfloored]
                variants[f"floor{floor}_semantic_only"] = _quality(kept, targets)
            row["fusion_variants"] = variants
            row["hybrid_top1_gain_over_fts"] = round(row["hybrid"]["top1"] - row["fts"]["top1"], 3)
            out["sizes"][str(size)] = row
            store.close()
    out["targets"] = {
        "hybrid_top1_gain_over_fts": ">= 0.15",
        "hybrid_p95_ms_at_10000": "<= 30",
        "rebuild_per_s_per_core": ">= 50",
    }
    return out
