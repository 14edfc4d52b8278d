"""The SQLite store's FTS5 index (schema 7, SPEC.md SRCH-4): its rows follow the facts.

A fact's FTS5 row holds one token per distinct indexable term carrying its count; the Python
writer (`search.token_text`) and the migration's SQL (`search_schema.tokens_of`) build the same
tokens; replacing a fact leaves no token of its old text; deleting a tenant leaves none of its
rows; each project gets a key of its own.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from aidememo.domain.model import History, Project, Scope, SearchDoc
from aidememo.domain.tokenize import index_terms
from aidememo.stores.sqlite import SqliteStore
from aidememo.stores.sqlite.search import token_text
from aidememo.stores.sqlite.search_schema import tokens_of
from tests.stores._support import KINDS, PROJECT, SCOPE, TENANT, open_store

LONG = "y" * 1100  # over MAX_TERM_BYTES: counted in the length, never a token
DOCS = [
    SearchDoc("f1", "s1", index_terms("cache cache cache redis timeout")),
    SearchDoc("f2", "s2", index_terms(f"서버 배포 {LONG} redis")),
    SearchDoc("f3", "s1", index_terms("...")),  # no terms
    SearchDoc("f4", "s2", index_terms("a a b b b c")),
]


def _restore(store: SqliteStore, project: Project, docs: list[SearchDoc]) -> None:
    history = History([], [], [], [], [], docs)
    store.transaction(lambda tx: tx.restore_history(project, history))


def _hits(store: SqliteStore, scope: Scope, terms: list[str]) -> list[str]:
    page = store.read(lambda tx: tx.search(scope, terms, None, 10))
    return [hit.fact_id for hit in page.hits]


def _vocabulary(store: SqliteStore) -> dict[str, int]:
    rows = store.executor.read(
        lambda: store.executor.execute("SELECT term, doc FROM fact_search_vocab")
    )
    return {str(term): int(n) for term, n in rows}  # type: ignore[call-overload]


def test_srch4_token_text_and_the_migration_build_the_same_tokens(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.sqlite")
    conn.execute("CREATE TABLE fact_search (tenant_id, project_id, fact_id, doc_seq, terms)")
    conn.execute("CREATE TABLE fact_search_stats (tenant_id, project_id, fts_key)")
    conn.execute("INSERT INTO fact_search_stats VALUES ('t', 'p', 7)")
    for seq, doc in enumerate(DOCS, start=1):
        conn.execute(
            "INSERT INTO fact_search VALUES ('t', 'p', ?, ?, ?)", (doc.fact_id, seq, doc.terms)
        )
    built = {
        int(rowid) & 0xFFFFFFFF: set(str(text).split())
        for rowid, text in conn.execute(tokens_of("true"))
    }
    conn.close()
    expected = {
        seq: set(token_text(7, doc.terms.split()).split())
        for seq, doc in enumerate(DOCS, start=1)
        if token_text(7, doc.terms.split())
    }
    assert built == expected
    assert expected[4] == {"k7\u00b7a\u00b72", "k7\u00b7b\u00b73", "k7\u00b7c\u00b71"}
    assert all(LONG not in token for token in expected[2])


@pytest.mark.parametrize("kind", KINDS)
def test_srch4_replacing_a_fact_leaves_no_token_of_its_old_text(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:
        project = Project(TENANT, PROJECT, "epoch_e", 0)
        _restore(store, project, DOCS)
        assert _hits(store, SCOPE, ["cache"]) == ["f1"]
        _restore(store, project, [SearchDoc("f1", "s1", index_terms("zebra zebra"))])
        assert _hits(store, SCOPE, ["cache"]) == []
        assert _hits(store, SCOPE, ["zebra"]) == ["f1"]
        vocabulary = _vocabulary(store)
        assert not any("\u00b7cache\u00b7" in token for token in vocabulary)
        assert vocabulary["k1\u00b7zebra\u00b72"] == 1
        assert vocabulary["k1\u00b7redis\u00b71"] == 1  # f2 only now
        docs = store.executor.read(
            lambda: store.executor.execute("SELECT count(*) FROM fact_search_docs")
        )
        assert docs[0][0] == len(DOCS)


@pytest.mark.parametrize("kind", KINDS)
def test_srch4_arc4_deleting_a_tenant_deletes_its_index_rows(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:
        other = Project("tenant_o", PROJECT, "epoch_e", 0)

        def provision_other(tx: object) -> None:
            tx.insert_tenant(other.tenant_id, 1)  # type: ignore[attr-defined]
            tx.insert_project(other, 1)  # type: ignore[attr-defined]

        store.transaction(provision_other)
        _restore(store, Project(TENANT, PROJECT, "epoch_e", 0), DOCS)
        _restore(store, other, [SearchDoc("o1", "s1", index_terms("redis cache"))])
        before = _vocabulary(store)
        assert any(token.startswith("k1\u00b7") for token in before)
        assert any(token.startswith("k2\u00b7") for token in before)
        store.transaction(lambda tx: tx.delete_tenant(TENANT))
        after = _vocabulary(store)
        assert after and all(token.startswith("k2\u00b7") for token in after)
        assert _hits(store, Scope(other.tenant_id, PROJECT), ["redis"]) == ["o1"]
        rows = store.executor.read(
            lambda: store.executor.execute("SELECT fact_id FROM fact_search_docs")
        )
        assert [row[0] for row in rows] == ["o1"]
