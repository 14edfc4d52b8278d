"""`aidememo memory recall` (SPEC.md MEM-6, MEM-23, MEM-24): one store, Nuzo's rows and
`--json`; or, inside a project with a user store or with a team profile, the tiers in order,
each row adding its scope and tier."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TypedDict

from aidememo.agent_memory import paths
from aidememo.agent_memory.jstext import to_precision
from aidememo.agent_memory.model import GLOBAL_SCOPE
from aidememo.agent_memory.relations import relations_batch
from aidememo.agent_memory.render import inline, untrusted_json
from aidememo.agent_memory.store import AgentMemory


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def _runtime(ns: argparse.Namespace) -> paths.MemoryRuntime:
    return paths.resolve_runtime(store=ns.store, scope=ns.scope)


class _RecallOptions(TypedDict):
    limit: int | None
    include_global: bool | None
    retrieval_mode: str
    semantic_fallback: str | None
    record_usage: bool


def _options(ns: argparse.Namespace, runtime: paths.MemoryRuntime) -> _RecallOptions:
    """The recall options the flags and the runtime set, one store or tiered alike."""
    return {
        "limit": ns.limit,
        "include_global": ns.include_global,
        "retrieval_mode": ns.mode,
        "semantic_fallback": ns.semantic_fallback,
        "record_usage": runtime.record_recall_events,
    }


def _semantic(store: AgentMemory, ns: argparse.Namespace) -> None:
    if ns.mode != "fts":
        from aidememo.agent_memory.semantic import SemanticRecall
        from aidememo.cli.memory.vectors import OnnxRuntime

        store.semantic = SemanticRecall(OnnxRuntime(), ns.model_path)


def _tiers(ns: argparse.Namespace, runtime: paths.MemoryRuntime) -> tuple[Any, Any] | None:
    """The user store and team tier of a tiered recall (MEM-24), `None` for one store: the
    user tier when the store is the project's and the user store is another existing file,
    the team tier when a profile is named."""
    if ns.single_store:
        return None
    from aidememo.cli.memory.team import PROFILE_ENV, ProfileTeam

    team_name = ns.team_profile or os.environ.get(PROFILE_ENV) or None
    user_path = paths.user_store_path()
    project = paths.project_store_path(runtime.project_root)
    user = None
    if (
        os.path.realpath(runtime.store_path) == os.path.realpath(project)
        and os.path.realpath(user_path) != os.path.realpath(runtime.store_path)
        and os.path.isfile(user_path)
    ):
        user = AgentMemory.open(user_path, scope=GLOBAL_SCOPE)
        _semantic(user, ns)
    if user is None and team_name is None:
        return None
    return user, (ProfileTeam(team_name) if team_name else None)


def cmd_recall(ns: argparse.Namespace, store: AgentMemory) -> int:
    runtime = _runtime(ns)
    _semantic(store, ns)
    tiers = _tiers(ns, runtime)
    if tiers is not None:
        try:
            return _tiered(ns, store, runtime, *tiers)
        finally:
            if tiers[0] is not None:
                tiers[0].close()
    response = store.recall_detailed(ns.query, **_options(ns, runtime))
    results = response["results"]
    if ns.json:
        _out(
            untrusted_json(
                {"results": [r.to_camel() for r in results], "diagnostics": response["diagnostics"]}
            )
        )
        return 0
    from aidememo.agent_memory.render import relation_markers

    batch = relations_batch(store, [r.memory.id for r in results])
    for result in results:
        marker = relation_markers(batch.get(result.memory.id, []), result.memory.id)
        _out(
            f"{inline(result.memory.id)}\t{to_precision(result.score, 4)}{marker}\t"
            f"{inline(result.memory.content)}"
        )
    if response["diagnostics"]["semanticFallbackCode"] is not None:
        sys.stderr.write(f"Semantic fallback: {response['diagnostics']['semanticFallbackCode']}\n")
    return 0


def _tiered(
    ns: argparse.Namespace,
    store: AgentMemory,
    runtime: paths.MemoryRuntime,
    user: AgentMemory | None,
    team: Any,
) -> int:
    """Recall across tiers (MEM-24): Nuzo's row plus the scope and tier of each result."""
    from aidememo.agent_memory.tiers import TeamFact, tiered_recall

    answer = tiered_recall(ns.query, project=store, user=user, team=team, **_options(ns, runtime))
    if ns.json:
        _out(
            untrusted_json(
                {
                    "results": [r.to_camel() for r in answer.results],
                    "tiers": [t.to_json() for t in answer.tiers],
                    "diagnostics": answer.diagnostics,
                }
            )
        )
        return 0
    for result in answer.results:
        if isinstance(result, TeamFact):
            memory_id, score, content = result.fact_id, result.score, result.content
            where = f"scope={result.scope}\ttier=team"
        else:
            memory_id, score = result.memory.id, result.score
            content = result.memory.content
            where = f"scope={result.memory.scope}\ttier={result.tier}"
        _out(f"{inline(memory_id)}\t{to_precision(score, 4)}\t{inline(content)}\t{where}")
    for report in answer.tiers:
        if report.status == "skipped":
            sys.stderr.write(f"Tier {report.tier} skipped: {report.reason}\n")
    if answer.diagnostics["semanticFallbackCode"] is not None:
        sys.stderr.write(f"Semantic fallback: {answer.diagnostics['semanticFallbackCode']}\n")
    return 0
