"""Restricted sessions: a scope allowlist over the memory store (SPEC.md MEM-20).

A session with an allowlist may read, write, export and destroy only memories of the listed
scopes; anything else is refused before the store is touched: `MEMORY_SCOPE_FORBIDDEN`
`{scope}` for a scope outside the list, `MEMORY_SCOPE_REQUIRED` for an operation that would
range over every scope (a list, export, bulk forget or audit without a scope, `all`, the history
of a missing memory). Memories and relations of other scopes are left out of results (a
recall also searching a configured team scope returns only the allowed scopes' rows), and so
are audit events of relations or supersessions that name a memory outside the list.
Over MCP the details of a forbidden memory-id operation are dropped (`redacted`), so a refusal
does not tell which scope the memory is in. The unrestricted CLI stays the administrator
workflow; `ScopePolicy(None)` allows everything.

`ScopeGuard.check(op, arguments, raw)` is the one check list, keyed by the MCP tool's short
name (`remember`, `show`, ...) and its snake_case arguments; `RestrictedSession` applies it to
the Python API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from aidememo.agent_memory import paths
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.policy import SCOPE_MAX, SCOPE_PATTERN

if TYPE_CHECKING:
    from aidememo.agent_memory.store import AgentMemory

GLOBAL_SCOPE = "user:default"

# The tools whose FORBIDDEN refusal drops its details: they name a memory by id, and the
# details would say which scope that memory lives in.
REDACTED_TOOLS = frozenset(
    {
        "memory.confirm_capture",
        "memory.show",
        "memory.challenge",
        "memory.relate",
        "memory.relations",
        "memory.unrelate",
        "memory.update",
        "memory.history",
        "memory.audit",
        "memory.forget",
    }
)


def parse_allowlist(text: str, project_root: str | None = None) -> list[str]:
    """`NUZO_AUTHORIZED_SCOPES`-style text: comma-separated scopes (`project:auto` resolved)."""
    scopes = [part.strip() for part in text.split(",") if part.strip()]
    if not scopes:
        raise AgentMemoryError(
            C.MEMORY_CONFIG_INVALID, "NUZO_AUTHORIZED_SCOPES must not be empty when it is defined."
        )
    for scope in scopes:
        if len(scope) > SCOPE_MAX or not SCOPE_PATTERN.match(scope):
            raise AgentMemoryError(
                C.MEMORY_CONFIG_INVALID,
                "NUZO_AUTHORIZED_SCOPES contains an invalid Nuzo memory scope.",
                {"scope": scope},
            )
    return [paths.resolve_scope(scope, project_root) for scope in scopes]


def session_allowlist(
    env: Mapping[str, str], project_root: str, *, default_mode: str = "administrator"
) -> list[str] | None:
    """The allowlist `NUZO_AUTHORIZATION_MODE` / `NUZO_AUTHORIZED_SCOPES` ask for (None: an
    administrator session); restricted without a list is `project:auto` and `user:default`."""
    mode = env.get("NUZO_AUTHORIZATION_MODE", default_mode)
    if mode not in ("administrator", "restricted"):
        raise AgentMemoryError(
            C.MEMORY_CONFIG_INVALID, "NUZO_AUTHORIZATION_MODE must be administrator or restricted."
        )
    raw = env.get("NUZO_AUTHORIZED_SCOPES")
    if mode == "administrator":
        if raw is not None:
            raise AgentMemoryError(
                C.MEMORY_CONFIG_INVALID,
                "NUZO_AUTHORIZED_SCOPES requires NUZO_AUTHORIZATION_MODE=restricted.",
            )
        return None
    return parse_allowlist(raw if raw is not None else "project:auto,user:default", project_root)


def restrict_defaults(store: AgentMemory, allowed: list[str], *, explicit: str | None) -> None:
    """Fit the store's default scope and recall defaults to a restricted session: a default
    scope outside the allowlist is `MEMORY_CONFIG_INVALID` when it was asked for (`explicit`),
    else the allowlist's first scope; `include_global` is off without `user:default`."""
    if store.scope not in allowed:
        if explicit is not None:
            raise AgentMemoryError(
                C.MEMORY_CONFIG_INVALID,
                "The effective default scope is not included in the restricted authorization"
                " allowlist.",
                {"scope": store.scope},
            )
        store.scope = allowed[0]
    if GLOBAL_SCOPE not in allowed:
        store.include_global = False


class ScopePolicy:
    """An allowlist of scopes; `None` is an administrator (every scope)."""

    def __init__(self, allowed: Iterable[str] | None) -> None:
        self.allowed = None if allowed is None else frozenset(allowed)

    @property
    def restricted(self) -> bool:
        return self.allowed is not None

    def permits(self, scope: str) -> bool:
        return self.allowed is None or scope in self.allowed

    def allow(self, scope: str) -> None:
        if not self.permits(scope):
            raise AgentMemoryError(
                C.MEMORY_SCOPE_FORBIDDEN, "Memory scope is not authorized.", {"scope": scope}
            )

    def require(self, scope: str | None) -> str:
        if scope is None:
            if self.restricted:
                raise AgentMemoryError(
                    C.MEMORY_SCOPE_REQUIRED,
                    "A scope is required for this restricted memory session.",
                )
            return ""
        self.allow(scope)
        return scope


class ScopeGuard:
    """The allowlist checks of each memory operation, over one store."""

    def __init__(self, store: AgentMemory, policy: ScopePolicy, project_root: str) -> None:
        self.store = store
        self.policy = policy
        self.project_root = project_root

    def _scope(self, scope: str | None) -> str | None:
        return None if scope is None else paths.resolve_scope(scope, self.project_root)

    def _memory_scope(self, memory_id: Any) -> str | None:
        if not isinstance(memory_id, str):
            return None
        row = self.store.db.conn.execute(
            "SELECT scope FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        return None if row is None else str(row[0])

    def _allow_memory(self, memory_id: Any) -> None:
        scope = self._memory_scope(memory_id)
        if scope is not None:
            self.policy.allow(scope)

    def check(self, op: str, a: dict[str, Any], raw: Mapping[str, Any]) -> None:
        """Refuse `op` with arguments `a` (validated) / `raw` (as given) outside the allowlist;
        `recall_hook` drops `include_global` instead of failing."""
        p = self.policy
        if not p.restricted:
            return
        default = self.store.scope
        if op in ("remember", "suggest_capture", "confirm_capture", "recall"):
            p.allow(self._scope(a.get("scope")) or default)
        if op == "recall_hook":
            p.allow(self._scope(a.get("project_scope", "project:auto")) or default)
        if op == "recall" and a.get("include_global", self.store.include_global):
            p.allow(GLOBAL_SCOPE)
        if op == "recall_hook" and not p.permits(GLOBAL_SCOPE):
            a["include_global"] = False
        if op == "confirm_capture":
            self._allow_memory(a.get("target_memory_id"))
        if op in ("show", "challenge", "forget", "update"):
            self._allow_memory(a.get("id"))
        if op == "challenge":
            self._allow_memory(a.get("superseded_by_memory_id"))
        if op == "update" and "scope" in a:
            p.allow(self._scope(a["scope"]) or default)
        if op == "relations":
            self._allow_memory(a.get("memory_id"))
        if op == "relate":
            self._allow_memory(a.get("source_memory_id"))
            self._allow_memory(a.get("target_memory_id"))
        if op == "unrelate":
            relation = self.store.db.find_relation(str(a.get("id")))
            if relation is not None:
                self._allow_memory(relation.source_memory_id)
                self._allow_memory(relation.target_memory_id)
        if op == "history":
            scope = self._memory_scope(a.get("id"))
            p.require(scope)
        if op in ("list", "export"):
            p.require(self._scope(raw.get("scope")))
        if op == "forget_many":
            if a.get("all"):
                p.require(None)
            p.require(self._scope(raw.get("scope")))
        if op == "audit":
            scope = self._scope(raw.get("scope"))
            if scope is None:
                scope = self._memory_scope(raw.get("memory_id"))
            p.require(scope)
        if op == "import":
            self._check_import(a)

    def _check_import(self, a: dict[str, Any]) -> None:
        override = self._scope(a.get("scope"))
        if override is not None:
            self.policy.allow(override)
            return
        memories = a.get("document", {}).get("memories", [])
        for item in memories if isinstance(memories, list) else []:
            scope = item.get("scope") if isinstance(item, dict) else None
            self.policy.allow(scope if isinstance(scope, str) else self.store.scope)

    def doctor_counts(self) -> tuple[int, int, int, int]:
        """Memories, active memories, relations and events; a restricted session counts only
        its scopes' (relations with both ends inside, events of their memories)."""
        conn = self.store.db.conn
        if self.policy.allowed is None:
            row = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(archived_at IS NULL), 0),"
                " (SELECT COUNT(*) FROM memory_relations),"
                " (SELECT COUNT(*) FROM memory_events) FROM memories"
            ).fetchone()
        else:
            scopes = sorted(self.policy.allowed)
            inside = f"scope IN ({','.join('?' * len(scopes))})"
            mine = f"SELECT id FROM memories WHERE {inside}"
            row = conn.execute(
                f"SELECT (SELECT COUNT(*) FROM memories WHERE {inside}),"
                f" (SELECT COUNT(*) FROM memories WHERE {inside} AND archived_at IS NULL),"
                f" (SELECT COUNT(*) FROM memory_relations WHERE source_memory_id IN ({mine})"
                f" AND target_memory_id IN ({mine})),"
                f" (SELECT COUNT(*) FROM memory_events WHERE memory_id IN ({mine}))",
                scopes * 5,
            ).fetchone()
        return int(row[0]), int(row[1]), int(row[2]), int(row[3])

    def visible(self, result: Any) -> Any:
        """`result` without relations whose other end lies outside the allowlist."""
        if not self.policy.restricted:
            return result
        if isinstance(result, dict):
            out = {}
            for key, value in result.items():
                kept = value
                if key == "relations" and isinstance(value, list):
                    kept = [r for r in value if self.relation_visible(r)]
                if key in ("results", "memories") and isinstance(value, list):
                    # e.g. a configured team scope recall also searches (MEM-6)
                    kept = [m for m in value if self._record_visible(m)]
                if key == "events" and isinstance(value, list):
                    kept = [e for e in value if self.event_visible(e)]
                out[key] = self.visible(kept)
            return out
        if isinstance(result, list):
            return [self.visible(item) for item in result]
        return result

    def event_visible(self, event: Any) -> bool:
        """False for a relation event (or a supersession) naming a memory outside the allowlist,
        now or, for relation events, by the endpoint scopes the event recorded."""
        if not isinstance(event, dict) or not isinstance(event.get("payload"), dict):
            return True
        kind, payload = event.get("event_type"), event["payload"]
        if kind in ("memory.relation.created", "memory.relation.deleted"):
            ends = [
                (payload.get("sourceMemoryId"), payload.get("sourceScope")),
                (payload.get("targetMemoryId"), payload.get("targetScope")),
            ]
            return all(
                isinstance(end, str)
                and isinstance(then, str)
                and self.policy.permits(then)
                and self._now_permitted(end)
                for end, then in ends
            )
        if kind == "memory.challenged" and (
            payload.get("outcome") == "superseded"
            or isinstance(payload.get("supersededByMemoryId"), str)
            or isinstance(payload.get("relationId"), str)
        ):
            pair = [event.get("memory_id"), payload.get("supersededByMemoryId")]
            return all(isinstance(end, str) and self._now_permitted(end) for end in pair)
        return True

    def _now_permitted(self, memory_id: str) -> bool:
        scope = self._memory_scope(memory_id)
        return scope is None or self.policy.permits(scope)

    def _record_visible(self, record: Any) -> bool:
        scope = record.get("scope") if isinstance(record, dict) else None
        return not isinstance(scope, str) or self.policy.permits(scope)

    def relation_visible(self, relation: Any) -> bool:
        if not isinstance(relation, dict):
            return True
        for key in ("source_memory_id", "target_memory_id"):
            scope = self._memory_scope(relation.get(key))
            if scope is not None and not self.policy.permits(scope):
                return False
        return True


class RestrictedSession:
    """The Python API of one store under an allowlist: each call is checked by `ScopeGuard`
    exactly as the MCP tool of the same name is, then runs on the store."""

    def __init__(
        self, store: AgentMemory, allowed: Iterable[str], project_root: str | None = None
    ) -> None:
        self.store = store
        self.guard = ScopeGuard(store, ScopePolicy(allowed), project_root or ".")

    def _check(self, op: str, **args: Any) -> None:
        given = {k: v for k, v in args.items() if v is not None}
        self.guard.check(op, given, given)

    def remember(self, content: str, **kw: Any) -> Any:
        self._check("remember", scope=kw.get("scope"))
        return self.store.remember(content, **kw)

    def recall(self, query: str, **kw: Any) -> Any:
        self._check("recall", scope=kw.get("scope"), include_global=kw.get("include_global"))
        found = self.store.recall(query, **kw)
        return [r for r in found if self.guard.policy.permits(r.memory.scope)]

    def list(self, **kw: Any) -> Any:
        self._check("list", scope=kw.get("scope"))
        return self.store.list(**kw)

    def review_relations(self, **kw: Any) -> Any:
        """The governance review of one allowed scope (checked as `list` of that scope)."""
        from aidememo.agent_memory.governance import check_limit, review_relations

        check_limit(kw.get("limit"))
        self._check("list", scope=kw.get("scope") or self.store.scope)
        return review_relations(self.store, **kw)

    def show(self, memory_id: str, **kw: Any) -> Any:
        self._check("show", id=memory_id)
        shown = self.store.show(memory_id, **kw)
        return {
            **shown,
            "relations": [r for r in shown["relations"] if self._relation_kept(r)],
            "events": self._events_kept(shown["events"]),
        }

    def _relation_kept(self, relation: Any) -> bool:
        return self.guard.relation_visible(relation.to_json())

    def _events_kept(self, events: Any) -> Any:
        """The events MCP would show: none naming a memory outside the allowlist (MEM-20)."""
        return [e for e in events if self.guard.event_visible(e.to_json())]

    def update(self, memory_id: str, **kw: Any) -> Any:
        self._check("update", id=memory_id, **({"scope": kw["scope"]} if "scope" in kw else {}))
        return self.store.update(memory_id, **kw)

    def forget(self, memory_id: str, **kw: Any) -> Any:
        self._check("forget", id=memory_id)
        return self.store.forget(memory_id, **kw)

    def forget_many(self, **kw: Any) -> Any:
        self._check("forget_many", scope=kw.get("scope"), all=kw.get("all") or None)
        return self.store.forget_many(**kw)

    def relate(self, source: str, target: str, **kw: Any) -> Any:
        self._check("relate", source_memory_id=source, target_memory_id=target)
        return self.store.relate(source, target, **kw)

    def history(self, memory_id: str, **kw: Any) -> Any:
        self._check("history", id=memory_id)
        return self._events_kept(self.store.history(memory_id, **kw))

    def audit(self, **kw: Any) -> Any:
        self._check("audit", scope=kw.get("scope"), memory_id=kw.get("memory_id"))
        return self._events_kept(self.store.audit(**kw))

    def export(self, **kw: Any) -> Any:
        self._check("export", scope=kw.get("scope"))
        return self.store.export(**kw)

    def challenge(self, memory_id: str, **kw: Any) -> Any:
        self._check("challenge", id=memory_id, superseded_by_memory_id=kw.get("superseded_by"))
        return self.store.challenge(memory_id, **kw)

    def relations(self, memory_id: str, **kw: Any) -> Any:
        self._check("relations", memory_id=memory_id)
        found = self.store.relations(memory_id, **kw)
        return [r for r in found if self.guard.relation_visible(r.to_json())]

    def unrelate(self, relation_id: str, **kw: Any) -> Any:
        self._check("unrelate", id=relation_id)
        return self.store.unrelate(relation_id, **kw)

    def suggest_capture(self, content: str, **kw: Any) -> Any:
        self._check("suggest_capture", scope=kw.get("scope"))
        return self.store.suggest_capture(content, **kw)

    def confirm_capture(self, content: str, **kw: Any) -> Any:
        self._check(
            "confirm_capture", scope=kw.get("scope"), target_memory_id=kw.get("target_memory_id")
        )
        return self.store.confirm_capture(content, **kw)

    def import_document(self, document: Any, **kw: Any) -> Any:
        self._check("import", document=document, scope=kw.get("scope"))
        return self.store.import_document(document, **kw)
