"""Query-time semantic search at the edge (SPEC.md SEM-10): the core's `VectorSearch` port over
Workers AI and Vectorize, which can only be awaited, under the core's synchronous searches.

The project object binds one `EdgeVectors` to its app and serves a request in passes, as it
does for the MCP body tools (`durable_objects.mcp_bodies`):
- `embed_query` hands the query text on unchanged (the "vector" here is the text: the object
  embeds it between passes, and only once the core has decided the index can answer, so a
  lexical fallback costs no Workers AI call);
- `nearest` answers from what this request fetched; the first time it records what it
  wants (the project, the query, k and the source filter) and refuses with
  `semantic_unavailable`, which the object discards;
- `fetch` then makes exactly one Workers AI call (the query's embedding) and one Vectorize
  query (topK = min(k, 100), no values, no metadata; `source_id` as a metadata filter),
  maps the hits' vector ids to facts through the ledger (ids it no longer holds are dropped),
  and the object serves the request again, which answers. The core re-reads every hit
  canonically, so a deleted fact never surfaces and a replaced one shows its current text.
`reset` forgets a request's fetches once it is answered.
"""

from __future__ import annotations

from typing import Any

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.model import Scope
from aidememo.domain.semantic_index import IndexState, NearestQuery
from aidememo.ports import ReadTx
from durable_objects.vectors import FINGERPRINT, TOP_K_MAX, Ledger, call, embed, namespace, unit

Wanted = tuple[Scope, str, int, str | None]


class EdgeVectors:
    """`VectorSearch` for one project object (see the module docstring)."""

    fingerprint = FINGERPRINT

    def __init__(self, ledger: Ledger, ai: Any, index: Any) -> None:
        self.ledger = ledger
        self.ai = ai
        self.index = index
        self.found: dict[tuple[str, int, str | None], list[tuple[str, float]]] = {}
        self.wanted: Wanted | None = None

    def embed_query(self, text: str) -> bytes:
        return text.encode("utf-8")

    def nearest(
        self, tx: ReadTx, scope: Scope, state: IndexState, want: NearestQuery
    ) -> list[tuple[str, float]]:
        key = (want.query.decode("utf-8"), min(want.k, TOP_K_MAX), want.source_id)
        hits = self.found.get(key)
        if hits is None:
            self.wanted = (scope, *key)
            raise fail(ErrorCode.SEMANTIC_UNAVAILABLE, "the query is embedded at the edge first")
        return hits[: want.k]

    async def fetch(self) -> bool:
        """Embed and query what the last pass wanted; True to serve the request again."""
        wanted, self.wanted = self.wanted, None
        if wanted is None:
            return False
        scope, text, k, source_id = wanted
        (values,) = await embed(self.ai, [text])
        options: dict[str, Any] = {
            "topK": k,
            "namespace": namespace(scope),
            "returnValues": False,
            "returnMetadata": "none",
        }
        if source_id is not None:
            options["filter"] = {"source_id": source_id}
        answer = await call("query", self.index.query, unit(values), options)
        matches = answer.get("matches") if isinstance(answer, dict) else None
        scored = [(str(m["id"]), float(m["score"])) for m in matches or [] if isinstance(m, dict)]
        facts = self.ledger.facts([vid for vid, _ in scored])
        hits = [(facts[vid], score) for vid, score in scored if vid in facts]
        hits.sort(key=lambda hit: (-hit[1], hit[0]))
        self.found[(text, k, source_id)] = hits
        return True

    def reset(self) -> None:
        """Forget this request's fetches."""
        self.found.clear()
        self.wanted = None
