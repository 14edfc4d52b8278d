"""The semantic sidecar and semantic/hybrid recall with the real bundled model (MEM-22, MEM-23):
sidecar build, hybrid fusion, fallback, staleness, clear, scope isolation, and model files that
are symlinked or tampered with refused."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aidememo.agent_memory import AgentMemory, semantic, semantic_model, sidecar
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.model import Memory, RecallResult
from aidememo.cli.main import main
from aidememo.cli.memory.vectors import BUNDLED, OnnxRuntime

DOCS = {
    "uv": ("Use uv instead of pip when installing Python packages.", ["python"]),
    "backup": ("The staging database is backed up every night at two.", ["ops"]),
    "tabs": ("Prefer tabs over spaces in Go source files.", []),
    "deploy": ("Releases go to production only on Tuesday mornings.", ["release"]),
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One provisioned copy of the bundled model for the module (a 23 MB copy)."""
    path = str(tmp_path_factory.mktemp("model") / "minilm")
    done = semantic.provision(path, OnnxRuntime(), yes=True)
    assert done["provisioned"] is True
    return path


@pytest.fixture
def filled(store: AgentMemory, model_dir: str) -> Iterator[tuple[AgentMemory, dict[str, Memory]]]:
    made = {k: store.remember(c, kind="note", tags=t) for k, (c, t) in DOCS.items()}
    store.semantic = semantic.SemanticRecall(OnnxRuntime(), model_dir)
    yield store, made


def _refused(call: Callable[[], object]) -> C:
    with pytest.raises(AgentMemoryError) as caught:
        call()
    return caught.value.code


def test_mem22_bundled_descriptor_matches_the_pins() -> None:
    from aidememo.embedding import bundled

    assert (BUNDLED.provider_id, BUNDLED.model, BUNDLED.revision) == (
        bundled.PROVIDER,
        bundled.MODEL,
        bundled.REVISION,
    )


def test_mem22_sidecar_build_has_nuzos_tables_and_is_private(
    filled: tuple[AgentMemory, dict[str, Memory]], model_dir: str
) -> None:
    store, made = filled
    built = semantic.rebuild(store, OnnxRuntime(), model_dir)
    path = sidecar.sidecar_path(store.db.path)
    assert built == {
        "path": path,
        "providerFingerprint": BUNDLED.fingerprint(),
        "indexedMemories": 4,
    }
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    meta = conn.execute(
        "SELECT schema_version, provider_id, model, dimensions, network, indexed_memories"
        " FROM semantic_metadata"
    ).fetchone()
    assert meta == (1, "bundled", "all-MiniLM-L6-v2-int8", 384, "none", 4)
    rows = conn.execute("SELECT memory_id, revision, scope, length(vector) FROM semantic_vectors")
    assert sorted(rows) == sorted((m.id, 1, "project:demo", 384 * 4) for m in made.values())
    conn.close()
    leftovers = [p for p in os.listdir(os.path.dirname(path)) if ".rebuild-" in p]
    assert leftovers == []
    report = semantic.status(store, OnnxRuntime(), model_dir)
    assert (report["model"]["state"], report["index"]["state"]) == ("ready", "ready")


def test_mem23_semantic_recall_finds_a_paraphrase_fts_misses(
    filled: tuple[AgentMemory, dict[str, Memory]], model_dir: str
) -> None:
    store, made = filled
    semantic.rebuild(store, OnnxRuntime(), model_dir)
    query = "when is the pre-production db snapshotted"
    assert [r.memory.id for r in store.recall(query)][:1] != [made["backup"].id]
    found = store.recall(query, retrieval_mode="semantic", limit=1)
    assert [r.memory.id for r in found] == [made["backup"].id]
    assert found[0].reason.startswith("Semantic cosine similarity: 0.")
    hybrid = store.recall_detailed(
        "how do I add dependencies to a python project", retrieval_mode="hybrid"
    )
    assert hybrid["results"][0].memory.id == made["uv"].id
    assert hybrid["results"][0].reason == "Hybrid reciprocal-rank fusion: fts+semantic."
    assert hybrid["diagnostics"] == {
        "requestedMode": "hybrid",
        "effectiveMode": "hybrid",
        "semanticFallbackCode": None,
    }
    assert hybrid["results"][0].to_camel()["retrievalMode"] == "hybrid"


def test_mem23_hybrid_fusion_is_reciprocal_rank(store: AgentMemory) -> None:
    a, b, c = (store.remember(t, kind="note") for t in ("alpha", "beta", "gamma"))
    fts = [RecallResult(a, 9.0, "x"), RecallResult(b, 8.0, "y")]
    fused = semantic.fuse(fts, [RecallResult(b, 0.9, "s"), RecallResult(c, 0.5, "s")], 8)
    assert [r.memory.id for r in fused] == [b.id, a.id, c.id]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[0].reason == "Hybrid reciprocal-rank fusion: fts+semantic."
    assert semantic.fuse(fts, [], 1)[0].reason == "Hybrid reciprocal-rank fusion: fts."
    # Equal fused scores: the semantic list's first wins; Nuzo's settings order them by id.
    tied = [RecallResult(c, 0.9, "s")]
    assert semantic.fuse(fts[:1], tied, 2)[0].memory.id == c.id
    nuzo = semantic.Settings(floor=0.34, fusion_limit=1, ties_to_semantic=False)
    assert [r.memory.id for r in semantic.fuse(fts[:1], tied, 2, nuzo)] == sorted([a.id, c.id])


def test_mem22_canonical_writes_never_embed_and_leave_the_sidecar_stale(
    filled: tuple[AgentMemory, dict[str, Memory]], model_dir: str
) -> None:
    store, made = filled
    semantic.rebuild(store, OnnxRuntime(), model_dir)
    store.semantic = None  # no model runtime at all: writes still work
    store.update(made["tabs"].id, content="Prefer gofmt's tabs in Go source files.")
    store.remember("A new memory.", kind="note")
    report = semantic.status(store, OnnxRuntime(), model_dir)["index"]
    assert (report["state"], report["staleMemories"], report["missingMemories"]) == (
        "stale",
        1,
        1,
    )
    store.semantic = semantic.SemanticRecall(OnnxRuntime(), model_dir)
    assert _refused(lambda: store.recall("go", retrieval_mode="semantic")) is C.SEMANTIC_INDEX_STALE
    fallback = store.recall_detailed("gofmt tabs", retrieval_mode="hybrid")
    assert fallback["diagnostics"]["semanticFallbackCode"] == "SEMANTIC_INDEX_STALE"
    assert fallback["results"][0].reason.endswith("; Semantic fallback: SEMANTIC_INDEX_STALE.")
    strict = store.recall_detailed("gofmt tabs", retrieval_mode="semantic", semantic_fallback="fts")
    assert strict["diagnostics"]["effectiveMode"] == "fts"
    assert [r.memory.id for r in strict["results"]] == [made["tabs"].id]


def test_mem22_clear_disables_semantic_recall_safely(
    filled: tuple[AgentMemory, dict[str, Memory]], model_dir: str
) -> None:
    store, _ = filled
    semantic.rebuild(store, OnnxRuntime(), model_dir)
    assert semantic.clear(store.db.path, yes=True) is True
    assert _refused(lambda: store.recall("db", retrieval_mode="semantic")) is (
        C.SEMANTIC_INDEX_MISSING
    )
    assert store.recall("staging database")  # FTS is untouched
    assert semantic.clear(store.db.path, yes=True) is False
    assert _refused(lambda: semantic.clear(store.db.path, yes=False)) is (
        C.SEMANTIC_CLEAR_CONFIRMATION_REQUIRED
    )


def test_mem23_semantic_recall_stays_in_its_scopes(
    filled: tuple[AgentMemory, dict[str, Memory]], model_dir: str
) -> None:
    store, made = filled
    other = store.remember(
        "Install Python libraries with uv, never pip.", kind="note", scope="project:other"
    )
    semantic.rebuild(store, OnnxRuntime(), model_dir)
    found = store.recall("python package installer", retrieval_mode="semantic", limit=8)
    assert other.id not in {r.memory.id for r in found}
    assert made["uv"].id in {r.memory.id for r in found}
    # A change in another scope does not make this scope's vectors stale.
    store.remember("Another project's note.", kind="note", scope="project:other")
    assert store.recall("python package installer", retrieval_mode="semantic", limit=1)
    assert (
        _refused(
            lambda: store.recall(
                "python installer", scope="project:other", retrieval_mode="semantic"
            )
        )
        is C.SEMANTIC_INDEX_STALE
    )


def test_mem22_foreign_or_broken_sidecars_are_refused(
    filled: tuple[AgentMemory, dict[str, Memory]], model_dir: str
) -> None:
    store, _ = filled
    path = sidecar.sidecar_path(store.db.path)
    nuzo = sidecar.Descriptor(
        "transformers-local", "onnx-community/all-MiniLM-L6-v2-ONNX", "q4", 384
    )
    active = store.db.conn.execute(
        "SELECT id, revision, scope, content FROM memories WHERE archived_at IS NULL"
    ).fetchall()
    sidecar.rebuild(
        path, nuzo, [(*row[:3], row[3]) for row in active], lambda t: [b"\0" * 1536] * len(t), "x"
    )
    assert semantic.status(store, OnnxRuntime(), model_dir)["index"]["state"] == "incompatible"
    assert _refused(lambda: store.recall("x", retrieval_mode="semantic")) is (
        C.SEMANTIC_INDEX_INCOMPATIBLE
    )
    Path(path).write_bytes(b"not sqlite")
    assert semantic.status(store, OnnxRuntime(), model_dir)["index"]["state"] == "error"


def test_mem22_a_failed_rebuild_keeps_the_previous_index(
    filled: tuple[AgentMemory, dict[str, Memory]], model_dir: str
) -> None:
    store, _ = filled
    semantic.rebuild(store, OnnxRuntime(), model_dir)
    path = sidecar.sidecar_path(store.db.path)
    before = Path(path).read_bytes()

    def broken(texts: list[str]) -> list[bytes]:
        raise AgentMemoryError(C.SEMANTIC_PROVIDER_FAILED, "boom")

    rows = [("mem_x", 1, "project:demo", "doc")]
    assert _refused(lambda: sidecar.rebuild(path, BUNDLED, rows, broken, "x")) is (
        C.SEMANTIC_PROVIDER_FAILED
    )
    assert Path(path).read_bytes() == before
    assert [p for p in os.listdir(os.path.dirname(path)) if ".rebuild-" in p] == []


def _copy_model(model_dir: str, target: Path) -> Path:
    shutil.copytree(model_dir, target)
    return target


def test_mem22_symlinked_or_tampered_model_files_are_refused(
    filled: tuple[AgentMemory, dict[str, Memory]], model_dir: str, tmp_path: Path
) -> None:
    store, _ = filled
    copy = _copy_model(model_dir, tmp_path / "copy")
    semantic.rebuild(store, OnnxRuntime(), str(copy))
    onnx = copy / semantic_model.BUNDLED_DIR / "model.onnx"
    moved = tmp_path / "elsewhere.onnx"
    onnx.rename(moved)
    onnx.symlink_to(moved)
    assert semantic_model.inspect(str(copy))[0]["state"] == "invalid"
    assert _refused(lambda: semantic.rebuild(store, OnnxRuntime(), str(copy))) is (
        C.SEMANTIC_MODEL_INVALID
    )
    onnx.unlink()
    shutil.copyfile(moved, onnx)
    with onnx.open("ab") as handle:
        handle.write(b"\0")
    assert _refused(lambda: semantic.rebuild(store, OnnxRuntime(), str(copy))) is (
        C.SEMANTIC_MODEL_CHECKSUM_FAILED
    )
    store.semantic = semantic.SemanticRecall(OnnxRuntime(), str(copy))
    answer = store.recall_detailed("db", retrieval_mode="hybrid")
    assert answer["diagnostics"]["semanticFallbackCode"] == "SEMANTIC_MODEL_CHECKSUM_FAILED"
    assert _refused(lambda: semantic_model.verified(str(tmp_path / "none"))) is (
        C.SEMANTIC_MODEL_MISSING
    )


def test_mem22_provision_records_an_operators_onnx_directory(
    model_dir: str, tmp_path: Path
) -> None:
    own = tmp_path / "own-model"
    own.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copyfile(os.path.join(model_dir, semantic_model.BUNDLED_DIR, name), own / name)
    done = semantic.provision(str(own), OnnxRuntime(), yes=True)
    assert (done["provisioned"], done["files"]) == (True, 2)
    manifest = json.loads((own / semantic_model.MANIFEST).read_text())
    assert manifest["provider"] == "onnx-dir" and manifest["dimensions"] == 384
    assert semantic.provision(str(own), OnnxRuntime(), yes=True)["provisioned"] is False
    assert _refused(lambda: semantic.provision(str(own), OnnxRuntime(), yes=False)) is (
        C.SEMANTIC_PROVISION_CONFIRMATION_REQUIRED
    )


def test_mem22_cli_provision_rebuild_and_recall_by_meaning(
    store_path: Path, model_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["memory", "--store", str(store_path), "--scope", "project:demo"]
    assert main([*base, "remember", DOCS["uv"][0], "--kind", "instruction"]) == 0
    memory_id = capsys.readouterr().out.strip()
    assert main([*base, "semantic", "rebuild", "--model-path", model_dir]) == 0
    assert capsys.readouterr().out.splitlines()[::2] == [
        "Semantic index rebuilt",
        "Indexed memories: 1",
    ]
    query = "what tool adds python libraries"
    assert main([*base, "recall", query, "--mode", "hybrid", "--model-path", model_dir]) == 0
    assert capsys.readouterr().out.startswith(f"{memory_id}\t0.03279\t")
    assert (
        main([*base, "recall", query, "--mode", "semantic", "--json", "--model-path", model_dir])
        == 0
    )
    answer = json.loads(capsys.readouterr().out)
    assert answer["results"][0]["retrievalMode"] == "semantic"
    assert main([*base, "integrity", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["semantic_index"]["state"] == "ready"
    main([*base, "doctor", "--json"])
    assert json.loads(capsys.readouterr().out)["semantic_index"]["indexedMemories"] == 1
    main([*base, "doctor"])
    assert "Semantic index: ready (1/1 indexed, 0 stale, 0 missing)" in capsys.readouterr().out
    assert main([*base, "semantic", "status", "--model-path", model_dir]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        f"Index: ready ({store_path.with_name('memories.semantic.sqlite')})",
        "Indexed: 1/1",
    ]


def test_mem23_mcp_recall_takes_the_retrieval_mode(store_path: Path, model_dir: str) -> None:
    from aidememo.cli.mcp.memory import provider

    tools = provider(str(store_path))
    try:
        assert tools.provider.store.semantic is not None
        tools.provider.store.semantic = semantic.SemanticRecall(OnnxRuntime(), model_dir)
        scope = tools.provider.store.scope
        tools.call("memory.remember", {"content": DOCS["backup"][0], "kind": "fact"})
        missing, _ = tools.call("memory.recall", {"query": "db", "retrieval_mode": "hybrid"})
        assert missing["retrieval"]["semantic_fallback_code"] == "SEMANTIC_INDEX_MISSING"
        semantic.rebuild(tools.provider.store, OnnxRuntime(), model_dir)
        answer, failed = tools.call(
            "memory.recall",
            {"query": "when is the pre-production db snapshotted", "retrieval_mode": "semantic"},
        )
        assert not failed
        assert answer["retrieval"] == {
            "requested_mode": "semantic",
            "effective_mode": "semantic",
            "semantic_fallback_code": None,
        }
        assert answer["results"][0]["scope"] == scope
    finally:
        tools.close()


def test_mem22_export_and_backup_leave_the_sidecar_out(
    filled: tuple[AgentMemory, dict[str, Memory]], model_dir: str, tmp_path: Path
) -> None:
    from aidememo.agent_memory.backup import backup_store

    store, _ = filled
    semantic.rebuild(store, OnnxRuntime(), model_dir)
    document = store.export()
    assert "vector" not in json.dumps(document) and "semantic" not in json.dumps(document)
    copy = tmp_path / "backup" / "memories.sqlite"
    copy.parent.mkdir()
    backup_store(store.db.path, str(copy))
    assert sorted(p.name for p in copy.parent.iterdir()) == ["memories.sqlite"]
    with AgentMemory.open(str(copy)) as restored:
        status = semantic.status(restored, OnnxRuntime(), model_dir)
    assert status["index"]["state"] == "missing"
