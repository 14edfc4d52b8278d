"""Every statement the store sends runs the same in workerd's Durable Object SQLite.

The store's whole repertoire (migration, provisioning, commits with search and handoff rows,
every read) is recorded on the DO double, then replayed in a real SQLite-backed Durable
Object through Miniflare; each statement must succeed there and return the same rows. This
keeps the double honest and proves the SQL (STRICT, WITHOUT ROWID, FTS5 options, `json_each`,
upserts, RETURNING) is accepted by workerd, which Python cannot run offline. Miniflare is pinned in
package.json; without Node or it the test skips, and fails under `CI=true`.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.model import (
    Actor,
    ActorKind,
    CommandCall,
    HandoffIndexRow,
    MailboxQuery,
    Membership,
    MemberStatus,
    ResourceRef,
    Role,
    SearchDoc,
    TokenBinding,
)
from aidememo.ports import WriteTx
from aidememo.stores.sqlite import SqliteStore
from aidememo.stores.sqlite.do_executor import DoSqlExecutor
from aidememo.stores.sqlite.executor import Row, SqlValue
from tests.doubles.do_storage import DoStorage
from tests.node import node as pinned_node
from tests.stores._support import SCOPE, TENANT, commit_all, mutation, provision

ROOT = Path(__file__).resolve().parents[2]
REPLAY = Path(__file__).with_name("workerd_replay.mjs")
DIGEST = bytes(range(32))


def _wire(value: SqlValue) -> Any:
    return {"hex": value.hex()} if isinstance(value, bytes) else value


class _Recorder(DoSqlExecutor):
    """The DO executor, keeping every statement, its parameters and its rows."""

    def __init__(self, storage: DoStorage) -> None:
        super().__init__(storage)
        self.log: list[tuple[str, list[Any], list[list[Any]]]] = []

    def execute(self, sql: str, params: Sequence[SqlValue] = ()) -> list[Row]:
        rows = super().execute(sql, params)
        self.log.append((sql, [_wire(p) for p in params], [[_wire(v) for v in r] for r in rows]))
        return rows


def _identity(tx: WriteTx) -> None:
    tx.insert_actor(Actor(TENANT, "actor_a", ActorKind.AGENT), 1)
    tx.put_membership(
        Membership(TENANT, SCOPE.project_id, "actor_a", Role.WRITER, MemberStatus.ACTIVE), 2
    )
    tx.insert_token(TokenBinding(DIGEST, TENANT, "actor_a", True, 3))
    tx.set_token_active(DIGEST, False)


def _exercise(store: SqliteStore) -> None:
    store.transaction(provision)
    store.transaction(_identity)
    handoff = HandoffIndexRow("h1", "actor_a", "actor_b", "s1", "pending", 1, 2)
    commit_all(
        store,
        [
            mutation(1, "f1", b'{"a":1}', search=SearchDoc("f1", "s1", "hello world \uc11c\ubc84")),
            mutation(2, "h1", b"{}", kind="handoff", handoff=handoff),
            mutation(3, "f1", b'{"a":2}', revision=2, search=SearchDoc("f1", "s1", "hello again")),
            mutation(4, "f2", bytes(range(256)), search=SearchDoc("f2", "s2", "hello hello")),
            mutation(5, "f9", None),
        ],
    )
    ref = ResourceRef("custom.fact", "f1")
    store.transaction(
        lambda tx: (
            tx.begin_command(CommandCall(SCOPE, "actor_a", "cmd_3", ref)),
            tx.begin_command(
                CommandCall(SCOPE, "actor_nobody", "cmd_none", ResourceRef("custom.fact", "f0"))
            ),
        )
    )
    store.read(
        lambda tx: (
            tx.get_project(SCOPE),
            tx.list_changes(SCOPE, 0, 100),
            tx.list_changes(SCOPE, 0, 100, bodies=False),
            tx.list_resources(SCOPE, 100),
            tx.list_audit(SCOPE),
            tx.get_token(DIGEST),
            tx.get_membership(SCOPE, "actor_a"),
            tx.get_actor(TENANT, "actor_a"),
            tx.tenant_exists(TENANT),
            tx.get_access(SCOPE, "actor_a"),
            tx.get_access(SCOPE, "actor_nobody"),
            tx.search(SCOPE, ["hello", "\uc11c\ubc84"], None, 10),
            tx.search(SCOPE, ["hello"], "s2", 10),
            tx.mailbox(SCOPE, MailboxQuery("actor_b", "inbox", None, False, None, 20)),
            tx.mailbox(SCOPE, MailboxQuery("actor_a", "outbox", "s1", True, 5, 20)),
        )
    )
    store.read(lambda tx: tx.authenticate_token(DIGEST))
    store.schema_version()


def _same(ours: list[list[Any]], theirs: list[list[Any]]) -> bool:
    if len(ours) != len(theirs):
        return False
    for row_a, row_b in zip(ours, theirs, strict=True):
        for a, b in zip(row_a, row_b, strict=True):
            if isinstance(a, float) or isinstance(b, float):
                if a != pytest.approx(b, rel=1e-9, abs=1e-12):
                    return False
            elif a != b:
                return False
    return True


def test_store12_sql_runs_identically_in_workerd(tmp_path: Path) -> None:
    node = pinned_node()
    if node is None or not (ROOT / "node_modules" / "miniflare").is_dir():
        reason = "node or npm miniflare missing (scripts/test runs npm ci)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + "; CI must not skip the workerd replay")
        pytest.skip(reason)
    storage = DoStorage()
    try:
        recorder = _Recorder(storage)
        _exercise(SqliteStore(recorder, mode="edge"))
    finally:
        storage.close()
    statements = tmp_path / "statements.json"
    statements.write_text(json.dumps([[sql, params] for sql, params, _ in recorder.log]))
    out = subprocess.run(
        [node, str(REPLAY), str(statements)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])["results"]
    assert len(results) == len(recorder.log)
    for (sql, params, ours), theirs in zip(recorder.log, results, strict=True):
        assert not isinstance(theirs, dict), f"workerd refused {sql!r} {params}: {theirs}"
        assert _same(ours, theirs), f"{sql!r} {params}: double {ours} != workerd {theirs}"
