#!/usr/bin/env python3
"""Benchmark of lexical search on the SQLite and PostgreSQL stores (SPEC.md SRCH-4, SRCH-5).

What is timed is one store-level search, `store.read(lambda tx: tx.search(scope, terms, None,
20))`: the read transaction, the statements of the project-scoped index and the ranking in
`aidememo.domain.ranking` (no HTTP, no fact bodies). Each store is one database holding every
project of the run:

- projects of `--sizes` facts (default 1,000, 10,000 and 100,000) of generated mixed text: a
  Zipf-distributed English-like vocabulary, one fact in four mostly Korean, Chinese or
  Japanese, 8 to 40 words, each fact with a ticket number of its own and the word `memo`;
- queries of three classes: `rare` (one ticket number, one fact), `two_common` (two words each
  held by about 3-5 % of the facts; their document shares are reported) and `every` (`memo`, in
  every fact: above 10,000 facts the answer is the newest window, `exhaustive: false`);
- the noisy neighbour: a project of 100 facts measured alone, then beside another tenant (with
  the same project id) whose `--neighbour` facts (default 1,000,000) each hold the small
  project's two common terms, its every-fact term and one of its three rare terms in turn (so
  every query of the small project matches a third or all of the million); the small project's
  scores with and without the neighbour are compared for equality.

Each (store, project, class) runs for `--seconds` at 1 client, then at 32 clients (threads with
their own connections on PostgreSQL; the stdlib `sqlite3` and psycopg release the GIL while
they wait). Reported: p50/p95/p99 per search, searches/s, and the share of non-exhaustive
answers.

Loading uses the stores' own indexing (`restore_history`, the import path, in batches of
5,000 facts per transaction) for the generated projects; the neighbour's uniform facts are
written set-wise (the rows the indexing would write), which takes seconds, not minutes.
PostgreSQL is a throwaway cluster of `scripts/_bench_pg_server.py`, analyzed and vacuumed after
loading; SQLite is a temporary file.

The last line of output is the JSON result object (`_bench_common.emit`); progress goes to
stderr. Run from the repository root:
`.venv/bin/python scripts/bench_search.py [--sizes 1000,10000] [--neighbour 100000]`.
"""

from __future__ import annotations

import argparse
import bisect
import os
import random
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _bench_common import emit, latency_summary, note, peak_rss_mib, target
from _bench_pg_server import Cluster, _raise_on_signal

from aidememo.domain.model import History, Project, Scope, SearchDoc
from aidememo.domain.ranking import SEARCH_WINDOW
from aidememo.domain.tokenize import index_terms, query_terms
from aidememo.ports import Store
from aidememo.stores.sqlite.search_schema import FACTS, KEY_SHIFT, ROWID, tokens_of

TENANT = "tenant_bench"
NEIGHBOUR_TENANT = "tenant_neighbour"
SMALL = 100
LIMIT = 20
CLIENTS = 32
BATCH = 5_000
EVERY = "memo"

_WORDS = (
    "the of and to in is for on that with as it be this by are from at was or an not have "
    "deploy server cache redis cluster timeout error retry queue worker build test release "
    "config database index query latency memory disk network request response token session "
    "handoff lease project tenant agent review merge branch commit rollback migration schema "
    "backup restore alert metric log trace span service endpoint route proxy limit quota"
).split()
_CJK = (
    "서버 배포 실패 재시작 캐시 데이터베이스 장애 복구 설정 로그 "
    "服务器 部署 失败 重启 缓存 数据库 故障 恢复 配置 日志 "
    "サーバー デプロイ 失敗 再起動 キャッシュ 設定 ログ 障害"
).split()


def _vocabulary(size: int, rng: random.Random) -> list[str]:
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words = list(_WORDS)
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class Corpus:
    """Deterministic mixed-language facts; word ranks follow Zipf's law (s = 1.07)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = _vocabulary(20_000, self.rng)
        weights = [1.0 / (rank**1.07) for rank in range(1, len(self.words) + 1)]
        total = 0.0
        self.cumulative = []
        for w in weights:
            total += w
            self.cumulative.append(total)

    def word(self) -> str:
        x = self.rng.random() * self.cumulative[-1]
        return self.words[bisect.bisect_left(self.cumulative, x)]

    def fact(self, n: int) -> str:
        rng = self.rng
        if rng.random() < 0.25:
            parts = [rng.choice(_CJK) for _ in range(rng.randint(4, 12))]
            parts += [self.word() for _ in range(rng.randint(2, 8))]
        else:
            parts = [self.word() for _ in range(rng.randint(8, 40))]
        parts.insert(rng.randint(0, len(parts)), f"ticket{n}")
        parts.append(EVERY)
        return " ".join(parts)


def _docs(prefix: str, count: int, seed: int) -> list[SearchDoc]:
    corpus = Corpus(seed)
    return [
        SearchDoc(f"{prefix}_{n:07d}", "src-bench", index_terms(corpus.fact(n)))
        for n in range(count)
    ]


def _common_pair(docs: list[SearchDoc]) -> tuple[str, str, float, float]:
    """Two words with document shares nearest 5 % and 3 %."""
    df: dict[str, int] = {}
    for doc in docs:
        for term in set(doc.terms.split()):
            df[term] = df.get(term, 0) + 1
    n = len(docs)
    candidates = [t for t in df if t != EVERY and not t.startswith("ticket")]
    first = min(candidates, key=lambda t: abs(df[t] / n - 0.05))
    second = min((t for t in candidates if t != first), key=lambda t: abs(df[t] / n - 0.03))
    return first, second, df[first] / n, df[second] / n


# -- the stores -----------------------------------------------------------------------------


def _provision(store: Store, project: Project) -> None:
    def run(tx: Any) -> None:
        if not tx.tenant_exists(project.tenant_id):
            tx.insert_tenant(project.tenant_id, 1)
        tx.insert_project(project, 1)

    store.transaction(run)


def _load(store: Any, project: Project, docs: list[SearchDoc]) -> None:
    _provision(store, project)
    for start in range(0, len(docs), BATCH):
        history = History([], [], [], [], [], docs[start : start + BATCH])
        store.transaction(lambda tx, h=history: tx.restore_history(project, h))


# The neighbour: `n` facts holding `terms` (the small project's common and every-fact terms)
# and one of its three rare terms in turn, written set-wise.
_SQLITE_NEIGHBOUR = (
    """WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < :n - 1)
    INSERT INTO fact_search (tenant_id, project_id, fact_id, source_id, doc_seq, n_terms, terms)
    SELECT :t, :p, 'nb_' || n, 'src-nb', n + 1, :len + 1,
           :terms || ' ' || CASE n % 3 WHEN 0 THEN :r0 WHEN 1 THEN :r1 ELSE :r2 END FROM g""",
    """INSERT INTO fact_search_stats
    SELECT tenant_id, project_id, count(*), sum(n_terms), max(doc_seq),
           (SELECT coalesce(max(fts_key), 0) + 1 FROM fact_search_stats) FROM fact_search
    WHERE tenant_id = :t AND project_id = :p GROUP BY tenant_id, project_id""",
    f"""INSERT INTO fact_search_docs (id, fact_id, source_id, n_terms)
    SELECT {ROWID}, d.fact_id, d.source_id, d.n_terms FROM {FACTS}
    WHERE d.tenant_id = :t AND d.project_id = :p""",
    "INSERT INTO fact_search_text (id, t) " + tokens_of("d.tenant_id = :t AND d.project_id = :p"),
    f"""INSERT INTO fact_search_fts (rowid, t)
    SELECT id, t FROM fact_search_text WHERE id >> {KEY_SHIFT} = (
        SELECT fts_key FROM fact_search_stats WHERE tenant_id = :t AND project_id = :p)""",
)


_PG_NEIGHBOUR = (
    """INSERT INTO fact_search (tenant_id, project_id, fact_id, source_id, terms, n_terms, doc_seq)
    SELECT %(t)s, %(p)s, 'nb_' || g, 'src-nb', a, cardinality(a), g + 1
    FROM generate_series(0, %(n)s - 1) AS g,
         LATERAL string_to_array(%(terms)s || ' ' || CASE g %% 3 WHEN 0 THEN %(r0)s
                                 WHEN 1 THEN %(r1)s ELSE %(r2)s END, ' ') AS a""",
    """INSERT INTO fact_search_postings
    SELECT f.tenant_id, f.project_id, u.term, f.doc_seq, f.fact_id, f.source_id, count(*),
           f.n_terms
    FROM fact_search AS f CROSS JOIN LATERAL unnest(f.terms) AS u (term)
    WHERE f.tenant_id = %(t)s AND f.project_id = %(p)s
    GROUP BY f.tenant_id, f.project_id, f.doc_seq, u.term, f.fact_id, f.source_id, f.n_terms""",
    """INSERT INTO fact_search_terms
    SELECT tenant_id, project_id, term, count(*) FROM fact_search_postings
    WHERE tenant_id = %(t)s AND project_id = %(p)s GROUP BY tenant_id, project_id, term""",
    """INSERT INTO fact_search_stats
    SELECT tenant_id, project_id, count(*), sum(n_terms), max(doc_seq) FROM fact_search
    WHERE tenant_id = %(t)s AND project_id = %(p)s GROUP BY tenant_id, project_id""",
)


def _neighbour_params(project: Project, n: int, terms: str, rare: list[str]) -> dict[str, Any]:
    r0, r1, r2 = rare
    return {"t": project.tenant_id, "p": project.project_id, "n": n, "terms": terms,
            "len": len(terms.split()), "r0": r0, "r1": r1, "r2": r2}  # fmt: skip


def _neighbour_sqlite(path: Path, project: Project, n: int, terms: str, rare: list[str]) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    params = _neighbour_params(project, n, terms, rare)
    with conn:
        for statement in _SQLITE_NEIGHBOUR:
            conn.execute(statement, params)
    conn.close()


def _neighbour_pg(url: str, project: Project, n: int, terms: str, rare: list[str]) -> None:
    import psycopg

    params = _neighbour_params(project, n, terms, rare)
    del params["len"]
    with psycopg.connect(url, autocommit=False) as conn:
        for statement in _PG_NEIGHBOUR:
            conn.execute(statement, params)
        conn.commit()


# -- measuring ------------------------------------------------------------------------------

Query = list[str]


def _one(store: Store, scope: Scope, terms: Query) -> tuple[int, bool, list[tuple[str, float]]]:
    began = time.perf_counter_ns()
    page = store.read(lambda tx: tx.search(scope, terms, None, LIMIT))
    took = time.perf_counter_ns() - began
    return took, page.exhaustive, [(h.fact_id, h.score) for h in page.hits]


def _run(
    store: Store, scope: Scope, queries: list[Query], clients: int, seconds: float
) -> dict[str, float]:
    samples: list[int] = []
    partial = [0]
    lock = threading.Lock()
    for q in queries[:3]:  # warm up
        _one(store, scope, q)
    deadline = time.monotonic() + seconds

    def client(k: int) -> None:
        mine: list[int] = []
        cut = 0
        i = k
        while time.monotonic() < deadline:
            took, exhaustive, _ = _one(store, scope, queries[i % len(queries)])
            mine.append(took)
            cut += not exhaustive
            i += clients
        with lock:
            samples.extend(mine)
            partial[0] += cut

    began = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.monotonic() - began
    out: dict[str, float] = latency_summary(samples, "")
    out = {k.lstrip("_"): v for k, v in out.items()}
    out["searches_per_s"] = round(len(samples) / wall, 1)
    out["non_exhaustive_share"] = round(partial[0] / max(1, len(samples)), 4)
    out["searches"] = len(samples)
    return out


def _classes(
    docs: list[SearchDoc], rng: random.Random, rare_count: int = 50
) -> tuple[dict[str, list[Query]], dict[str, Any]]:
    first, second, s1, s2 = _common_pair(docs)
    n = len(docs)
    rare = [query_terms(f"ticket{k}") for k in rng.sample(range(n), rare_count)]
    return (
        {"rare": rare, "two_common": [[first, second]], "every": [[EVERY]]},
        {"common_terms": f"{first} {second}", "common_shares": [round(s1, 4), round(s2, 4)]},
    )


def _measure(
    name: str,
    store: Store,
    scope: Scope,
    classes: dict[str, list[Query]],
    seconds: float,
    figures: dict[str, Any],
) -> None:
    for cls, queries in classes.items():
        for clients in (1, CLIENTS):
            note(f"{name}: {cls} at {clients} client(s)")
            result = _run(store, scope, queries, clients, seconds)
            for key, value in result.items():
                figures[f"{name}_{cls}_c{clients}_{key}"] = value


def bench_store(
    kind: str, sizes: list[int], neighbour: int, seconds: float, base: str
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    rng = random.Random(7)
    cluster: Cluster | None = None
    try:
        if kind == "sqlite":
            from aidememo.stores.sqlite import SqliteStore

            path = Path(base) / "search.sqlite"
            store: Any = SqliteStore.open_file(path, synchronous="OFF")

            def load(project: Project, docs: list[SearchDoc]) -> None:
                _load(store, project, docs)

            def neighbour_load(project: Project, n: int, terms: str, rare: list[str]) -> None:
                _neighbour_sqlite(path, project, n, terms, rare)

        else:
            from aidememo.cli.stores import psycopg_connector
            from aidememo.stores.postgres import PostgresStore

            cluster = Cluster(tempfile.mkdtemp(prefix="aidememo-bench-search.", dir=base))
            cluster.start()
            url = cluster.url
            store = PostgresStore.open(psycopg_connector(url), migrate=True, pool_size=CLIENTS)

            def load(project: Project, docs: list[SearchDoc]) -> None:
                _load(store, project, docs)

            def neighbour_load(project: Project, n: int, terms: str, rare: list[str]) -> None:
                _neighbour_pg(url, project, n, terms, rare)

        def settle() -> None:
            # the load's after-effects are not measured: PostgreSQL's statistics and
            # visibility map are made current and its dirty buffers written (a checkpoint the
            # load's WAL would otherwise start during the searches), and the page cache's
            # dirty pages of either store reach the disk before the first search
            if cluster is not None:
                import psycopg

                with psycopg.connect(cluster.url, autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE")
                    conn.execute("CHECKPOINT")
            os.sync()

        # the small project alone, then the sized projects, then the neighbour
        small_docs = _docs("small", SMALL, 100)
        small = Project(TENANT, "project_small", "e", 0)
        load(small, small_docs)
        small_classes, small_info = _classes(small_docs, rng, 3)
        settle()
        scope = small.scope
        alone = {
            cls: [_one(store, scope, q)[2] for q in qs[:5]] for cls, qs in small_classes.items()
        }
        for size in sizes:
            note(f"{kind}: loading {size:,} facts")
            began = time.monotonic()
            docs = _docs(f"f{size}", size, size)
            project = Project(TENANT, f"project_{size}", "e", 0)
            load(project, docs)
            settle()
            figures[f"{kind}_{size}_load_s"] = round(time.monotonic() - began, 1)
            classes, info = _classes(docs, rng)
            figures[f"{kind}_{size}_common_terms"] = info["common_terms"]
            figures[f"{kind}_{size}_common_shares"] = info["common_shares"]
            _measure(f"{kind}_{size}", store, project.scope, classes, seconds, figures)
        _measure(f"{kind}_small_alone", store, scope, small_classes, seconds, figures)
        terms = " ".join([*small_classes["two_common"][0], EVERY])
        rare = [q[0] for q in small_classes["rare"]]
        note(f"{kind}: the neighbour, {neighbour:,} facts holding every query term")
        began = time.monotonic()
        nb = Project(NEIGHBOUR_TENANT, "project_small", "e", 0)  # the same project id
        _provision(store, nb)
        neighbour_load(nb, neighbour, terms, rare)
        settle()
        figures[f"{kind}_neighbour_load_s"] = round(time.monotonic() - began, 1)
        beside = {
            cls: [_one(store, scope, q)[2] for q in qs[:5]] for cls, qs in small_classes.items()
        }
        figures[f"{kind}_small_scores_identical"] = beside == alone
        figures[f"{kind}_small_common_terms"] = small_info["common_terms"]
        _measure(f"{kind}_small_beside", store, scope, small_classes, seconds, figures)
        store.close()
    finally:
        if cluster is not None:
            cluster.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--neighbour", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--dir", default=None, help="where the temporary databases go")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_on_signal)
    began = time.monotonic()
    load_before = os.getloadavg()
    figures: dict[str, Any] = {"sizes": sizes, "neighbour_facts": args.neighbour}
    figures["window"] = SEARCH_WINDOW
    targets: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="aidememo-bench-search.", dir=args.dir) as base:
        os.chmod(base, 0o755)
        for kind in args.stores.split(","):
            figures.update(bench_store(kind, sizes, args.neighbour, args.seconds, base))
            big = max(sizes)
            for cls, goal in (("rare", "<= 10"), ("two_common", "<= 10"), ("every", "<= 50")):
                key = f"{kind}_{big}_{cls}_c1_p95_ms"
                targets[key] = target(figures[key], goal)
            for cls in ("rare", "two_common", "every"):
                key = f"{kind}_small_beside_{cls}_c1_p95_ms"
                targets[key] = target(figures[key], "<= 2")
            same = figures[f"{kind}_small_scores_identical"]
            targets[f"{kind}_small_scores_identical"] = {
                "value": same,
                "goal": "true",
                "met": same,
            }
    figures["elapsed_s"] = round(time.monotonic() - began, 1)
    figures["load_avg_before"] = [round(x, 2) for x in load_before]
    figures["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    figures["peak_rss_mib"] = peak_rss_mib()
    emit("bench_search", figures, {}, targets)


if __name__ == "__main__":
    main()
