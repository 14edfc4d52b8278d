"""`aidememo serve --workers 2` on PostgreSQL, as real processes: a commit one worker makes
reaches a live subscriber of the other (LIVE-9), a token revoked through one worker is refused
by every worker on the next request (AUTH-7), and the commit listener on its own hears every
commit of another store, generic and one-statement writes alike.

Which worker served a request is read from the server's log: with several workers every line
carries `pid=`, and each request here sends its own `x-request-id`.
"""

from __future__ import annotations

import hashlib
import json
import queue
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from websockets.sync.client import connect

from aidememo.cli.main import main
from aidememo.conformance.harness import PROJECT as FX_PROJECT
from aidememo.conformance.harness import TENANT as FX_TENANT
from aidememo.conformance.harness import Fixture
from aidememo.domain.model import Scope
from origin.notify import CommitListener
from tests import pg
from tests.origin.test_serve_process import ServeProcess

pytestmark = pytest.mark.postgres

TENANT, PROJECT, ACTOR = "t_workers", "p_workers", "a_workers"
ADMIN_TOKEN = "admin-token-for-the-workers-test"
WAIT_S = 30.0  # a bound on waiting for what must happen, never a measured expectation


@pytest.fixture
def db() -> Iterator[pg.Database]:
    with pg.fresh_database() as database:
        yield database


class Workers:
    """A `--workers 2` server on `db`, with one bootstrapped writer."""

    def __init__(self, db: pg.Database, tmp: Path) -> None:
        token_file, admin_file = tmp / "t.token", tmp / "admin.token"
        admin_file.write_text(ADMIN_TOKEN)
        assert main(["token", "new", "--out", str(token_file)]) == 0
        boot = ["bootstrap", "--database", db.url, "--tenant-id", TENANT]
        boot += ["--project-id", PROJECT, "--actor-id", ACTOR, "--token-file", str(token_file)]
        assert main(boot) == 0
        self.token = token_file.read_text().strip()
        self.log = tmp / "serve.log"
        self.server = ServeProcess(
            tmp / "home",
            self.log,
            "--database",
            db.url,
            "--workers",
            "2",
            "--admin-token-file",
            str(admin_file),
        )
        self.url = self.server.url

    def headers(self, rid: str, token: str | None = None) -> dict[str, str]:
        return {"authorization": f"Bearer {token or self.token}", "x-request-id": rid}

    def served_by(self, rid: str) -> int:
        """The pid of the worker whose access line names request `rid` (lines are written
        in batches, so this waits for it)."""
        pattern = re.compile(rf"pid=(\d+) request_id={rid} ")
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            found = pattern.search(self.server.stderr())
            if found is not None:
                return int(found.group(1))
            time.sleep(0.05)
        raise AssertionError(f"no access line for {rid}: {self.server.stderr()}")

    def fresh(self, method: str, path: str, rid: str, **kwargs: Any) -> httpx.Response:
        """One request on a connection of its own (so either worker may take it)."""
        with httpx.Client(base_url=self.url, timeout=10) as client:
            return client.request(method, path, headers=self.headers(rid), **kwargs)

    def stop(self) -> int:
        code, _ = self.server.terminate(timeout=30)
        return code


@pytest.fixture
def workers(db: pg.Database, tmp_path: Path) -> Iterator[Workers]:
    running = Workers(db, tmp_path)
    try:
        yield running
    finally:
        running.server.kill()


def _note(n: int) -> dict[str, Any]:
    return {
        "command_id": f"cmd_note_{n}",
        "project_id": PROJECT,
        "expected_revision": None,
        "operation": "resource.put",
        "resource": {"kind": "custom.note", "id": f"note_{n}"},
        "change": "upsert",
        "payload": {"n": n},
    }


def _subscribe(workers: Workers) -> Any:
    """A live-feed WebSocket on the project from its start, through whichever worker accepts it."""
    epoch = workers.fresh("GET", f"/v1/projects/{PROJECT}/snapshot", "rid_epoch").json()
    query = urlencode({"project_epoch": epoch["project_epoch"], "after_seq": 0})
    ws_url = workers.url.replace("http://", "ws://") + f"/v1/projects/{PROJECT}/changes/live"
    return connect(
        f"{ws_url}?{query}",
        additional_headers=workers.headers("rid_subscriber"),
        open_timeout=10,
        max_size=None,
    )


@pytest.mark.timeout(180)
def test_live9_a_commit_on_one_worker_reaches_a_subscriber_on_the_other(
    workers: Workers,
) -> None:
    with _subscribe(workers) as sub:
        first = json.loads(sub.recv(timeout=WAIT_S))
        assert first["next_cursor"]["after_seq"] == 0  # the empty catch-up page
        # Write on fresh connections until both workers have committed at least once: then,
        # whichever worker holds the subscriber, the other one's commits reached it too.
        writers: dict[int, int] = {}  # seq -> pid of the worker that committed it
        n = 0
        while len(set(writers.values())) < 2:
            n += 1
            assert n <= 64, f"every write went to one worker: {writers}"
            reply = workers.fresh("POST", "/v1/commands", f"rid_write_{n}", json=_note(n))
            assert reply.status_code == 200, reply.text
            writers[reply.json()["project_seq"]] = workers.served_by(f"rid_write_{n}")
        seen: list[int] = []
        while len(seen) < n:
            batch = json.loads(sub.recv(timeout=WAIT_S))
            seen.append(batch["next_cursor"]["after_seq"])
            assert [e["change"]["resource"]["id"] for e in batch["entries"]] == [
                f"note_{len(seen)}"
            ]
        assert seen == list(range(1, n + 1))
    subscriber = workers.served_by("rid_subscriber")
    assert any(pid != subscriber for pid in writers.values())
    assert workers.stop() == 0


@pytest.mark.timeout(180)
def test_auth7_a_token_revoked_through_one_worker_is_refused_by_every_worker(
    workers: Workers,
) -> None:
    identity = f"/v1/projects/{PROJECT}/identity"
    warmed: set[int] = set()
    n = 0
    while len(warmed) < 2:  # until both workers have the token in their caches
        n += 1
        assert n <= 64, "every request went to one worker"
        assert workers.fresh("GET", identity, f"rid_warm_{n}").status_code == 200
        warmed.add(workers.served_by(f"rid_warm_{n}"))
    digest = hashlib.sha256(workers.token.encode()).hexdigest()
    with httpx.Client(base_url=workers.url, timeout=10) as client:
        revoke = client.post(
            "/v1/admin/tokens/revoke",
            json={"token_sha256": digest},
            headers={"authorization": f"Bearer {ADMIN_TOKEN}", "x-request-id": "rid_revoke"},
        )
    assert revoke.status_code == 200, revoke.text
    refused: set[int] = set()
    n = 0
    while len(refused) < 2:  # until both workers have refused it
        n += 1
        assert n <= 64, "every request went to one worker"
        reply = workers.fresh("GET", identity, f"rid_after_{n}")
        assert reply.status_code == 401, reply.text
        assert reply.json()["error"]["code"] == "authentication_failed"
        refused.add(workers.served_by(f"rid_after_{n}"))
        write = workers.fresh("POST", "/v1/commands", f"rid_write_after_{n}", json=_note(n))
        assert write.status_code == 401, write.text
    assert workers.stop() == 0


def test_live9_the_listener_hears_every_commit_of_another_store(db: pg.Database) -> None:
    heard: queue.Queue[tuple[Scope, int]] = queue.Queue()
    listener = CommitListener(db.url, lambda scope, seq: heard.put((scope, seq)))
    listener.start()
    try:
        assert listener.listening.wait(WAIT_S)
        fx = Fixture.create(lambda: db.open("psycopg"))
        scope = Scope(FX_TENANT, FX_PROJECT)
        fx.put("cmd_raw_1", "a")  # the one-statement guarded write
        fx.put("cmd_raw_1", "a")  # a replay commits nothing: no notification
        fx.put("cmd_raw_2", "b")
        for expected in (1, 2):
            assert heard.get(timeout=WAIT_S) == (scope, expected)
        fx.store.close()
        generic = Fixture.create(lambda: db.open("psycopg"))
        generic.put_generic(f"cmd_generic_{secrets.token_hex(4)}", "c")  # begin + commit_mutation
        assert heard.get(timeout=WAIT_S)[1] == 3
        generic.store.close()
    finally:
        listener.stop()


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.05)


def test_live9_an_on_demand_listener_hears_commits_only_while_wanted(db: pg.Database) -> None:
    heard: queue.Queue[tuple[Scope, int]] = queue.Queue()
    listener = CommitListener(db.url, lambda s, seq: heard.put((s, seq)), on_demand=True)
    listener.start()
    fx = Fixture.create(lambda: db.open("psycopg"))
    scope = Scope(FX_TENANT, FX_PROJECT)
    try:
        assert listener.connected.wait(WAIT_S)
        assert not listener.listening.is_set()
        fx.put("cmd_unwanted_1", "a")  # nobody listens: PostgreSQL delivers this to no one
        listener.want(True)
        assert listener.listening.wait(WAIT_S)
        fx.put("cmd_wanted_2", "b")
        assert heard.get(timeout=WAIT_S) == (scope, 2)  # not 1: it was not listening then
        listener.want(False)
        _wait_for(lambda: not listener.listening.is_set(), "UNLISTEN")
        fx.put("cmd_unwanted_3", "c")
        listener.want(True)
        assert listener.listening.wait(WAIT_S)
        fx.put("cmd_wanted_4", "d")
        assert heard.get(timeout=WAIT_S) == (scope, 4)
        assert heard.empty()
    finally:
        listener.stop()
        fx.store.close()


def _listening_sessions(db: pg.Database) -> int:
    """Sessions of this test's schema whose last statement was `LISTEN` (the workers'
    listeners run it, and `UNLISTEN *` when they stop listening)."""
    with pg.admin(db.server) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
            "AND query LIKE 'LISTEN %%'",
            (db.name,),
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.timeout(180)
def test_live9_only_a_worker_with_a_live_subscriber_listens(
    workers: Workers, db: pg.Database
) -> None:
    for n in (1, 2):  # both workers are up and have answered
        assert workers.fresh("GET", "/health", f"rid_health_{n}").status_code == 200
    assert _listening_sessions(db) == 0
    with _subscribe(workers) as sub:
        assert json.loads(sub.recv(timeout=WAIT_S))["next_cursor"]["after_seq"] == 0
        _wait_for(lambda: _listening_sessions(db) == 1, "the subscriber's worker to LISTEN")
        reply = workers.fresh("POST", "/v1/commands", "rid_write_1", json=_note(1))
        assert reply.status_code == 200, reply.text
        batch = json.loads(sub.recv(timeout=WAIT_S))
        assert batch["next_cursor"]["after_seq"] == 1
        assert _listening_sessions(db) == 1  # the other worker still has no one to wake
    _wait_for(lambda: _listening_sessions(db) == 0, "UNLISTEN after the last subscriber left")
    assert workers.stop() == 0


def test_sem7_two_workers_run_one_indexer_child_and_both_report_it(
    workers: Workers, db: pg.Database
) -> None:
    pytest.importorskip("onnxruntime")  # the semantic extra: scripts/test installs it
    from tests.origin.test_semantic_child import _children, _command

    def indexers() -> dict[int, list[int]]:
        """Each worker's `indexer --attached` children."""
        found: dict[int, list[int]] = {}
        for worker in _children(workers.server.proc.pid):
            found[worker] = []
            for child in _children(worker):
                try:
                    if _command(child)[-2:] == ["indexer", "--attached"]:
                        found[worker].append(child)
                except FileNotFoundError:
                    continue
        return found

    _wait_for(
        lambda: sorted(len(c) for c in indexers().values()) == [0, 1],
        "one worker's indexer child, none in the other",
    )
    answered: dict[int, dict[str, Any]] = {}  # by the worker that answered
    for n in range(40):  # fresh connections until both workers have answered
        rid = f"rid_ready_{n}"
        semantic = workers.fresh("GET", "/ready", rid).json()["semantic"]
        answered[workers.served_by(rid)] = semantic
        if len(answered) == 2:
            break
    assert len(answered) == 2, "one worker answered every request"
    assert all(s["semantic_model"]["provider"] == "bundled" for s in answered.values())
    assert workers.stop() == 0
