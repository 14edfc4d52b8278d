"""Recall ranking, scopes and usage recording (MEM-6)."""

from __future__ import annotations

import json

import pytest

from aidememo.agent_memory import AgentMemory, AgentMemoryError, MemoryErrorCode
from aidememo.agent_memory.mcp_tools import MemoryToolProvider
from aidememo.agent_memory.reads import semantic_index_path
from aidememo.agent_memory.recall import fts_query, tokenize


def test_mem6_query_terms_and_fts_query() -> None:
    assert tokenize("How should the npm release provenance be published?") == [
        "npm",
        "provenance",
        "published",
    ]
    assert fts_query('say "hi" to café_bar x') == '"say" OR "hi" OR "café_bar"'
    assert fts_query("a to the") == ""


def test_mem6_exact_tags_beat_common_prompt_words(store: AgentMemory) -> None:
    store.remember(
        "Current project marker uses a generic context path.", kind="fact", tags=["projecttopic"]
    )
    tagged = {
        store.remember(
            f"Bounded recall fixture {i} must respect the result limit.",
            kind="note",
            tags=["boundedtopic"],
        ).id
        for i in range(7)
    }
    results = store.recall(
        "List every boundedtopic fixture number available in the current context.", limit=5
    )
    assert len(results) == 5
    assert all(r.memory.id in tagged for r in results)
    assert all(r.reason.startswith("Matched tags: boundedtopic") for r in results)


def test_mem6_multi_term_noise_is_filtered_and_distinctive_terms_pass(store: AgentMemory) -> None:
    store.remember(
        "Cloudflare routing changes use the local reverse proxy workflow.",
        kind="project_decision",
        tags=["cloudflare", "routing", "workflow"],
    )
    store.remember(
        "Publish npm releases through trusted publishing with SLSA provenance.",
        kind="project_decision",
        tags=["npm", "release", "provenance"],
    )
    found = store.recall("How should the npm release provenance be published?", limit=5)
    assert [r.memory.tags[0] for r in found] == ["npm"]
    assert store.recall("Kubernetes ingress routing", limit=5) == []
    spans = store.remember(
        "Observability uses local spans for diagnostic traces.",
        kind="project_decision",
        tags=["diagnostics"],
    )
    assert [r.memory.id for r in store.recall("What observability guidance applies?")] == [spans.id]


def test_mem6_accented_and_cjk_terms_match(store: AgentMemory) -> None:
    accented = store.remember("A memória portátil deve continuar auditável.", kind="instruction")
    cjk = store.remember("東京 オフィス は 月曜日 休み", kind="note")
    assert store.recall("memória auditável")[0].memory.id == accented.id
    assert [r.memory.id for r in store.recall("月曜日")] == [cjk.id]


def test_mem6_archived_memories_are_not_recalled(store: AgentMemory) -> None:
    memory = store.remember("Rotate the staging certificates monthly.", kind="instruction")
    store.forget(memory.id)
    assert store.recall("staging certificates") == []


def test_mem6_usage_recording_is_opt_in_and_keeps_only_a_query_hash(store: AgentMemory) -> None:
    memory = store.remember(
        "The user prefers SQLite for local-first prototypes.",
        kind="preference",
        scope="user:default",
        tags=["sqlite"],
    )
    store.recall("SQLite prototypes", scope="user:default")
    assert [e.event_type for e in store.history(memory.id)] == ["memory.created"]
    assert store.get(memory.id).revision == 1
    [result] = store.recall("SQLite prototypes", scope="user:default", record_usage=True)
    events = store.history(memory.id)
    assert [e.event_type for e in events] == ["memory.created", "memory.recalled"]
    assert events[1].payload == {
        "queryHash": "f6276cec4eb85cc77bb6bd4e351860f5ec09bbda8e0bc33aedab589c36e14e7a",
        "queryHashAlgorithm": "sha256",
        "score": result.score,
        "scope": "user:default",
    }
    used = store.get(memory.id)
    assert used.revision == 2 and used.last_used_at is not None


def test_mem6_scopes_rank_together_and_each_result_names_its_scope(store: AgentMemory) -> None:
    project = store.remember("Deploy previews run on every pull request.", kind="fact")
    personal = store.remember(
        "Deploy previews are noisy, mute them.", kind="preference", scope="user:default"
    )
    team = store.remember(
        "Deploy previews need team sign off.", kind="instruction", scope="team:platform"
    )
    other = store.remember("Deploy previews elsewhere.", kind="fact", scope="project:other")
    assert {r.memory.id for r in store.recall("deploy previews")} == {project.id}
    both = store.recall("deploy previews", include_global=True)
    assert {r.memory.id for r in both} == {project.id, personal.id}
    every = store.recall("deploy previews", include_global=True, team_scope="team:platform")
    assert {r.memory.id: r.memory.scope for r in every} == {
        project.id: "project:demo",
        personal.id: "user:default",
        team.id: "team:platform",
    }
    assert other.id not in {r.memory.id for r in every}
    scores = [r.score for r in every]
    assert scores == sorted(scores, reverse=True)


def test_mem6_exact_ties_keep_the_index_order_whatever_the_scope(store: AgentMemory) -> None:
    text = "Identical wording about flaky retries."
    team = store.remember(text, kind="fact", scope="team:core")
    glob = store.remember(text, kind="fact", scope="user:default")
    mine = store.remember(text, kind="fact")
    order = store.recall("flaky retries", include_global=True, team_scope="team:core")
    assert [r.memory.id for r in order] == [team.id, glob.id, mine.id]
    assert len({r.score for r in order}) == 1


def test_mem6_mem13_semantic_retrieval_has_no_index(store: AgentMemory) -> None:
    store.remember("Semantic search is optional.", kind="note")
    with pytest.raises(AgentMemoryError) as caught:
        store.recall("semantic", retrieval_mode="semantic")
    assert caught.value.code == MemoryErrorCode.SEMANTIC_INDEX_MISSING
    # Nuzo names the sidecar a semantic index would live in, in full, as its MCP tools do.
    sidecar = store.db.path.removesuffix("memories.sqlite") + "memories.semantic.sqlite"
    assert caught.value.to_dict()["details"] == {"path": sidecar}
    refusal = MemoryToolProvider(store).call_result(
        "memory.recall", {"query": "semantic", "retrieval_mode": "semantic"}
    )
    assert refusal["isError"] is True
    assert json.loads(refusal["content"][0]["text"])["details"] == {"path": sidecar}
    assert semantic_index_path("/x/store.db") == "/x/store.db.semantic.sqlite"
    for mode, fallback in (("hybrid", None), ("semantic", "fts")):
        answer = store.recall_detailed("semantic", retrieval_mode=mode, semantic_fallback=fallback)
        assert len(answer["results"]) == 1
        assert answer["diagnostics"] == {
            "requestedMode": mode,
            "effectiveMode": "fts",
            "semanticFallbackCode": "SEMANTIC_INDEX_MISSING",
        }


def test_mem6_recall_bounds(store: AgentMemory) -> None:
    for query, limit, code in (
        ("  ", 8, MemoryErrorCode.RECALL_QUERY_EMPTY),
        ("x" * 2001, 8, MemoryErrorCode.RECALL_QUERY_TOO_LONG),
        ("ok", 51, MemoryErrorCode.RECALL_LIMIT_INVALID),
        ("ok", 0, MemoryErrorCode.RECALL_LIMIT_INVALID),
    ):
        with pytest.raises(AgentMemoryError) as caught:
            store.recall(query, limit=limit)
        assert caught.value.code == code
