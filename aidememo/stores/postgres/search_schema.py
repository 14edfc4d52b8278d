"""PostgreSQL schema versions 6, 8 and 9: the project-scoped lexical index (SPEC.md SRCH-4..6).

`schema.py` lists `V6` among its migrations. It replaces the GIN-indexed `tsvector` (one index
for every tenant) with the layout the SQLite store keeps: `fact_search` gains the fact's
doc_seq, `fact_search_postings` holds one row per fact and distinct term under the primary
key (tenant, project, term, doc_seq) with the columns a search reads included (an index-only
scan), `fact_search_terms` the project's document frequencies and `fact_search_stats` its
fact count, total length and last doc_seq (they were columns of `projects`). Postings and
frequencies carry no foreign key (a commit writes dozens of them, and a per-row check would
cost more than the row); a tenant's deletion removes them first (`archive.py`). The migration
rebuilds them from the stored term arrays in its transaction; `aidememo_index_fact` (a
command's commit) and `aidememo_index_facts` (an import) maintain them from then on.
"""

from __future__ import annotations

from aidememo.domain.ranking import MAX_TERM_BYTES

_ID = 'TEXT COLLATE "C" NOT NULL'

# A fact's part of the index, replaced whole: the old entry's postings and document
# frequencies go, the project's statistics move and hand out the fact's doc_seq, then the new
# postings (one per distinct term short enough to index) and frequencies are written.
_INDEX_FACT_V6 = f"""
CREATE OR REPLACE FUNCTION aidememo_index_fact(
    p_tenant TEXT, p_project TEXT, p_fact TEXT, p_source TEXT, p_terms TEXT
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_terms TEXT[] := CASE WHEN p_terms = '' THEN '{{}}'::TEXT[]
                           ELSE string_to_array(p_terms, ' ') END;
    v_old_seq BIGINT;
    v_old_terms TEXT[];
    v_old_n INT;
    v_seq BIGINT;
BEGIN
    DELETE FROM fact_search
        WHERE tenant_id = p_tenant AND project_id = p_project AND fact_id = p_fact
        RETURNING doc_seq, terms, n_terms INTO v_old_seq, v_old_terms, v_old_n;
    IF v_old_seq IS NOT NULL THEN
        DELETE FROM fact_search_postings
            WHERE tenant_id = p_tenant AND project_id = p_project
              AND term = ANY (v_old_terms) AND doc_seq = v_old_seq;
        UPDATE fact_search_terms SET df = df - 1
            WHERE tenant_id = p_tenant AND project_id = p_project
              AND term IN (SELECT DISTINCT t FROM unnest(v_old_terms) AS t
                           WHERE octet_length(t) <= {MAX_TERM_BYTES});
        DELETE FROM fact_search_terms
            WHERE tenant_id = p_tenant AND project_id = p_project
              AND df = 0 AND term = ANY (v_old_terms);
    END IF;
    INSERT INTO fact_search_stats AS s (tenant_id, project_id, docs, terms, last_doc)
        VALUES (p_tenant, p_project, 1, cardinality(v_terms), 1)
        ON CONFLICT (tenant_id, project_id) DO UPDATE SET
            docs = s.docs + CASE WHEN v_old_seq IS NULL THEN 1 ELSE 0 END,
            terms = s.terms + cardinality(v_terms) - coalesce(v_old_n, 0),
            last_doc = s.last_doc + 1
        RETURNING last_doc INTO v_seq;
    INSERT INTO fact_search (tenant_id, project_id, fact_id, source_id, terms, n_terms, doc_seq)
        VALUES (p_tenant, p_project, p_fact, p_source, v_terms, cardinality(v_terms), v_seq);
    INSERT INTO fact_search_postings
            (tenant_id, project_id, term, doc_seq, fact_id, source_id, tf, n_terms)
        SELECT p_tenant, p_project, t, v_seq, p_fact, p_source, count(*), cardinality(v_terms)
        FROM unnest(v_terms) AS t WHERE octet_length(t) <= {MAX_TERM_BYTES} GROUP BY t;
    INSERT INTO fact_search_terms AS f (tenant_id, project_id, term, df)
        SELECT p_tenant, p_project, t, 1
        FROM unnest(v_terms) AS t WHERE octet_length(t) <= {MAX_TERM_BYTES} GROUP BY t
        ON CONFLICT (tenant_id, project_id, term) DO UPDATE SET df = f.df + 1;
END
$fn$"""

# Many new facts at once (an import): the same rows as `aidememo_index_fact` for each, written
# set-wise with one move of the statistics. Under MVCC every update of a row inside one
# transaction adds a version the next update must step over, so indexing an archive fact by
# fact would update the statistics row and each common term's row thousands of times. The
# lists are newline-separated (ids and the tokenizer's terms hold no newline); a fact already
# indexed, or named twice, sends the whole batch through `aidememo_index_fact` in order.
_INDEX_FACTS_V6 = f"""
CREATE OR REPLACE FUNCTION aidememo_index_facts(
    p_tenant TEXT, p_project TEXT, p_facts TEXT, p_sources TEXT, p_terms TEXT
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_facts TEXT[] := string_to_array(p_facts, E'\\n');
    v_sources TEXT[] := string_to_array(p_sources, E'\\n');
    -- one fact without terms sends '' (which string_to_array reads as no element at all)
    v_terms TEXT[] := CASE WHEN p_terms = '' THEN array_fill(''::TEXT, ARRAY[cardinality(v_facts)])
                           ELSE string_to_array(p_terms, E'\\n') END;
    v_base BIGINT;
BEGIN
    IF EXISTS (SELECT 1 FROM fact_search WHERE tenant_id = p_tenant AND project_id = p_project
                                         AND fact_id = ANY (v_facts))
       OR (SELECT count(DISTINCT f) FROM unnest(v_facts) AS f) < cardinality(v_facts) THEN
        FOR i IN 1 .. cardinality(v_facts) LOOP
            PERFORM aidememo_index_fact(p_tenant, p_project, v_facts[i], v_sources[i],
                                        v_terms[i]);
        END LOOP;
        RETURN;
    END IF;
    INSERT INTO fact_search_stats (tenant_id, project_id, docs, terms, last_doc)
        VALUES (p_tenant, p_project, 0, 0, 0) ON CONFLICT (tenant_id, project_id) DO NOTHING;
    SELECT last_doc INTO v_base FROM fact_search_stats
        WHERE tenant_id = p_tenant AND project_id = p_project FOR UPDATE;
    INSERT INTO fact_search (tenant_id, project_id, fact_id, source_id, terms, n_terms, doc_seq)
        SELECT p_tenant, p_project, u.f, u.s, a.t, cardinality(a.t), v_base + u.i
        FROM unnest(v_facts, v_sources, v_terms) WITH ORDINALITY AS u (f, s, terms, i),
             LATERAL (SELECT CASE WHEN u.terms = '' THEN '{{}}'::TEXT[]
                                  ELSE string_to_array(u.terms, ' ') END AS t) AS a;
    -- each fact's terms are counted on their own (LATERAL), never grouped with its text
    INSERT INTO fact_search_postings
            (tenant_id, project_id, term, doc_seq, fact_id, source_id, tf, n_terms)
        SELECT p_tenant, p_project, w.term, v_base + u.i, u.f, u.s, w.tf, cardinality(a.t)
        FROM unnest(v_facts, v_sources, v_terms) WITH ORDINALITY AS u (f, s, terms, i),
             LATERAL (SELECT string_to_array(u.terms, ' ') AS t) AS a,
             LATERAL (SELECT x AS term, count(*) AS tf FROM unnest(a.t) AS x
                      WHERE octet_length(x) <= {MAX_TERM_BYTES} GROUP BY x) AS w
        WHERE u.terms <> '';
    INSERT INTO fact_search_terms AS d (tenant_id, project_id, term, df)
        SELECT p_tenant, p_project, w.term, count(*)
        FROM unnest(v_terms) AS u (terms),
             LATERAL (SELECT DISTINCT x AS term FROM unnest(string_to_array(u.terms, ' ')) AS x
                      WHERE octet_length(x) <= {MAX_TERM_BYTES}) AS w
        WHERE u.terms <> ''
        GROUP BY w.term
        ON CONFLICT (tenant_id, project_id, term) DO UPDATE SET df = d.df + excluded.df;
    UPDATE fact_search_stats SET
        docs = docs + cardinality(v_facts),
        terms = terms + (SELECT coalesce(sum(cardinality(string_to_array(t, ' '))), 0)
                         FROM unnest(v_terms) AS t WHERE t <> ''),
        last_doc = v_base + cardinality(v_facts)
    WHERE tenant_id = p_tenant AND project_id = p_project;
END
$fn$"""

V6 = (
    "ALTER TABLE fact_search DROP COLUMN doc, ADD COLUMN doc_seq BIGINT",
    # doc_seq follows each fact's last change (the order facts were written), then fact id.
    """UPDATE fact_search AS f SET doc_seq = o.n
    FROM (
        SELECT s.tenant_id, s.project_id, s.fact_id,
               row_number() OVER (PARTITION BY s.tenant_id, s.project_id
                                  ORDER BY c.seq NULLS FIRST, s.fact_id) AS n
        FROM fact_search AS s
        LEFT JOIN (
            SELECT tenant_id, project_id, resource_id, max(seq) AS seq FROM changes
            WHERE kind = 'fact' GROUP BY tenant_id, project_id, resource_id
        ) AS c ON c.tenant_id = s.tenant_id AND c.project_id = s.project_id
              AND c.resource_id = s.fact_id
    ) AS o
    WHERE f.tenant_id = o.tenant_id AND f.project_id = o.project_id AND f.fact_id = o.fact_id""",
    "ALTER TABLE fact_search ALTER COLUMN doc_seq SET NOT NULL, ADD CHECK (doc_seq > 0)",
    f"""CREATE TABLE fact_search_postings (
        tenant_id {_ID},
        project_id {_ID},
        term {_ID},
        doc_seq BIGINT NOT NULL,
        fact_id {_ID},
        source_id {_ID},
        tf INT NOT NULL CHECK (tf > 0),
        n_terms INT NOT NULL CHECK (n_terms > 0),
        PRIMARY KEY (tenant_id, project_id, term, doc_seq)
            INCLUDE (fact_id, source_id, tf, n_terms)
    )""",
    f"""CREATE TABLE fact_search_terms (
        tenant_id {_ID},
        project_id {_ID},
        term {_ID},
        df BIGINT NOT NULL CHECK (df >= 0),
        PRIMARY KEY (tenant_id, project_id, term)
    )""",
    f"""CREATE TABLE fact_search_stats (
        tenant_id {_ID},
        project_id {_ID},
        docs BIGINT NOT NULL CHECK (docs >= 0),
        terms BIGINT NOT NULL CHECK (terms >= 0),
        last_doc BIGINT NOT NULL CHECK (last_doc >= 0),
        PRIMARY KEY (tenant_id, project_id),
        FOREIGN KEY (tenant_id, project_id)
            REFERENCES projects (tenant_id, project_id) ON DELETE CASCADE
    )""",
    f"""INSERT INTO fact_search_postings
        SELECT f.tenant_id, f.project_id, u.term, f.doc_seq, f.fact_id, f.source_id,
               count(*), f.n_terms
        FROM fact_search AS f CROSS JOIN LATERAL unnest(f.terms) AS u (term)
        WHERE octet_length(u.term) <= {MAX_TERM_BYTES}
        GROUP BY f.tenant_id, f.project_id, f.doc_seq, u.term, f.fact_id, f.source_id,
                 f.n_terms""",
    """INSERT INTO fact_search_terms
        SELECT tenant_id, project_id, term, count(*) FROM fact_search_postings
        GROUP BY tenant_id, project_id, term""",
    """INSERT INTO fact_search_stats
        SELECT tenant_id, project_id, count(*), sum(n_terms), max(doc_seq) FROM fact_search
        GROUP BY tenant_id, project_id""",
    "ALTER TABLE projects DROP COLUMN search_docs, DROP COLUMN search_terms",
    _INDEX_FACT_V6,
    _INDEX_FACTS_V6,
)

# One range per query term of a project's postings with each posting's part of the score,
# `aidememo.domain.ranking.part`'s expression (a bigint product, one float8 division,
# truncation); `i` is the term's position in the query. A SQL function the planner inlines
# into the statement calling it. Each term's key range is a LATERAL subquery behind `OFFSET 0`
# (which the planner never merges into the join), so it is always one index range scan per
# term, whatever the statistics say: estimated from a term's frequency in other tenants' data
# it looked like 10^5 rows (a parallel, JIT-compiled plan), and on tables not analyzed yet
# like one row, which planned a scan of the project's whole postings per term. The weights'
# document frequencies and the hits' bodies are read the same way.
_SEARCH_RANGE_V8 = """
CREATE OR REPLACE FUNCTION aidememo_search_range(
    p_tenant TEXT, p_project TEXT, p_terms TEXT[], p_weights BIGINT[], p_k FLOAT8,
    p_kb FLOAT8, p_min BIGINT, p_source TEXT
) RETURNS TABLE (i BIGINT, doc_seq BIGINT, fact_id TEXT, s BIGINT)
LANGUAGE sql STABLE AS $fn$
    SELECT w.i, p.doc_seq, p.fact_id,
           trunc((w.weight * p.tf)::float8 / (p.tf + p_k + p_kb * p.n_terms))::bigint
    FROM unnest(p_terms, p_weights) WITH ORDINALITY AS w (term, weight, i)
    CROSS JOIN LATERAL (
        SELECT q.doc_seq, q.fact_id, q.tf, q.n_terms FROM fact_search_postings AS q
        WHERE q.tenant_id = p_tenant AND q.project_id = p_project AND q.term = w.term
          AND q.doc_seq >= p_min AND (p_source IS NULL OR q.source_id = p_source)
        OFFSET 0) AS p
$fn$"""

# Version 8: a search in one statement (SPEC.md SRCH-6). `aidememo_search` runs
# `aidememo.domain.ranking.search`'s plan server-side: the project's statistics, the weights
# (the same IEEE operations in the same order as `ranking.weights`, the constants passed in
# from Python), the window's cutoff and the top, so a search is one round trip and its
# statements' plans are cached in the server session instead of planned per request. The
# two-term case is filled in per version (`_TWO_TERMS_V8`, `_TWO_TERMS_V9`). The answer is one
# row: the hits' fact ids and scores in units, best first, whether it is exhaustive, and the
# hits' fact bodies, read in the same statement (so a search needs no read per hit).
_SEARCH = """
CREATE OR REPLACE FUNCTION aidememo_search(
    p_tenant TEXT, p_project TEXT, p_terms TEXT, p_source TEXT, p_limit INT, p_window INT,
    p_k FLOAT8, p_k1b FLOAT8, p_k1p1 FLOAT8, p_scale FLOAT8,
    OUT fact_ids TEXT[], OUT units BIGINT[], OUT exhaustive BOOLEAN, OUT bodies BYTEA[]
) LANGUAGE plpgsql STABLE
-- Plans that never depend on the statistics: every key range is a LATERAL subquery (only a
-- nested loop can run it, so turning nested loops off leaves those) and the one join of two
-- ranges is hashed; every read is by key, so index scans read the ranges in key order,
-- never a sequential scan or bitmaps (on a small table the planner would otherwise scan it
-- whole once per term). The cost penalty of the nested loops would cross the JIT and parallel
-- thresholds, so neither runs here (a search reads at most its window of postings per term).
SET enable_nestloop = off SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
SET max_parallel_workers_per_gather = 0
AS $fn$
DECLARE
    v_docs BIGINT;
    v_total BIGINT;
    v_names TEXT[];
    v_weights BIGINT[];
    v_dfs BIGINT[];
    v_kb FLOAT8;
    v_min BIGINT := 0;
BEGIN
    fact_ids := '{{}}';
    units := '{{}}';
    exhaustive := true;
    bodies := '{{}}';
    IF p_terms = '' OR p_limit <= 0 THEN
        RETURN;
    END IF;
    SELECT s.docs, s.terms INTO v_docs, v_total FROM fact_search_stats AS s
        WHERE s.tenant_id = p_tenant AND s.project_id = p_project;
    IF v_docs IS NULL OR v_docs <= 0 OR v_total <= 0 THEN
        RETURN;
    END IF;
    SELECT array_agg(u.t ORDER BY u.i),
           array_agg(round(ln(1.0::float8 + ((v_docs - f.df)::float8 + 0.5::float8)
                                          / (f.df::float8 + 0.5::float8))
                           * p_k1p1 * p_scale)::bigint ORDER BY u.i),
           array_agg(f.df ORDER BY u.i)
        INTO v_names, v_weights, v_dfs
        FROM unnest(string_to_array(p_terms, ' ')) WITH ORDINALITY AS u (t, i)
        CROSS JOIN LATERAL (
            SELECT d.df FROM fact_search_terms AS d
            WHERE d.tenant_id = p_tenant AND d.project_id = p_project AND d.term = u.t
              AND d.df > 0
            OFFSET 0) AS f;
    IF v_names IS NULL THEN
        RETURN;
    END IF;
    v_kb := p_k1b / (v_total::float8 / v_docs::float8);
    FOR i IN 1 .. cardinality(v_names) LOOP
        IF v_dfs[i] > p_window THEN
            exhaustive := false;
            v_min := greatest(v_min, (
                SELECT c.doc_seq FROM fact_search_postings AS c
                WHERE c.tenant_id = p_tenant AND c.project_id = p_project
                  AND c.term = v_names[i]
                ORDER BY c.doc_seq DESC LIMIT 1 OFFSET p_window - 1));
        END IF;
    END LOOP;
    IF cardinality(v_names) = 2 THEN
        -- the facts holding both: the two ranges hash-joined on doc_seq (enable_nestloop is
        -- off in this function, so an estimate of a few rows never makes it a nested loop)
{two_terms}    ELSIF cardinality(v_names) = 1 THEN
        -- a fact holds a term once: its part is its score, nothing to group
        WITH top AS (
            SELECT r.fact_id, r.s
            FROM aidememo_search_range(p_tenant, p_project, v_names, v_weights, p_k, v_kb,
                                       v_min, p_source) AS r
            ORDER BY 2 DESC, 1 LIMIT p_limit)
        SELECT coalesce(array_agg(top.fact_id ORDER BY top.s DESC, top.fact_id), '{{}}'),
               coalesce(array_agg(top.s ORDER BY top.s DESC, top.fact_id), '{{}}')
            INTO fact_ids, units FROM top;
    ELSE
        WITH top AS (
            SELECT r.fact_id, sum(r.s)::bigint AS s
            FROM aidememo_search_range(p_tenant, p_project, v_names, v_weights, p_k, v_kb,
                                       v_min, p_source) AS r
            GROUP BY r.fact_id ORDER BY 2 DESC, 1 LIMIT p_limit)
        SELECT coalesce(array_agg(top.fact_id ORDER BY top.s DESC, top.fact_id), '{{}}'),
               coalesce(array_agg(top.s ORDER BY top.s DESC, top.fact_id), '{{}}')
            INTO fact_ids, units FROM top;
    END IF;
    -- the hits' facts in the same view, in the hits' order (NULL: no such fact)
    SELECT coalesce(array_agg(r.body ORDER BY u.i), '{{}}') INTO bodies
        FROM unnest(fact_ids) WITH ORDINALITY AS u (f, i)
        LEFT JOIN LATERAL (
            SELECT x.body FROM resources AS x
            WHERE x.tenant_id = p_tenant AND x.project_id = p_project AND x.kind = 'fact'
              AND x.resource_id = u.f
            OFFSET 0) AS r ON true;
END
$fn$"""

# Version 8's two terms: each range read once into a materialized CTE, and the three short
# lists of `ranking` (each term's best by its part alone, the best of the facts holding both)
# taken from those two.
_TWO_TERMS_V8 = """        WITH ra AS MATERIALIZED (
            SELECT * FROM aidememo_search_range(p_tenant, p_project, v_names[1:1],
                                                v_weights[1:1], p_k, v_kb, v_min, p_source)),
        rb AS MATERIALIZED (
            SELECT * FROM aidememo_search_range(p_tenant, p_project, v_names[2:2],
                                                v_weights[2:2], p_k, v_kb, v_min, p_source)),
        a AS (SELECT ra.fact_id, ra.s FROM ra ORDER BY 2 DESC, 1 LIMIT p_limit),
        b AS (SELECT rb.fact_id, rb.s FROM rb ORDER BY 2 DESC, 1 LIMIT p_limit),
        ab AS (SELECT ra.fact_id, ra.s + rb.s AS s FROM ra JOIN rb ON rb.doc_seq = ra.doc_seq
               ORDER BY 2 DESC, 1 LIMIT p_limit),
        top AS (SELECT u.fact_id, max(u.s) AS s
                FROM (SELECT * FROM a UNION ALL SELECT * FROM b UNION ALL SELECT * FROM ab) AS u
                GROUP BY u.fact_id ORDER BY 2 DESC, 1 LIMIT p_limit)
        SELECT coalesce(array_agg(top.fact_id ORDER BY top.s DESC, top.fact_id), '{}'),
               coalesce(array_agg(top.s ORDER BY top.s DESC, top.fact_id), '{}')
            INTO fact_ids, units FROM top;
"""

# Two terms: the two ranges hash-full-joined on doc_seq give every matching fact's score (its
# one part, or the sum of both), and the top is taken from that join, each range read once,
# without a materialized copy or separate sorts (docs/bench-notes.md has its cost).
_TWO_TERMS_V9 = """        WITH top AS (
            SELECT coalesce(ra.fact_id, rb.fact_id) AS fact_id,
                   coalesce(ra.s, 0) + coalesce(rb.s, 0) AS s
            FROM aidememo_search_range(p_tenant, p_project, v_names[1:1], v_weights[1:1], p_k,
                                       v_kb, v_min, p_source) AS ra
            FULL JOIN aidememo_search_range(p_tenant, p_project, v_names[2:2], v_weights[2:2],
                                            p_k, v_kb, v_min, p_source) AS rb
                ON rb.doc_seq = ra.doc_seq
            ORDER BY 2 DESC, 1 LIMIT p_limit)
        SELECT coalesce(array_agg(top.fact_id ORDER BY top.s DESC, top.fact_id), '{}'),
               coalesce(array_agg(top.s ORDER BY top.s DESC, top.fact_id), '{}')
            INTO fact_ids, units FROM top;
"""

V8 = (_SEARCH_RANGE_V8, _SEARCH.format(two_terms=_TWO_TERMS_V8))
V9 = (_SEARCH.format(two_terms=_TWO_TERMS_V9),)
