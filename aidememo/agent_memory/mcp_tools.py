"""The memory store as 19 MCP tools, without the MCP SDK (SPEC.md MEM-13).

A stdio MCP server mounts a `MemoryToolProvider`: `tools()` lists the definitions (names,
descriptions, annotations, input schemas), `call(name, arguments)` validates the arguments, runs
the tool and returns its result object, and `call_result(name, arguments)` wraps either the result
or a refusal as an MCP `CallToolResult` (one text item holding pretty JSON, `isError` set for a
refusal carrying `{code, message, details?}`). Arguments that fail the input schema raise
`ToolInputError`, the server's invalid-params error. Every write is attributed to the audit actor
`nuzo:mcp`; the `actor` inputs are accepted and ignored, so a caller cannot spoof another actor.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from aidememo.agent_memory import paths
from aidememo.agent_memory.capture import capture_json
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.jstext import collapse_spaces
from aidememo.agent_memory.mcp_schemas import ToolInputError, tool_definitions, validate
from aidememo.agent_memory.model import UNSET, Memory, RecallResult, Relation
from aidememo.agent_memory.open_checks import StoreDamage, damaged
from aidememo.agent_memory.reads import encode_cursor
from aidememo.agent_memory.relations import relations_batch
from aidememo.agent_memory.render import untrusted_json
from aidememo.agent_memory.schema import SCHEMA_VERSION, user_version
from aidememo.agent_memory.scope_policy import REDACTED_TOOLS, ScopeGuard, ScopePolicy
from aidememo.agent_memory.store import AgentMemory
from aidememo.agent_memory.tiers import TeamFact, TeamTier, tiered_recall

__all__ = ["MemoryToolProvider", "ToolInputError"]

ACTOR = "nuzo:mcp"
_GOVERNANCE = ("confidence_state", "provenance", "review_after", "expires_at")


def _record(memory: Memory) -> dict[str, Any]:
    return memory.to_capture_json()


def _list_cursor(memory: Memory) -> str:
    return encode_cursor(
        {"updated_at": memory.updated_at, "created_at": memory.created_at, "id": memory.id}
    )


class MemoryToolProvider:
    """The memory tools over one open store."""

    def __init__(
        self,
        store: AgentMemory,
        *,
        project_root: str | None = None,
        allowed_scopes: list[str] | None = None,
    ) -> None:
        self.store = store
        self.project_root = project_root or os.getcwd()
        self.project_scope = paths.project_scope(self.project_root)
        # A restricted session's allowlist (MEM-20); None is an administrator.
        self.guard = ScopeGuard(store, ScopePolicy(allowed_scopes), self.project_root)
        # Recall's further tiers (MEM-24), set by a launcher inside a project.
        self.user_store: AgentMemory | None = None
        self.team: TeamTier | None = None
        self._tools = {
            tool["name"]: tool
            for tool in tool_definitions(store.scope, store.recall_limit, store.include_global)
        }
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            name: getattr(self, "_" + name.split(".", 1)[1]) for name in self._tools
        }

    def tools(self) -> list[dict[str, Any]]:
        """Every tool definition, in Nuzo's order."""
        return list(self._tools.values())

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run one tool; raises `ToolInputError` or `AgentMemoryError`."""
        tool = self._tools.get(name)
        if tool is None:
            raise ToolInputError(f"unknown tool {name!r}")
        raw = {} if arguments is None else arguments
        args = validate(tool["inputSchema"], raw)
        self.guard.check(name.split(".", 1)[1], args, raw)
        result: dict[str, Any] = self.guard.visible(self._handlers[name](args))
        return result

    def refusal(self, name: str, error: AgentMemoryError) -> dict[str, Any]:
        """A refusal's `{code, message, details}`; a forbidden scope's details are dropped by
        the tools that name a memory by id (MEM-20)."""
        out: dict[str, Any] = {"code": error.code.value, "message": error.message}
        if not (error.code is C.MEMORY_SCOPE_FORBIDDEN and name in REDACTED_TOOLS):
            out["details"] = error.details  # `{}` when there are none, as Nuzo answers
        return out

    def call_result(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """`call` as an MCP `CallToolResult`: a refusal becomes `isError: true`."""
        try:
            result, failed = self.call(name, arguments), False
        except AgentMemoryError as error:
            result, failed = self.refusal(name, error), True
        except StoreDamage as error:  # the file itself is damaged (MEM-1)
            result, failed = self.refusal(name, damaged(error, self.store.db.path)), True
        return {"content": [{"type": "text", "text": untrusted_json(result)}], "isError": failed}

    # -- helpers ---------------------------------------------------------------------------

    def _scope(self, scope: str | None) -> str | None:
        if scope == "project:auto":
            return self.project_scope
        return scope

    def _governance(self, args: dict[str, Any]) -> dict[str, Any]:
        return {name: args[name] for name in _GOVERNANCE if name in args}

    def _with_relations(self, memories: list[Memory]) -> dict[str, list[dict[str, Any]]]:
        batch = relations_batch(self.store, [m.id for m in memories])
        return {mid: [r.to_json(mid) for r in rels] for mid, rels in batch.items()}

    def _recall_rows(self, results: list[RecallResult]) -> list[dict[str, Any]]:
        relations = self._with_relations([r.memory for r in results])
        return [
            {
                "id": r.memory.id,
                "revision": r.memory.revision,
                "content": r.memory.content,
                "kind": r.memory.kind,
                "scope": r.memory.scope,
                "tags": r.memory.tags,
                "confidence_state": r.memory.confidence_state,
                "review_after": r.memory.review_after,
                "expires_at": r.memory.expires_at,
                "score": r.score,
                "reason": r.reason,
                "relations": relations.get(r.memory.id, []),
            }
            for r in results
        ]

    @staticmethod
    def _relation(relation: Relation | None, perspective: str | None) -> Any:
        return None if relation is None else relation.to_json(perspective)

    # -- tools -----------------------------------------------------------------------------

    def _remember(self, a: dict[str, Any]) -> dict[str, Any]:
        memory = self.store.remember(
            a["content"],
            kind=a["kind"],
            scope=self._scope(a["scope"]),
            tags=a["tags"],
            source=a["source"],
            confidence=a.get("confidence"),
            actor=ACTOR,
            **({"confidence_state": "user_confirmed"} | self._governance(a)),
        )
        return {"id": memory.id, "created": True, "warnings": []}

    def _recall(self, a: dict[str, Any]) -> dict[str, Any]:
        if self.user_store is not None or self.team is not None:
            return self._tiered_recall(a)
        response = self.store.recall_detailed(
            a["query"],
            scope=self._scope(a["scope"]),
            limit=a["limit"],
            include_global=a["include_global"],
            retrieval_mode=a["retrieval_mode"],
            semantic_fallback=a.get("semantic_fallback"),
        )
        out: dict[str, Any] = {"results": self._recall_rows(response["results"])}
        if a["retrieval_mode"] != "fts":
            out["retrieval"] = self._retrieval(response["diagnostics"])
        return out

    @staticmethod
    def _retrieval(d: dict[str, Any]) -> dict[str, Any]:
        return {
            "requested_mode": d["requestedMode"],
            "effective_mode": d["effectiveMode"],
            "semantic_fallback_code": d["semanticFallbackCode"],
        }

    def _tiered_recall(self, a: dict[str, Any]) -> dict[str, Any]:
        """`memory.recall` across the project, user and team tiers (MEM-24): each row names
        its `tier`; `tiers` reports each tier; the session's allowlist holds in every tier."""
        answer = tiered_recall(
            a["query"],
            project=self.store,
            user=self.user_store,
            team=self.team,
            scope=self._scope(a["scope"]),
            limit=a["limit"],
            include_global=a["include_global"],
            retrieval_mode=a["retrieval_mode"],
            semantic_fallback=a.get("semantic_fallback"),
            policy=self.guard.policy,
        )
        rows: list[dict[str, Any]] = []
        for result in answer.results:
            if isinstance(result, TeamFact):
                rows.append(
                    {
                        "id": result.fact_id,
                        "content": result.content,
                        "scope": result.scope,
                        "score": result.score,
                        "reason": "Team search.",
                        "tier": "team",
                    }
                )
            else:
                rows += [row | {"tier": result.tier} for row in self._recall_rows([result])]
        out: dict[str, Any] = {
            "results": rows,
            "tiers": [report.to_json() for report in answer.tiers],
        }
        if a["retrieval_mode"] != "fts":
            out["retrieval"] = self._retrieval(answer.diagnostics)
        return out

    def _recall_hook(self, a: dict[str, Any]) -> dict[str, Any]:
        query = collapse_spaces(a["task_context"])[:500]
        scope = self._scope(a.get("project_scope", "project:auto")) or self.project_scope
        # A restricted session without `user:default` recalls the project only (MEM-20).
        include = bool(a.get("include_global", True))
        results = self.store.recall(query, scope=scope, limit=a["limit"], include_global=include)
        return {
            "mode": "read_only",
            "memory_writes": False,
            "capture_suggestions": False,
            "query": query,
            "scope": scope,
            "include_global": include,
            "limit": a["limit"],
            "results": self._recall_rows(results),
        }

    def _draft(self, a: dict[str, Any]) -> dict[str, Any]:
        """A capture's draft fields from the arguments: kind, reason, scope, tags, source,
        confidence."""
        return {
            "kind": a["kind"],
            "reason": a["reason"],
            "scope": self._scope(a["scope"]),
            "tags": a["tags"],
            "source": a["source"],
            "confidence": a.get("confidence"),
        }

    def _suggest_capture(self, a: dict[str, Any]) -> dict[str, Any]:
        result = self.store.suggest_capture(
            a["content"],
            **self._draft(a),
            relationship_mode=a.get("relationship_mode", "exact"),
            **({"confidence_state": "inferred"} | self._governance(a)),
        )
        out: dict[str, Any] = capture_json(result)
        return out

    def _confirm_capture(self, a: dict[str, Any]) -> dict[str, Any]:
        result = self.store.confirm_capture(
            a["content"],
            decision=a["decision"],
            **self._draft(a),
            confirm=a["confirm"],
            target_memory_id=a.get("target_memory_id"),
            expected_revision=a.get("expected_revision"),
            actor=ACTOR,
            **{name: a.get(name, UNSET) for name in _GOVERNANCE},
        )
        out: dict[str, Any] = capture_json(result)
        return out

    def _list(self, a: dict[str, Any]) -> dict[str, Any]:
        page, tail = self._page(a, needs_review=a["needs_review"])
        relations = self._with_relations(page)
        memories = [_record(m) | {"relations": relations.get(m.id, [])} for m in page]
        return {"memories": memories} | tail

    def _page(self, a: dict[str, Any], **more: Any) -> tuple[list[Memory], dict[str, Any]]:
        """One page of the memories `a` selects (scope, tags, archived, limit, cursor), and
        the answer's paging fields: `next_cursor`, `limit`, `truncated`."""
        scope = self._scope(a.get("scope"))
        rows = self.store.list(
            scope=scope,
            all_scopes=scope is None,
            tags=a["tags"],
            include_archived=a["include_archived"],
            limit=a["limit"] + 1,
            cursor=a.get("cursor"),
            **more,
        )
        page, truncated = rows[: a["limit"]], len(rows) > a["limit"]
        tail = {
            "next_cursor": _list_cursor(page[-1]) if truncated and page else None,
            "limit": a["limit"],
            "truncated": truncated,
        }
        return page, tail

    def _show(self, a: dict[str, Any]) -> dict[str, Any]:
        shown = self.store.show(a["id"], history_limit=a["history_limit"])
        memory: Memory = shown["memory"]
        relations = [r.to_json(memory.id) for r in shown["relations"]]
        return {
            "memory": _record(memory) | {"relations": relations},
            "relations": relations,
            "events": [e.to_json() for e in shown["events"]],
        }

    def _challenge(self, a: dict[str, Any]) -> dict[str, Any]:
        memory, relation = self.store.challenge(
            a["id"],
            outcome=a["outcome"],
            reason=a["reason"],
            superseded_by=a.get("superseded_by_memory_id"),
            expected_revision=a.get("expected_revision"),
            actor=ACTOR,
        )
        return {
            "memory": _record(memory),
            "outcome": a["outcome"],
            "relation": self._relation(relation, memory.id),
        }

    def _relate(self, a: dict[str, Any]) -> dict[str, Any]:
        relation = self.store.relate(
            a["source_memory_id"],
            a["target_memory_id"],
            relation=a["relation"],
            reason=a.get("reason"),
            actor=ACTOR,
        )
        return {"relation": self._relation(relation, None)}

    def _relations(self, a: dict[str, Any]) -> dict[str, Any]:
        found = self.store.relations(
            a["memory_id"], include_reverse=a["include_reverse"], limit=a["limit"]
        )
        return {"relations": [r.to_json(a["memory_id"]) for r in found]}

    def _unrelate(self, a: dict[str, Any]) -> dict[str, Any]:
        self.store.unrelate(a["id"], reason=a.get("reason"), actor=ACTOR)
        return {"id": a["id"], "removed": True}

    def _update(self, a: dict[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = {
            k: a[k] for k in ("content", "kind", "tags", "confidence") if k in a
        }
        if "scope" in a:
            fields["scope"] = self._scope(a["scope"])
        memory = self.store.update(
            a["id"],
            expected_revision=a.get("expected_revision"),
            actor=ACTOR,
            **fields,
            **self._governance(a),
        )
        return {"memory": _record(memory)}

    def _history(self, a: dict[str, Any]) -> dict[str, Any]:
        events = self.store.history(a["id"], limit=a["limit"] + 1, cursor=a.get("cursor"))
        page, more = events[: a["limit"]], len(events) > a["limit"]
        cursor = None
        if more and page:
            cursor = encode_cursor({"created_at": page[-1].created_at, "id": page[-1].id})
        return {
            "events": [e.to_json() for e in page],
            "next_cursor": cursor,
            "limit": a["limit"],
            "truncated": more,
        }

    def _audit(self, a: dict[str, Any]) -> dict[str, Any]:
        events = self.store.audit(
            memory_id=a.get("memory_id"),
            event_types=a["event_type"],
            actor=a.get("actor"),
            scope=self._scope(a.get("scope")),
            since=a.get("since"),
            until=a.get("until"),
            limit=a["limit"],
        )
        return {"events": [e.to_json() for e in events]}

    def _forget(self, a: dict[str, Any]) -> dict[str, Any]:
        self.store.forget(
            a["id"],
            mode=a["mode"],
            confirm=a["confirm"],
            reason=a.get("reason"),
            expected_revision=a.get("expected_revision"),
            actor=ACTOR,
        )
        return {"id": a["id"], "forgotten": True, "mode": a["mode"]}

    def _forget_many(self, a: dict[str, Any]) -> dict[str, Any]:
        result = self.store.forget_many(
            scope=self._scope(a.get("scope")),
            tags=a["tags"],
            all=a["all"],
            mode=a["mode"],
            confirm=a["confirm"],
            dry_run=a["dry_run"],
            reason=a.get("reason"),
            actor=ACTOR,
        )
        return {
            "matched": result["matched"],
            "affected": result["affected"],
            "mode": result["mode"],
            "dry_run": result["dryRun"],
            "ids": result["ids"],
        }

    def _export(self, a: dict[str, Any]) -> dict[str, Any]:
        _, tail = self._page(a)
        scope = self._scope(a.get("scope"))
        document = self.store.export(
            scope=scope,
            all_scopes=scope is None,
            tags=a["tags"],
            include_archived=a["include_archived"],
            limit=a["limit"],
            cursor=a.get("cursor"),
            actor=ACTOR,
        )
        return {"document": document} | tail

    def _import(self, a: dict[str, Any]) -> dict[str, Any]:
        result = self.store.import_document(
            a["document"], scope=self._scope(a.get("scope")), dry_run=a["dry_run"], actor=ACTOR
        )
        return {
            "imported": result["imported"],
            "skipped": result["skipped"],
            "dry_run": result["dryRun"],
        }

    def _doctor(self, a: dict[str, Any]) -> dict[str, Any]:
        conn = self.store.db.conn
        version = user_version(conn)
        counts = self.guard.doctor_counts()
        status = (
            "current"
            if version == SCHEMA_VERSION
            else ("newer" if version > SCHEMA_VERSION else "outdated")
        )
        integrity = conn.execute("PRAGMA quick_check").fetchone()[0]
        return {
            "ok": integrity == "ok",
            "network": "disabled",
            "store": {"exists": True, "writable": not self.store.db.readonly},
            "config": {
                "default_scope": self.store.scope,
                "include_global": self.store.include_global,
            },
            "authorization": {
                "mode": "restricted" if self.guard.policy.restricted else "administrator"
            },
            "schema": {
                "status": status,
                "current_version": version,
                "supported_version": SCHEMA_VERSION,
            },
            "counts": {
                "memories": counts[0],
                "active_memories": counts[1],
                "relations": counts[2],
                "events": counts[3],
            },
            "integrity": {"status": "ok" if integrity == "ok" else "failed"},
            "file_safety": {"status": "not_performed"},
            "secret_scan": {"status": "not_performed"},
            "lifecycle": {"read_only": True},
            "tools": sorted(self._tools),
            "warnings": [],
        }


def open_provider(
    store_path: str, *, scope: str | None = None, restricted_by_env: bool = False
) -> MemoryToolProvider:
    """A provider over the store at `store_path` (created 0600 when missing), Nuzo's default
    scope rules applied (`--scope` > `NUZO_MEMORY_SCOPE` > config > `user:default`);
    `restricted_by_env`: the session's allowlist from `NUZO_AUTHORIZATION_MODE` and
    `NUZO_AUTHORIZED_SCOPES` (MEM-20)."""
    runtime = paths.resolve_runtime(store=store_path, scope=scope)
    store = AgentMemory.open_runtime(runtime)
    if store.db.readonly:  # pragma: no cover - open() is never read-only
        raise AgentMemoryError(C.MEMORY_STORE_PATH_UNSAFE, "Store is read-only.")
    allowed = None
    if restricted_by_env:
        from aidememo.agent_memory.scope_policy import restrict_defaults, session_allowlist

        try:
            allowed = session_allowlist(os.environ, runtime.project_root)
            if allowed is not None:
                restrict_defaults(
                    store, allowed, explicit=scope or os.environ.get("NUZO_MEMORY_SCOPE")
                )
        except AgentMemoryError:
            store.close()
            raise
    return MemoryToolProvider(store, project_root=runtime.project_root, allowed_scopes=allowed)
