"""A durable outbox of commands that could not be delivered, in a SQLite file (SPEC.md OUTBOX-1..6).

An item is one command exactly as it was first sent: its path and body bytes (the ids, the
command id among them, fixed before the first send, CLIENT-3), the resource it creates, its
base revision (what the resource's revision had to be: 0 for a create), the binding of the
profile that queued it (URL, tenant, project, actor), and the intent key that recognises the
same operation run again. A digest (`stable_id`, ID-4's length framing, prefix
`outbox_item`) over binding, plan and request is kept beside them; `check` recomputes it, so
an item whose profile, payload or plan changed after it was queued is refused, never sent.

Nothing here sends anything by itself: `aidememo outbox publish` does, in queue order, with
each item's original bytes (so the server replays a command it had already applied, CMD-3,
and the item is `recovered`). Separate processes share one file; SQLite's locking orders
their writes. The file and its folder are created 0600 and 0700 (`aidememo.client.private_file`).
"""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple

from aidememo.client.private_file import PrivateFile
from aidememo.domain.command_ids import stable_id

QUEUED = "queued"
CONFLICT = "conflict"
FAILED = "failed"

ITEM_PREFIX = "outbox_item"
INTENT_PREFIX = "outbox_intent"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS items ("
    " item INTEGER PRIMARY KEY AUTOINCREMENT,"
    " command TEXT NOT NULL,"
    " intent TEXT NOT NULL,"
    " kind TEXT NOT NULL,"
    " resource_id TEXT NOT NULL,"
    " command_id TEXT NOT NULL,"
    " base_revision INTEGER NOT NULL,"
    " binding TEXT NOT NULL,"
    " plan TEXT NOT NULL,"
    " target TEXT NOT NULL,"
    " body BLOB NOT NULL,"
    " digest TEXT NOT NULL,"
    " state TEXT NOT NULL,"
    " last_error TEXT,"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " queued_at_ms INTEGER NOT NULL)",
)


def canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def intent_key(binding: dict[str, str], command: str, inputs: dict[str, Any]) -> str:
    """What recognises the same operation run again: the profile's binding, the command and
    the inputs the caller gave (generated ids left out)."""
    return stable_id(INTENT_PREFIX, canonical(binding), command, canonical(inputs))


def item_digest(binding: str, plan: str, target: str, body: bytes) -> str:
    return stable_id(ITEM_PREFIX, binding, plan, target, body)


class Request(NamedTuple):
    """One command ready to send: what an outbox item keeps."""

    command: str  # "session new", "fact add", "handoff send"
    kind: str
    resource_id: str
    command_id: str
    target: str
    body: bytes
    ids: dict[str, str]
    intent: str
    base_revision: int = 0

    def plan(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "kind": self.kind,
            "resource_id": self.resource_id,
            "command_id": self.command_id,
            "base_revision": self.base_revision,
            "ids": self.ids,
        }


class Item(NamedTuple):
    """One stored item, as read back."""

    item: int
    command: str
    intent: str
    kind: str
    resource_id: str
    command_id: str
    base_revision: int
    binding: str
    plan: str
    target: str
    body: bytes
    digest: str
    state: str
    last_error: str | None
    attempts: int
    queued_at_ms: int

    @property
    def ids(self) -> dict[str, str]:
        try:
            ids: dict[str, str] = json.loads(self.plan)["ids"]
        except (ValueError, KeyError, TypeError):
            return {}
        return ids

    def problem(self, binding: dict[str, str]) -> str | None:
        """Why this item must not be sent as the profile bound as `binding` now, or None
        (OUTBOX-4): another binding, or a binding, plan or request changed since queued."""
        if canonical(binding) != self.binding:
            try:
                was = json.loads(self.binding)
            except ValueError:
                was = {}
            changed = [k for k in sorted(binding) if was.get(k) != binding[k]]
            return (
                f"the profile changed since it was queued ({', '.join(changed) or 'binding'}"
                f": was {', '.join(str(was.get(k)) for k in changed)})"
            )
        if item_digest(self.binding, self.plan, self.target, self.body) != self.digest:
            return "the item was changed after it was queued (its digest does not match)"
        try:
            plan = json.loads(self.plan)
            sent = json.loads(self.body)
        except ValueError:
            return "the item's plan or request is not JSON"
        expected = {
            "command": self.command,
            "kind": self.kind,
            "resource_id": self.resource_id,
            "command_id": self.command_id,
            "base_revision": self.base_revision,
        }
        if any(plan.get(k) != v for k, v in expected.items()):
            return "the item's plan does not match its columns"
        payload = sent.get("payload") if isinstance(sent, dict) else None
        id_field = {"session": "session_id", "fact": "fact_id", "handoff": "handoff_id"}
        if (
            sent.get("command_id") != self.command_id
            or not isinstance(payload, dict)
            or payload.get(id_field.get(self.kind, "")) != self.resource_id
        ):
            return "the item's request does not carry its command and resource ids"
        return None

    def document(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "command": self.command,
            "kind": self.kind,
            "resource_id": self.resource_id,
            "command_id": self.command_id,
            "ids": self.ids,
            "base_revision": self.base_revision,
            "state": self.state,
            "last_error": self.last_error,
            "attempts": self.attempts,
            "queued_at_ms": self.queued_at_ms,
        }


class Outbox(PrivateFile):
    """One outbox file."""

    SCHEMA = _SCHEMA

    def items(self) -> list[Item]:
        rows = self._conn.execute("SELECT * FROM items ORDER BY item").fetchall()
        return [Item(*row) for row in rows]

    def find(self, item: int) -> Item | None:
        row = self._conn.execute("SELECT * FROM items WHERE item = ?", (item,)).fetchone()
        return Item(*row) if row is not None else None

    def pending(self, request: Request) -> Item | None:
        """The item already queued for this operation (the same intent) or for this resource
        (the same kind and id), if any."""
        row = self._conn.execute(
            "SELECT * FROM items WHERE intent = ? OR (kind = ? AND resource_id = ?) "
            "ORDER BY item LIMIT 1",
            (request.intent, request.kind, request.resource_id),
        ).fetchone()
        return Item(*row) if row is not None else None

    def add(self, binding: dict[str, str], request: Request, error: str) -> Item:
        """Queue `request` as the profile bound as `binding` (OUTBOX-1)."""
        bound = canonical(binding)
        plan = canonical(request.plan())
        digest = item_digest(bound, plan, request.target, request.body)
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = self._conn.execute(
                "INSERT INTO items (command, intent, kind, resource_id, command_id, "
                "base_revision, binding, plan, target, body, digest, state, last_error, "
                "attempts, queued_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)",
                (
                    request.command, request.intent, request.kind, request.resource_id,
                    request.command_id, request.base_revision, bound, plan, request.target,
                    request.body, digest, QUEUED, error, int(time.time() * 1000),
                ),
            )  # fmt: skip
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        found = self.find(int(cursor.lastrowid or 0))
        assert found is not None
        return found

    def mark(self, item: int, state: str, error: str | None) -> None:
        self._conn.execute(
            "UPDATE items SET state = ?, last_error = ?, attempts = attempts + 1 WHERE item = ?",
            (state, error, item),
        )

    def remove(self, item: int) -> bool:
        cursor = self._conn.execute("DELETE FROM items WHERE item = ?", (item,))
        return cursor.rowcount > 0
