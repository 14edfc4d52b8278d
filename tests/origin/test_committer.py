"""The origin's write committer (SPEC.md HTTP-10): command requests answered in batches by one
thread, one `COMMIT` per batch, no answer before it, a failing command answered alone, a
failed commit answered for every request; on the real SQLite store, through `HttpApp`'s one
request pipeline, and through both paths of a served `aidememo serve`."""

from __future__ import annotations

import asyncio
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.model import Scope
from aidememo.http.app import HttpApp
from aidememo.http.body import Body
from aidememo.http.pipeline import Admission
from aidememo.http.routes import resolve
from aidememo.http.types import Request, Response
from aidememo.service.identity import IdentityService, token_digest
from aidememo.stores.in_memory import InMemoryStore
from aidememo.stores.sqlite import SqliteStore
from aidememo.stores.sqlite.sqlite3_executor import Sqlite3Executor
from origin.committer import Committer
from origin.lanes import Lane, Scheduler
from tests.origin.http_support import request
from tests.origin.test_serve_process import ServeProcess
from tests.origin.thread_server import ThreadServer

TENANT, PROJECT, ACTOR = "t1", "p1", "agent-a"
FACTS = f"/v1/projects/{PROJECT}/facts"


class Setup:
    """A bootstrapped SQLite file store with one writer, its session and an `HttpApp`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = SqliteStore.open_file(path)
        self.token = secrets.token_hex(32)
        IdentityService(self.store, *_clock_ids()).bootstrap(
            tenant_id=TENANT,
            project_id=PROJECT,
            actor_id=ACTOR,
            token_sha256=token_digest(self.token),
        )
        self.app = HttpApp(self.store)
        created = self.app.dispatch(
            self.request(
                f"/v1/projects/{PROJECT}/sessions",
                {"command_id": "c-session", "payload": {"session_id": "s1", "topic": "batch"}},
            )
        )
        assert created.status == 200, created.body
        self.executor = self.store.executor
        assert isinstance(self.executor, Sqlite3Executor)

    def request(self, path: str, body: object, rid: str = "") -> Request:
        headers = {"authorization": f"Bearer {self.token}", "content-type": "application/json"}
        raw = Body.of(json.dumps(body).encode())
        return Request("POST", path, "", headers, raw, rid or "r" * 16)

    def fact(self, n: int, session: str = "s1") -> Request:
        payload = {"fact_id": f"f{n}", "session_id": session, "content": f"fact number {n}"}
        return self.request(FACTS, {"command_id": f"c{n}", "payload": payload}, f"rid{n:013d}")

    def on_disk(self, fact_id: str) -> bool:
        """Whether another connection sees the fact (what a reader or a restart sees)."""
        conn = sqlite3.connect(self.path)
        try:
            rows = conn.execute(
                "SELECT 1 FROM resources WHERE kind = 'fact' AND resource_id = ?", (fact_id,)
            ).fetchall()
        finally:
            conn.close()
        return bool(rows)


def run_batch(app: HttpApp, requests: Sequence[Request]) -> list[Response]:
    """What the committer does with `requests`: each admitted, then the admitted ones'
    handlers in one write batch; a refused one keeps its refusal."""
    admitted = [app.admitted(request) for request in requests]
    ran = iter(
        app.run_admitted(
            [(r, a) for r, a in zip(requests, admitted, strict=True) if isinstance(a, Admission)]
        )
    )
    return [a if isinstance(a, Response) else next(ran) for a in admitted]


def _clock_ids() -> tuple[Any, Any]:
    from aidememo.domain.clock import RandomIds, SystemClock

    return SystemClock(), RandomIds()


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    s = Setup(tmp_path / "db.sqlite")
    yield s
    s.store.close()


def _status(response: Response) -> tuple[int, str | None]:
    body = json.loads(response.body)
    return response.status, body.get("error", {}).get("code")


def test_http10_run_batch_commits_once_and_answers_a_failing_command_alone(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    commits: list[int] = []
    original = setup.executor._commit  # type: ignore[attr-defined]

    def counted(conn: Any) -> None:
        original(conn)
        commits.append(1)

    monkeypatch.setattr(setup.executor, "_commit", counted)
    requests = [setup.fact(1), setup.fact(2, session="no-such-session"), setup.fact(3)]
    responses = run_batch(setup.app, requests)
    assert [r.status for r in responses] == [200, 404, 200]
    assert _status(responses[1]) == (404, ErrorCode.RESOURCE_NOT_FOUND.value)
    receipts = [json.loads(responses[i].body) for i in (0, 2)]
    assert receipts[1]["project_seq"] == receipts[0]["project_seq"] + 1
    assert len(commits) == 1
    assert setup.on_disk("f1") and setup.on_disk("f3") and not setup.on_disk("f2")
    replay = run_batch(setup.app, [setup.fact(1), setup.fact(1)])  # idempotent in one batch
    assert [json.loads(r.body)["project_seq"] for r in replay] == [receipts[0]["project_seq"]] * 2


def test_http10_run_batch_answers_every_request_with_the_storage_error_when_the_commit_fails(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks: list[tuple[Scope, int]] = []
    setup.app.services.ledger.on_commit.append(lambda scope, seq: hooks.append((scope, seq)))

    def failing(conn: Any) -> None:
        raise fail(ErrorCode.STORAGE_FAILURE, "fsync failed")

    monkeypatch.setattr(setup.executor, "_commit", failing)
    responses = run_batch(setup.app, [setup.fact(1), setup.fact(2, session="no-such-session")])
    assert [_status(r) for r in responses] == [(503, ErrorCode.STORAGE_FAILURE.value)] * 2
    assert all(dict(r.headers).get("retry-after") for r in responses)
    assert hooks == []  # a voided commit is announced to nobody (LIVE-2)
    monkeypatch.undo()
    assert not setup.on_disk("f1")
    assert [r.status for r in run_batch(setup.app, [setup.fact(1)])] == [200]  # a retry commits
    assert len(hooks) == 1


def test_http10_live2_commit_hooks_run_after_the_batch_commit(setup: Setup) -> None:
    seen: list[tuple[int, bool]] = []
    ledger = setup.app.services.ledger
    ledger.on_commit.append(lambda scope, seq: seen.append((seq, setup.on_disk(f"f{seq}"))))
    # the session is seq 1: fact n is seq n + 1 below, so name the facts after their seq
    responses = run_batch(setup.app, [setup.fact(2), setup.fact(3)])
    assert [r.status for r in responses] == [200, 200]
    assert seen == [(2, True), (3, True)]  # each hook saw its commit from another connection


def test_http10_batches_only_commands_and_only_on_a_store_that_batches(setup: Setup) -> None:
    scheduler = Scheduler(setup.app)

    def lane(method: str, path: str) -> Lane:
        return scheduler.place(Request(method, path), True)

    assert lane("POST", FACTS) is Lane.STORE
    assert lane("POST", f"/v1/projects/{PROJECT}/handoffs/h1/accept") is Lane.STORE
    assert lane("POST", "/v1/commands") is Lane.STORE
    assert lane("GET", FACTS.replace("facts", "sessions")) is Lane.LOOP
    assert lane("POST", f"/v1/projects/{PROJECT}/mcp") is Lane.POOL
    assert lane("POST", "/v1/admin/bootstrap") is Lane.POOL
    assert lane("POST", "/v1/nowhere") is Lane.POOL
    memory = HttpApp(InMemoryStore())
    assert not memory.batches and Scheduler(memory).committer is None
    assert run_batch(memory, []) == []


class Gate:
    """A `run_admitted` that holds its first batch until released and records the batches and
    when each was committed, so a test can queue requests behind it deterministically."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.entered, self.release = threading.Event(), threading.Event()
        self.batches: list[list[str]] = []
        self.events: list[str] = []
        original = setup.executor._commit  # type: ignore[attr-defined]

        def commit(conn: Any) -> None:
            original(conn)
            self.events.append("commit")

        setup.executor._commit = commit  # type: ignore[attr-defined]

    def __call__(self, admitted: Sequence[tuple[Request, Admission]]) -> list[Response]:
        self.batches.append([r.request_id for r, _ in admitted])
        if len(self.batches) == 1:
            self.entered.set()
            assert self.release.wait(timeout=30)
        return self.setup.app.run_admitted(admitted)


def test_http10_queued_requests_share_one_batch_and_none_is_answered_before_its_commit(
    setup: Setup,
) -> None:
    gate = Gate(setup)
    committer = Committer(setup.app.admitted, gate)

    async def main() -> list[Response]:
        loop = asyncio.get_running_loop()
        answers: list[asyncio.Future[Response]] = []

        def submit(request: Request) -> None:
            answer: asyncio.Future[Response] = loop.create_future()

            def deliver(response: Response, rid: str = request.request_id) -> None:
                gate.events.append(f"answer {rid}")
                answer.set_result(response)

            committer.take(loop, request, deliver)
            answers.append(answer)

        submit(setup.fact(1))
        assert await loop.run_in_executor(None, gate.entered.wait, 30)
        for n in (2, 3, 4):  # queued while the first batch is held
            submit(setup.fact(n, session="no-such-session" if n == 3 else "s1"))
        await asyncio.sleep(0)
        assert not any(answer.done() for answer in answers)
        gate.release.set()
        return list(await asyncio.gather(*answers))

    try:
        responses = asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        committer.stop()
    assert [r.status for r in responses] == [200, 200, 404, 200]
    assert [len(batch) for batch in gate.batches] == [1, 3]
    assert gate.events == [
        "commit",
        "answer rid0000000000001",
        "commit",
        "answer rid0000000000002",
        "answer rid0000000000003",
        "answer rid0000000000004",
    ]
    committer.stop()  # idempotent


def test_http10_a_stopped_committer_answers_retry_later(setup: Setup) -> None:
    committer = Committer(setup.app.admitted, setup.app.run_admitted)
    committer.stop()

    async def main() -> Response:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Response] = loop.create_future()
        committer.take(loop, setup.fact(1), answer.set_result)
        return await answer

    response = asyncio.run(asyncio.wait_for(main(), 10))
    assert response.status == 503
    assert not setup.on_disk("f1")


def test_http10_a_served_command_goes_to_the_committer_however_its_body_came(
    setup: Setup,
) -> None:
    seen: list[int] = []

    class Counted:
        batches, connections = True, None
        dispatch, admitted = setup.app.dispatch, setup.app.admitted

        def run_admitted(self, admitted: Sequence[tuple[Request, Admission]]) -> list[Response]:
            seen.append(len(admitted))
            return setup.app.run_admitted(admitted)

    made = setup.fact(1)
    headers = dict(made.headers)
    body = made.body.read()
    with ThreadServer(Counted()) as server, server.conn() as conn:
        conn.send(request("POST", FACTS, body, headers=headers))
        assert conn.read().status_line.endswith(b"200 OK")
        conn.send(request("GET", f"{FACTS[:-6]}/resources/fact/f1", headers=headers))
        assert conn.read().status_line.endswith(b"200 OK")  # a read is not the committer's
        second = request(
            "POST", FACTS, body.replace(b"f1", b"f2").replace(b"c1", b"c2"), headers=headers
        )
        head, _, rest = second.partition(b"\r\n\r\n")
        conn.send(head + b"\r\n\r\n")  # the body after its head: received, then committed
        time.sleep(0.05)
        conn.send(rest)
        assert conn.read().status_line.endswith(b"200 OK")
    assert seen == [1, 1]
    assert setup.on_disk("f1") and setup.on_disk("f2")


# -- served: both paths of a real `aidememo serve` on SQLite --------------------------------

SERVED = "/v1/projects/demo"


def test_http10_served_concurrent_commands_are_answered_and_nothing_acknowledged_is_lost(
    tmp_path: Path, home: Path, token: str
) -> None:
    """Concurrent commands through the committer; a SIGKILL loses nothing acknowledged."""
    server = ServeProcess(home, tmp_path / "serve.log")
    headers = {"authorization": f"Bearer {token}"}
    try:
        created = httpx.post(
            f"{server.url}{SERVED}/sessions",
            json={"command_id": "c-s1", "payload": {"session_id": "s1", "topic": "batch"}},
            headers=headers,
        )
        assert created.status_code == 200, created.text

        def post(n: int) -> tuple[int, int, str]:
            session = "no-such-session" if n % 7 == 3 else "s1"
            payload = {"fact_id": f"f{n}", "session_id": session, "content": f"fact {n}"}
            with httpx.Client(timeout=30) as client:
                answer = client.post(
                    f"{server.url}{SERVED}/facts",
                    json={"command_id": f"c{n}", "payload": payload},
                    headers=headers,
                )
            code = (
                answer.json().get("error", {}).get("code", "") if answer.status_code != 200 else ""
            )
            return n, answer.status_code, code

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(post, range(48)))
        for n, status, code in answers:
            if n % 7 == 3:
                assert (status, code) == (404, ErrorCode.RESOURCE_NOT_FOUND.value), n
            else:
                assert status == 200, (n, status, code)
    finally:
        server.kill()  # SIGKILL: what was acknowledged must be on disk already
    again = ServeProcess(home, tmp_path / "again.log")
    try:
        for n, status, _ in answers:
            found = httpx.get(f"{again.url}{SERVED}/resources/fact/f{n}", headers=headers)
            assert found.status_code == (200 if status == 200 else 404), n
    finally:
        again.kill()


def test_http10_serve_gives_a_committer_only_to_a_store_that_batches(setup: Setup) -> None:
    assert isinstance(Scheduler(setup.app).committer, Committer)
    memory = HttpApp(InMemoryStore())
    assert Scheduler(memory).committer is None  # no CAP_WRITE_BATCH, no connection pool


def test_http10_a_batch_carries_at_most_max_batch_requests() -> None:
    entered, release = threading.Event(), threading.Event()
    sizes: list[int] = []

    def run_admitted(admitted: Sequence[tuple[Request, Admission]]) -> list[Response]:
        sizes.append(len(admitted))
        if len(sizes) == 1:
            entered.set()
            assert release.wait(timeout=30)
        return [Response(200, [], b"{}") for _ in admitted]

    admission = Admission(resolve("GET", "/health").route, {})  # type: ignore[arg-type]
    committer = Committer(lambda request: admission, run_admitted, max_batch=4)
    with pytest.raises(ValueError):
        Committer(lambda request: admission, run_admitted, max_batch=0)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        answers: list[asyncio.Future[Response]] = []

        def submit(n: int) -> None:
            answer: asyncio.Future[Response] = loop.create_future()
            committer.take(loop, Request("POST", "/x", request_id=f"r{n}"), answer.set_result)
            answers.append(answer)

        submit(0)
        assert await loop.run_in_executor(None, entered.wait, 30)
        for n in range(1, 11):
            submit(n)
        release.set()
        return len(await asyncio.gather(*answers))

    try:
        assert asyncio.run(asyncio.wait_for(main(), 30)) == 11
    finally:
        committer.stop()
    assert sizes == [1, 4, 4, 2]
