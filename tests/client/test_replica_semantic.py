"""Replica search by meaning (SEM-9): the replica's facts embedded locally by the bundled
model, the vectors cached in the replica file by fingerprint and sequence, the answer at the
replica's cursor, on every backend the replica is filled from; and lexical without a model."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from aidememo.client import Client
from aidememo.client.replica import Replica, ReplicaError, pull
from aidememo.client.replica_semantic import refresh_vectors
from aidememo.embedding import installed_embedder, load_embedder
from aidememo.embedding.bundled import MODEL, bundled_files
from aidememo.embedding.onnx_model import OnnxEmbedder
from aidememo.ports import Embedder
from tests.client.transports import Faulty
from tests.contract.support import WRITER, Api

Connect = Callable[..., tuple[Client, Faulty]]

MEANING = {
    "f_pool": "the connection pool holds 2 connections; raise it to 20 before the launch",
    "f_lunch": "the team lunch moved to Thursday at noon in the small room",
    "f_tokens": "buttons take the primary colour token of the design system",
}
ASKED = "why is the database saturated?"


@pytest.fixture(scope="module")
def model() -> Embedder:
    return load_embedder(threads=1)


def _filled(connect: Connect, path: Path) -> tuple[Client, Replica]:
    writer, _ = connect(WRITER)
    sid = writer.create_session("replica meaning").id
    for fid, text in MEANING.items():
        writer.create_fact(sid, text, fact_id=fid)
    replica = Replica(path)
    pull(writer, replica)
    return writer, replica


def _fingerprints(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {row[0] for row in conn.execute("SELECT fingerprint FROM vectors")}
    finally:
        conn.close()


def test_sem9_replica_searches_by_meaning_at_its_cursor_and_caches_the_vectors(
    api: Api, connect: Connect, tmp_path: Path, model: Embedder
) -> None:
    writer, replica = _filled(connect, tmp_path / "r.sqlite")
    with replica:
        found = replica.search(ASKED, mode="semantic", embedder=lambda: model)
        assert found["mode"] == "semantic" and found["fallback_reason"] is None
        assert found["index_seq"] == replica.cursor() == api.head()
        assert found["semantic_model"] == model.fingerprint.as_json()
        assert found["semantic_lag"] == 0 and found["embedded"] == 3
        assert found["results"][0]["fact_id"] == "f_pool"
        assert found["results"][0]["lexical_rank"] is None
        # Cached: the next search embeds nothing; a pulled fact is embedded on its own.
        assert replica.search(ASKED, mode="semantic", embedder=lambda: model)["embedded"] == 0
        writer.create_fact(
            writer.create_session("later").id, "postgres refuses clients: too many", fact_id="f_pg"
        )
        pull(writer, replica)
        hybrid = replica.search("postgres clients saturated", mode="hybrid", embedder=lambda: model)
        assert hybrid["mode"] == "hybrid" and hybrid["embedded"] == 1
        assert hybrid["index_seq"] == replica.cursor()
        top = hybrid["results"][0]
        assert top["fact_id"] == "f_pg" and top["lexical_rank"] == top["semantic_rank"] == 1
        # auto is hybrid with the model; the source filter holds in both lists.
        assert replica.search(ASKED, mode="auto", embedder=lambda: model)["mode"] == "hybrid"
        assert (
            replica.search(ASKED, "elsewhere", mode="auto", embedder=lambda: model)["results"] == []
        )
    assert _fingerprints(replica.path) == {model.fingerprint.text()}


def test_sem9_without_the_model_auto_is_lexical_and_semantic_is_refused(
    api: Api, connect: Connect, tmp_path: Path
) -> None:
    _, replica = _filled(connect, tmp_path / "r.sqlite")
    with replica:
        found = replica.search("connection pool", mode="auto", embedder=lambda: None)
        assert found["mode"] == "lexical"
        assert found["fallback_reason"] == "semantic_unavailable"
        assert found["semantic_model"] is None and found["semantic_lag"] is None
        assert [r["fact_id"] for r in found["results"]] == ["f_pool"]
        for mode in ("semantic", "hybrid"):
            with pytest.raises(ReplicaError, match="semantic_unavailable"):
                replica.search(ASKED, mode=mode, embedder=lambda: None)
        # lexical never asks for the model
        asked: list[bool] = []
        replica.search("pool", mode="lexical", embedder=lambda: asked.append(True))
        assert asked == []


def test_sem9_sem2_cache_follows_rows_and_never_mixes_fingerprints(
    tmp_path: Path, model: Embedder
) -> None:
    """A fact whose row moved (a newer sequence) is embedded again, a fact no longer held
    loses its vector, and another model's fingerprint replaces every vector."""
    conn = sqlite3.connect(tmp_path / "v.sqlite", isolation_level=None)
    facts = [(5, "f1", "s", "the pool is exhausted"), (6, "f2", "s", "lunch on Thursday")]
    vectors, made = refresh_vectors(conn, model, facts)
    assert made == 2 and vectors["f1"] == model.embed(["the pool is exhausted"])[0]
    moved = [(9, "f1", "s", "the pool has 20 connections now")]
    vectors, made = refresh_vectors(conn, model, moved)
    assert made == 1 and set(vectors) == {"f1"}
    assert vectors["f1"] == model.embed(["the pool has 20 connections now"])[0]
    assert conn.execute("SELECT fact_id, seq FROM vectors").fetchall() == [("f1", 9)]
    weights, tokenizer = bundled_files()
    other = OnnxEmbedder(weights, tokenizer, provider="onnx-dir", name=MODEL, revision="other")
    assert other.fingerprint != model.fingerprint
    _, made = refresh_vectors(conn, other, moved)
    assert made == 1
    assert conn.execute("SELECT DISTINCT fingerprint FROM vectors").fetchall() == [
        (other.fingerprint.text(),)
    ]
    conn.close()


def test_sem9_installed_embedder_is_the_bundled_model() -> None:
    found = installed_embedder()
    assert found is not None and found.fingerprint.provider == "bundled"
