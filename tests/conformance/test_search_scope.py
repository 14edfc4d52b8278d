"""Search stays inside its project on every store (SPEC.md SRCH-4, SRCH-5).

A project's scores and order must not move when another tenant fills the same tables with
20,000 facts holding the same terms, and must equal the reference store's bit for bit; a term
matching more facts than the window evaluates the newest ones and says so. The neighbour's
facts go in through the import path (`restore_history`, one transaction), which PostgreSQL
writes set-wise.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aidememo.domain.model import History, Project, Scope, SearchDoc, SearchPage
from aidememo.domain.ranking import SEARCH_WINDOW, window_for
from aidememo.domain.tokenize import index_terms, query_terms
from aidememo.ports import Store
from aidememo.stores.in_memory import InMemoryStore
from tests.conformance.conftest import BACKENDS, Backend

STORES = ("memory", "sqlite_file", "do_sql", "postgres_psycopg", "postgres_pg8000")
OWN = Project("tenant_own", "project_shared", "epoch_own", 0)
NOISE = Project("tenant_noise", "project_shared", "epoch_noise", 0)  # the same project id

CORPUS = [
    ("fact-01", "src-a", "redis cluster timeout decision for the cache layer"),
    ("fact-02", "src-a", "cache cache cache eviction policy"),
    ("fact-03", "src-b", "어제 서버 배포가 실패했습니다 redis 타임아웃"),
    ("fact-04", "src-b", "운영서버가다운됨 서버 재시작"),
    ("fact-05", "src-a", "我们的服务器昨天挂了, 服务恢复了"),
    ("fact-06", "src-b", "サーバーのタイムアウト timeout 設定"),
    ("fact-07", "src-a", "timeout"),
    ("fact-08", "src-b", "a cache"),
    ("fact-09", "src-b", "a cache"),
    ("fact-10", "src-a", "Deploy deploy DEPLOY pipeline; 배포 파이프라인"),
    ("fact-11", "src-a", "nothing relevant at all"),
    ("fact-12", "src-b", "redis"),
    ("fact-13", "src-a", "redis timeout cache deploy 서버 服务 all in one"),
]
QUERIES = [
    ("redis", None),
    ("cache timeout", None),
    ("서버 배포 redis", None),
    ("服务 服务器", None),
    ("deploy 배포", None),
    ("cache", "src-b"),
    ("redis timeout 서버 cache deploy all", "src-a"),
    ("zebra", None),
]
# Every neighbour fact holds every query term, some of them many times.
NOISE_TEXT = "redis timeout cache cache deploy 서버 배포 服务器 all zebra"


@pytest.fixture(params=STORES)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    backend = BACKENDS[request.param](tmp_path)
    yield backend
    for cleanup in backend.cleanups:
        cleanup()


def _project(store: Store, project: Project) -> None:
    def run(tx: object) -> None:
        tx.insert_tenant(project.tenant_id, 1)  # type: ignore[attr-defined]
        tx.insert_project(project, 1)  # type: ignore[attr-defined]

    store.transaction(run)


def _restore(store: Store, project: Project, docs: list[SearchDoc]) -> None:
    history = History([], [], [], [], [], docs)
    store.transaction(lambda tx: tx.restore_history(project, history))


def _bulk(store: Store, project: Project, count: int, text: str) -> None:
    """`count` facts `bulk_<n>` holding `text` plus a term of their own, in one import."""
    docs = [
        SearchDoc(f"bulk_{n:06d}", "src-bulk", index_terms(f"{text} own{n}")) for n in range(count)
    ]
    _restore(store, project, docs)


Hits = list[tuple[str, float]]


def _search(store: Store, q: str, source_id: str | None, limit: int = 100) -> SearchPage:
    scope = Scope(OWN.tenant_id, OWN.project_id)
    return store.read(lambda tx: tx.search(scope, query_terms(q), source_id, limit))


def _all(store: Store) -> list[Hits]:
    pages = [_search(store, q, source_id) for q, source_id in QUERIES]
    assert all(page.exhaustive for page in pages)
    return [[(h.fact_id, h.score) for h in page.hits] for page in pages]


def _own_corpus(store: Store) -> None:
    _project(store, OWN)
    _restore(store, OWN, [SearchDoc(f, s, index_terms(text)) for f, s, text in CORPUS])


def _reference() -> list[Hits]:
    reference = InMemoryStore()
    _own_corpus(reference)
    return _all(reference)


def test_srch4_scores_and_order_ignore_a_20000_fact_neighbour_bit_for_bit(
    backend: Backend,
) -> None:
    store = backend.open()
    _own_corpus(store)
    alone = _all(store)
    assert any(len(hits) > 2 for hits in alone)
    assert alone == _reference()  # the same scores, bit for bit, as the reference store
    _project(store, NOISE)
    _bulk(store, NOISE, 20_000, NOISE_TEXT)
    beside = _all(store)
    assert beside == alone
    assert all(f.startswith("fact-") for hits in beside for f, _ in hits)
    noise_scope = Scope(NOISE.tenant_id, NOISE.project_id)
    theirs = store.read(lambda tx: tx.search(noise_scope, ["zebra"], None, 5))
    # the neighbour's own search: 20,000 matches, so its newest window (SRCH-5)
    assert not theirs.exhaustive
    assert [h.fact_id for h in theirs.hits] == [f"bulk_{n:06d}" for n in range(10_000, 10_005)]


def test_srch4_a_term_in_every_fact_still_scores_above_zero(backend: Backend) -> None:
    store = backend.open()
    _project(store, OWN)
    _restore(
        store,
        OWN,
        [
            SearchDoc("every-1", "s", index_terms("common")),
            SearchDoc("every-2", "s", index_terms("common common words here")),
            SearchDoc("every-3", "s", index_terms("common rare")),
        ],
    )
    page = _search(store, "common", None)
    assert [h.fact_id for h in page.hits] == ["every-1", "every-2", "every-3"]
    assert all(h.score > 0.01 for h in page.hits)
    both = _search(store, "common rare", None)
    assert both.hits[0].fact_id == "every-3" and both.hits[0].score > page.hits[0].score


def test_srch5_more_matches_than_the_window_evaluate_the_newest_and_say_so(
    backend: Backend,
) -> None:
    store = backend.open()
    _project(store, OWN)
    old = 40
    # The oldest facts would win on score (the term four times in a short fact) ...
    _restore(
        store,
        OWN,
        [SearchDoc(f"aaa_old_{n:02d}", "src-old", "every every every every") for n in range(old)],
    )
    # ... but the window holds only the newest SEARCH_WINDOW matches of the term.
    _bulk(store, OWN, SEARCH_WINDOW, "every word of a longer fact")
    page = _search(store, "every", None, 10)
    assert not page.exhaustive
    assert len(page.hits) == 10 and all(h.fact_id.startswith("bulk_") for h in page.hits)
    filtered = _search(store, "every", "src-old", 10)
    assert (filtered.hits, filtered.exhaustive) == ([], False)
    # A term within the bound is exhaustive, even beside the big one.
    rare = _search(store, "own7 own9999", None, 10)
    assert rare.exhaustive and [h.fact_id for h in rare.hits] == ["bulk_000007", "bulk_009999"]
    assert _search(store, "word", None, 1).exhaustive  # exactly SEARCH_WINDOW matches
    mixed = _search(store, "every own3", None, 3)
    assert not mixed.exhaustive and mixed.hits[0].fact_id == "bulk_000003"


def test_srch4_an_imported_entry_replaces_the_one_indexed_before(backend: Backend) -> None:
    """A batch naming a fact already indexed, or one fact twice, keeps only the last entry."""
    store = backend.open()
    _own_corpus(store)
    _restore(
        store,
        OWN,
        [
            SearchDoc("fact-07", "src-a", "replaced words"),
            SearchDoc("fact-20", "src-a", "first entry"),
            SearchDoc("fact-20", "src-b", "second entry words"),
        ],
    )
    assert "fact-07" not in [h.fact_id for h in _search(store, "timeout", None).hits]
    assert [h.fact_id for h in _search(store, "words", None).hits] == ["fact-07", "fact-20"]
    assert _search(store, "first", None).hits == []
    assert [h.fact_id for h in _search(store, "entry", "src-b").hits] == ["fact-20"]
    reference = InMemoryStore()
    _own_corpus(reference)
    _restore(
        reference,
        OWN,
        [
            SearchDoc("fact-07", "src-a", "replaced words"),
            SearchDoc("fact-20", "src-b", "second entry words"),
        ],
    )
    assert _all(store) == _all(reference)


def test_srch5_without_a_big_term_every_match_is_evaluated(backend: Backend) -> None:
    store = backend.open()
    _own_corpus(store)
    page: SearchPage = _search(store, "redis", None, 1)
    assert page.exhaustive and len(page.hits) == 1
    nothing = _search(store, "zebra", None)
    assert (nothing.hits, nothing.exhaustive) == ([], True)


def test_srch7_many_terms_share_the_postings_budget_on_every_store(backend: Backend) -> None:
    """32 terms share `POSTINGS_BUDGET`: each term's window shrinks to 2,500, so a term that
    one- to eight-term queries evaluate whole is windowed beside 31 others, alike everywhere."""
    store = backend.open()
    _project(store, OWN)
    _bulk(store, OWN, 3_000, "shared")
    assert _search(store, "shared", None, 5).exhaustive  # 3,000 within SEARCH_WINDOW
    many = "shared " + " ".join(f"own{n}" for n in range(31))  # own0..own30: the oldest facts
    page = _search(store, many, None, 50)
    assert len(query_terms(many)) == 32 and window_for(32) == 2_500
    assert not page.exhaustive
    # the window starts at the 2,500th newest `shared` fact: bulk_000500 onwards
    assert page.hits and all(h.fact_id >= "bulk_000500" for h in page.hits)
    reference = InMemoryStore()
    _project(reference, OWN)
    _bulk(reference, OWN, 3_000, "shared")
    expected = _search(reference, many, None, 50)
    assert [(h.fact_id, h.score) for h in page.hits] == [
        (h.fact_id, h.score) for h in expected.hits
    ]
