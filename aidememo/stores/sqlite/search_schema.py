"""Version 7 of the SQLite schema: the project-scoped lexical index on FTS5 (SPEC.md SRCH-4).

Version 5 kept one row per (project, term, fact) in a table ordered by term, so every fact's
commit dirtied a page per distinct term it held (and the document frequencies' pages), most of
a write's cost (docs/bench-notes.md). FTS5 writes each transaction's terms as one new segment
and merges segments incrementally, so a commit writes a few pages whatever its terms.

The layout (`aidememo.stores.sqlite.search` reads and writes it):

- `fact_search` stays: one row per fact, its `doc_seq`, length in terms and terms (replacing or
  unindexing a fact starts from it).
- `fact_search_stats` gains `fts_key`, a number of the project's own, unique in the database
  (a new project takes the next one).
- `fact_search_fts`, an FTS5 table without positions whose content is `fact_search_text`: a
  fact's row (rowid `fts_key << 32 | doc_seq`) holds one token per distinct indexable term,
  `k<fts_key>·<term>·<tf>`. The project prefix keeps every lookup inside the project; the
  count makes the term frequency part of the token, so a term's postings are the union of its
  few tokens and a term's document frequency is the sum of their document counts. Terms are
  runs of letters and digits (SRCH-2), so the middle dot never occurs inside one, and the
  `ascii` tokenizer keeps every token whole (all non-ASCII characters are token characters,
  ASCII terms are already lower case).
- `fact_search_vocab`, the `fts5vocab` 'row' view of it: (token, documents, occurrences).
- `fact_search_docs`: the fact id, source and length of each indexed fact, by the same rowid
  (small rows: a search reads one per candidate).
- `fact_search_text`: each fact's token text, by the same rowid. The FTS5 table reads its text
  from there, so it can be scanned and dumped, and a fact's tokens are removed with the text
  they were indexed with.

The migration rebuilds all of it from `fact_search` inside its transaction.
"""

from __future__ import annotations

from aidememo.domain.ranking import MAX_TERM_BYTES

KEY_SHIFT = 32
"""A fact's FTS rowid is its project's `fts_key` shifted left this far, or'ed with its doc_seq."""
SEP = "\u00b7"
"""Separates the project key, the term and the term frequency inside a token."""
FACTS = (
    "fact_search AS d JOIN fact_search_stats AS s "
    "ON s.tenant_id = d.tenant_id AND s.project_id = d.project_id"
)
"""The facts' search rows `d`, each with its project's statistics `s` (and so its key)."""
ROWID = f"(s.fts_key << {KEY_SHIFT}) | d.doc_seq"
"""A fact's FTS5 rowid, over `FACTS`."""


def tokens_of(where: str) -> str:
    """A select of (id, t), rowid and token text, for the facts of `fact_search AS d` that `where`
    keeps, built exactly as `aidememo.stores.sqlite.search.token_text` builds a fact's text
    (the distinct indexable terms with their counts; a fact without any has no row)."""
    return f"""SELECT id, group_concat(tok, ' ') AS t FROM (
        SELECT {ROWID} AS id,
               'k' || s.fts_key || '{SEP}' || j.value || '{SEP}' || count(*) AS tok
        FROM {FACTS}, json_each('["' || replace(d.terms, ' ', '","') || '"]') AS j
        WHERE d.terms <> '' AND length(CAST(j.value AS BLOB)) <= {MAX_TERM_BYTES} AND {where}
        GROUP BY d.tenant_id, d.project_id, d.doc_seq, j.value)
    GROUP BY id"""


# Idempotent, so it rebuilds whatever index it finds: a database written by this code and
# recorded as an older version (as the migration tests make them) takes it again.
V7 = (
    """CREATE TABLE fact_search_stats_next (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        docs INTEGER NOT NULL CHECK (docs >= 0),
        terms INTEGER NOT NULL CHECK (terms >= 0),
        last_doc INTEGER NOT NULL CHECK (last_doc >= 0),
        fts_key INTEGER NOT NULL UNIQUE CHECK (fts_key > 0),
        PRIMARY KEY (tenant_id, project_id)
    ) STRICT, WITHOUT ROWID""",
    """INSERT INTO fact_search_stats_next
        SELECT tenant_id, project_id, docs, terms, last_doc,
               row_number() OVER (ORDER BY tenant_id, project_id)
        FROM fact_search_stats""",
    "DROP TABLE fact_search_stats",
    "ALTER TABLE fact_search_stats_next RENAME TO fact_search_stats",
    "DROP TABLE IF EXISTS fact_search_vocab",
    "DROP TABLE IF EXISTS fact_search_fts",
    "DROP TABLE IF EXISTS fact_search_docs",
    "DROP TABLE IF EXISTS fact_search_text",
    """CREATE TABLE fact_search_docs (
        id INTEGER PRIMARY KEY,
        fact_id TEXT NOT NULL,
        source_id TEXT NOT NULL,
        n_terms INTEGER NOT NULL CHECK (n_terms >= 0)
    ) STRICT""",
    "CREATE TABLE fact_search_text (id INTEGER PRIMARY KEY, t TEXT NOT NULL) STRICT",
    """CREATE VIRTUAL TABLE fact_search_fts USING fts5 (
        t, content = 'fact_search_text', content_rowid = 'id', columnsize = 0, detail = none,
        tokenize = 'ascii')""",
    "CREATE VIRTUAL TABLE fact_search_vocab USING fts5vocab (fact_search_fts, 'row')",
    f"""INSERT INTO fact_search_docs (id, fact_id, source_id, n_terms)
        SELECT {ROWID}, d.fact_id, d.source_id, d.n_terms FROM {FACTS}""",
    f"""INSERT INTO fact_search_text (id, t)
        SELECT e.id, coalesce(k.t, '') FROM fact_search_docs AS e
        LEFT JOIN ({tokens_of("true")}) AS k ON k.id = e.id""",
    "INSERT INTO fact_search_fts (fact_search_fts) VALUES ('rebuild')",
    "DROP TABLE IF EXISTS fact_search_postings",
    "DROP TABLE IF EXISTS fact_search_terms",
)
