"""The origin's store pool (SPEC.md HTTP-12): on a store with a bounded connection pool
(PostgreSQL), the requests whose only I/O is the store's (commands, member reads) run on as
many threads as the store has connections, taken in the order they came, each answered on its
loop once its dispatch returned; and a real `aidememo serve` on PostgreSQL answering
concurrent commands and reads through it, nothing acknowledged lost."""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from aidememo.cli.main import main
from aidememo.domain.errors import ErrorCode
from aidememo.http.app import HttpApp
from aidememo.http.body import EMPTY
from aidememo.http.types import Request, Response
from aidememo.stores.in_memory import InMemoryStore
from origin.committer import Committer
from origin.lanes import Lane, Scheduler
from tests import pg
from tests.origin.test_serve_process import ServeProcess

WAIT_S = 10.0  # a bound on waiting for what must happen, never a measured expectation


def _request(n: int) -> Request:
    return Request("POST", "/v1/commands", "", {}, EMPTY, f"rid{n:013d}")


def _ok(request: Request) -> Response:
    return Response(200, {}, request.request_id.encode())


class _Pooled:
    """A dispatcher on a store whose pool holds `connections` connections."""

    def __init__(self, dispatch: Callable[[Request], Response], connections: int) -> None:
        self.dispatch = dispatch
        self.connections = connections


def store_pool(dispatch: Callable[[Request], Response], threads: int) -> Scheduler:
    """The scheduler of a dispatcher on a store with `threads` connections."""
    return Scheduler(_Pooled(dispatch, threads))


def _run(pool: Scheduler, requests: list[Request]) -> list[tuple[Response, bool]]:
    """Submit `requests` from a loop; each answer and whether it came on the loop's thread."""

    async def main() -> list[tuple[Response, bool]]:
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        futures: list[asyncio.Future[tuple[Response, bool]]] = []
        for request in requests:
            answer: asyncio.Future[tuple[Response, bool]] = loop.create_future()

            def deliver(
                response: Response, answer: asyncio.Future[tuple[Response, bool]] = answer
            ) -> None:
                answer.set_result((response, threading.get_ident() == loop_thread))

            pool.run(loop, request, Lane.STORE, deliver)
            futures.append(answer)
        return list(await asyncio.wait_for(asyncio.gather(*futures), WAIT_S))

    return asyncio.run(main())


def test_http12_requests_are_answered_in_the_order_they_came_on_their_loop() -> None:
    order: list[str] = []

    def dispatch(request: Request) -> Response:
        order.append(request.request_id)
        return _ok(request)

    pool = store_pool(dispatch, threads=1)
    requests = [_request(n) for n in range(20)]
    try:
        answers = _run(pool, requests)
    finally:
        pool.stop()
    assert order == [r.request_id for r in requests]
    assert [bytes(a.body) for a, _ in answers] == [r.request_id.encode() for r in requests]
    assert all(on_loop for _, on_loop in answers)


def test_http12_never_more_requests_run_at_once_than_threads() -> None:
    lock, running, most = threading.Lock(), [0], [0]
    three_in, release = threading.Barrier(3, timeout=WAIT_S), threading.Event()

    def dispatch(request: Request) -> Response:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        if int(request.request_id[3:]) < 3:  # the first three meet: all three threads busy
            three_in.wait()
            release.wait(WAIT_S)
        with lock:
            running[0] -= 1
        return _ok(request)

    pool = store_pool(dispatch, threads=3)
    threading.Timer(0.2, release.set).start()  # the rest queue behind the three meanwhile
    try:
        answers = _run(pool, [_request(n) for n in range(12)])
    finally:
        release.set()
        pool.stop()
    assert [a.status for a, _ in answers] == [200] * 12
    assert most[0] == 3


def test_http12_a_dispatch_that_raises_is_answered_with_the_retryable_503() -> None:
    def dispatch(request: Request) -> Response:
        raise RuntimeError("a bug")

    pool = store_pool(dispatch, threads=2)
    try:
        [(answer, _)] = _run(pool, [_request(1)])
    finally:
        pool.stop()
    assert answer.status == 503
    assert ErrorCode.STORAGE_FAILURE.value in bytes(answer.body).decode()


def test_http12_stop_answers_what_is_queued_then_refuses_new_requests() -> None:
    gate = threading.Event()

    def dispatch(request: Request) -> Response:
        gate.wait(WAIT_S)
        return _ok(request)

    pool = store_pool(dispatch, threads=1)
    answers: list[Response] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for n in range(5):
            pool.run(loop, _request(n), Lane.STORE, answers.append)
        gate.set()
        await loop.run_in_executor(None, pool.stop)  # the queued five are answered first
        await asyncio.sleep(0)
        pool.run(loop, _request(9), Lane.STORE, answers.append)  # stopped: the retryable 503
        await asyncio.sleep(0)

    asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert [a.status for a in answers] == [200] * 5 + [503]


def test_http12_a_pool_needs_a_thread() -> None:
    with pytest.raises(ValueError):
        store_pool(_ok, threads=0)


# -- which stores get one -------------------------------------------------------------------


@pytest.fixture
def db() -> Iterator[pg.Database]:
    with pg.fresh_database() as database:
        yield database


@pytest.mark.postgres
def test_http12_serve_gives_postgres_a_store_pool_of_its_connections(db: pg.Database) -> None:
    store = db.open("psycopg", pool_size=3)
    scheduler = Scheduler(HttpApp(store))

    def lane(method: str, path: str) -> Lane:
        return scheduler.place(Request(method, path), True)

    try:
        assert scheduler.committer is None and scheduler.traits.connections == 3
        assert lane("POST", "/v1/commands") is Lane.STORE
        assert lane("POST", "/v1/projects/p1/facts") is Lane.STORE
        assert lane("GET", "/v1/projects/p1/resources/fact/f1") is Lane.STORE  # a member read
        assert lane("GET", "/v1/projects/p1/search") is Lane.STORE
        assert lane("GET", "/health") is Lane.POOL  # not the store's alone
        assert lane("POST", "/v1/projects/p1/artifacts/a1/downloads") is Lane.POOL  # objects
        assert lane("POST", "/v1/projects/p1/mcp") is Lane.POOL
        assert lane("POST", "/v1/admin/bootstrap") is Lane.POOL
        assert lane("GET", "/v1/no/such/route") is Lane.POOL
    finally:
        scheduler.stop()
        store.close()
    memory = Scheduler(HttpApp(InMemoryStore()))
    assert memory.committer is None and memory.traits.connections is None


def test_http12_the_store_pool_takes_only_member_reads_and_commands() -> None:
    from aidememo.http.routes import ROUTES
    from aidememo.http.routing import Auth

    reads = {route.name for route in ROUTES if route.store_read}
    assert reads == {
        "identity", "resource", "changes", "changes_materialized", "snapshot", "sessions",
        "session_facts", "mailbox", "handoff_status", "members", "search",
    }  # fmt: skip
    for route in ROUTES:
        if route.store_read:  # a member's plain read: no body, no upgrade, no object storage
            assert route.method == "GET" and route.auth is Auth.MEMBER, route.name
            assert route.body is None and not route.upgrade and not route.batch, route.name
        if route.batch:
            assert route.method != "GET" and not route.streamed, route.name


def test_http12_a_store_that_batches_keeps_its_committer(tmp_path: Path) -> None:
    from aidememo.stores.sqlite import SqliteStore

    store = SqliteStore.open_file(tmp_path / "a.db")
    app = HttpApp(store)
    try:
        assert app.connections is None
        assert isinstance(Scheduler(app).committer, Committer)
    finally:
        store.close()


def test_http14_a_store_with_both_store_lanes_sends_only_commands_to_the_committer() -> None:
    """A store that runs write batches and has a connection pool: commands go to the
    committer, member reads to the store pool, never a read into a write batch."""
    ran: list[tuple[str, str]] = []

    class Both:
        batches = True
        connections = 2

        def dispatch(self, request: Request) -> Response:
            ran.append(("pool", request.path))
            return _ok(request)

        def admitted(self, request: Request) -> object:
            return object()

        def run_admitted(self, admitted: list[tuple[Request, object]]) -> list[Response]:
            ran.extend(("committer", request.path) for request, _ in admitted)
            return [_ok(request) for request, _ in admitted]

    scheduler = Scheduler(Both())  # type: ignore[arg-type]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for method, path in (("POST", "/v1/commands"), ("GET", "/v1/projects/p1/sessions")):
            request = Request(method, path, "", {}, EMPTY, "rid0000000000001")
            where = scheduler.place(request, True)
            assert where is Lane.STORE
            answer: asyncio.Future[Response] = loop.create_future()
            scheduler.run(loop, request, where, answer.set_result)
            await asyncio.wait_for(answer, WAIT_S)

    try:
        asyncio.run(main())
    finally:
        scheduler.stop()
    assert ran == [("committer", "/v1/commands"), ("pool", "/v1/projects/p1/sessions")]


# -- served: a real `aidememo serve` on PostgreSQL ------------------------------------------

TENANT, PROJECT, ACTOR = "t_pool", "p_pool", "a_pool"


@pytest.mark.postgres
@pytest.mark.timeout(120)
def test_http12_served_concurrent_commands_and_reads_on_postgres_lose_nothing_acknowledged(
    db: pg.Database, tmp_path: Path
) -> None:
    """More concurrent commands and reads than the store has connections, some refused;
    after a SIGKILL every acknowledged one is there."""
    token_file = tmp_path / "t.token"
    assert main(["token", "new", "--out", str(token_file)]) == 0
    boot = ["bootstrap", "--database", db.url, "--tenant-id", TENANT, "--project-id", PROJECT]
    assert main([*boot, "--actor-id", ACTOR, "--token-file", str(token_file)]) == 0
    headers = {"authorization": f"Bearer {token_file.read_text().strip()}"}
    base = f"/v1/projects/{PROJECT}"
    server = ServeProcess(tmp_path / "home", tmp_path / "serve.log", "--database", db.url)
    tag = secrets.token_hex(3)
    try:
        created = httpx.post(
            f"{server.url}{base}/sessions",
            json={"command_id": f"s-{tag}", "payload": {"session_id": "s1", "topic": "pool"}},
            headers=headers,
        )
        assert created.status_code == 200, created.text
        post = _poster(server.url, base, headers, tag)
        with ThreadPoolExecutor(24) as threads:
            answers = list(threads.map(post, range(60)))
        for n, status, code, read in answers:
            if n % 7 == 3:
                assert (status, code) == (404, ErrorCode.RESOURCE_NOT_FOUND.value), n
            else:
                assert status == 200, (n, status, code)
            assert read == (200 if status == 200 else 404), n  # its writer reads its write
    finally:
        server.kill()  # SIGKILL: what was acknowledged must be committed already
    again = ServeProcess(tmp_path / "home", tmp_path / "again.log", "--database", db.url)
    try:
        for n, status, _, _ in answers:
            found = httpx.get(f"{again.url}{base}/resources/fact/f{n}", headers=headers)
            assert found.status_code == (200 if status == 200 else 404), n
    finally:
        again.kill()


def _poster(
    url: str, base: str, headers: dict[str, str], tag: str
) -> Callable[[int], tuple[int, int, str, int]]:
    """Post fact `n` (to a session that does not exist when n % 7 == 3), then read it back:
    (n, the post's status, its error code, the read's status)."""

    def post(n: int) -> tuple[int, int, str, int]:
        session = "no-such-session" if n % 7 == 3 else "s1"
        payload = {"fact_id": f"f{n}", "session_id": session, "content": f"fact {n}"}
        with httpx.Client(timeout=30) as client:
            answer = client.post(
                f"{url}{base}/facts",
                json={"command_id": f"c{n}-{tag}", "payload": payload},
                headers=headers,
            )
            read = client.get(f"{url}{base}/resources/fact/f{n}", headers=headers)
        failed = answer.status_code != 200
        code = answer.json()["error"]["code"] if failed else ""
        return n, answer.status_code, code, read.status_code

    return post
