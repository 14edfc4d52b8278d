"""The live change feed on the origin (SPEC.md LIVE-*), over a real uvicorn socket with a real
WebSocket client (the `websockets` package): catch-up then push, visibility, refusals before
the upgrade, reconnects, 100 concurrent subscribers, suspension, lease notices and a slow
subscriber.

Writes go through the same server over HTTP (`SocketClient`), so every commit takes the path
it takes in production: dispatch in the thread pool, `Ledger.on_commit` after the durable
commit, the project's hub, the subscriber's queue, the socket.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from aidememo.domain.clock import FixedClock, SystemClock
from aidememo.domain.model import MemberStatus, Role, Scope
from aidememo.http.app import HttpApp
from aidememo.http.types import Request
from aidememo.ports import Clock
from aidememo.stores.sqlite.store import SqliteStore
from origin.asgi import create_asgi_app
from origin.limits import TransportLimits
from origin.live import LiveFeed
from origin.server import http_protocol, ws_protocol
from tests import pg
from tests.contract.live import SocketClient
from tests.contract.support import (
    EPOCH,
    HERMES,
    OTHER_PROJECT,
    OUTSIDER,
    PROJECT,
    READER,
    RECEIVER,
    START_MS,
    TENANT,
    WRITER,
    Api,
    P,
)

LIVE = f"{P}/changes/live"


class LiveOrigin:
    """uvicorn serving `HttpApp` with the live feed on 127.0.0.1, in a daemon thread, through
    the origin's transport (`origin.transport`), so LIVE-1's refusals go through it."""

    def __init__(self, app: HttpApp, feed: LiveFeed) -> None:
        import uvicorn

        self.app = app
        self.feed = feed
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        config = uvicorn.Config(
            create_asgi_app(app, websocket=feed),
            http=http_protocol(TransportLimits()),  # the transport `aidememo serve` runs on
            ws=ws_protocol(),
            log_level="warning",
            access_log=False,
            lifespan="off",
            ws_ping_interval=None,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.005)

    def ws_url(self, path: str = LIVE, **query: Any) -> str:
        text = urlencode({k: str(v) for k, v in query.items()})
        return f"ws://127.0.0.1:{self.port}{path}" + (f"?{text}" if text else "")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()


@pytest.fixture
def origin_factory(tmp_path: Path) -> Iterator[Any]:
    made: list[tuple[LiveOrigin, SocketClient, Any]] = []
    databases: list[pg.Database] = []

    def make(
        clock: Clock | None = None,
        *,
        lease_ms: int = 120_000,
        recheck_s: float = 0.5,
        queue_max: int = 1024,
        backend: str = "sqlite",
    ) -> tuple[Api, LiveOrigin]:
        clock = clock or FixedClock(START_MS)
        store: Any
        if backend == "postgres":
            db = pg.create_database()
            databases.append(db)
            store = db.open("psycopg")
        else:
            store = SqliteStore.open_file(tmp_path / f"live{len(made)}.sqlite", synchronous="OFF")
        app = HttpApp(store, clock=clock, handoff_lease_ms=lease_ms)
        feed = LiveFeed(app, recheck_s=recheck_s, queue_max=queue_max)
        server = LiveOrigin(app, feed)
        client = SocketClient(server.port)
        made.append((server, client, store))
        api = Api("live", client, app.services.identity, clock)  # type: ignore[arg-type]
        for actor in (WRITER, RECEIVER, HERMES):
            api.provision(actor, Role.WRITER)
        api.provision(READER, Role.READER)
        api.provision(OUTSIDER, Role.WRITER, project_id=OTHER_PROJECT, epoch=None)
        return api, server

    yield make
    for server, client, store in made:
        client.close()
        server.stop()
        store.close()
    for db in databases:
        db.drop()


@pytest.fixture(params=["sqlite", "postgres"])
def live(request: pytest.FixtureRequest, origin_factory: Any) -> tuple[Api, LiveOrigin]:
    """The origin on SQLite and on PostgreSQL (psycopg): the shared reads are the store's."""
    result: tuple[Api, LiveOrigin] = origin_factory(backend=request.param)
    return result


def subscribe(
    api: Api, server: LiveOrigin, as_: str = WRITER, after_seq: int = 0, **query: Any
) -> ClientConnection:
    url = server.ws_url(project_epoch=EPOCH, after_seq=after_seq, **query)
    headers = {"Authorization": f"Bearer {api.tokens[as_]}"}
    return connect(url, additional_headers=headers, open_timeout=10, max_size=None)


def recv(ws: ClientConnection, timeout: float = 10) -> dict[str, Any]:
    message = ws.recv(timeout=timeout)
    decoded: dict[str, Any] = json.loads(message)
    return decoded


def materialized(api: Api, after_seq: int, as_: str = WRITER, **query: Any) -> dict[str, Any]:
    body: dict[str, Any] = api.get(
        f"{P}/changes/materialized",
        as_,
        query={"project_epoch": EPOCH, "after_seq": after_seq, **query},
    ).expect(200)
    return body


def note(api: Api, note_id: str, as_: str = WRITER) -> int:
    receipt = api.put_note(note_id, {"n": note_id}, as_=as_).expect(200)
    return int(receipt["project_seq"])


def seqs(batch: dict[str, Any]) -> list[int]:
    return [entry["change"]["seq"] for entry in batch["entries"]]


def test_live1_catch_up_then_push(live: tuple[Api, LiveOrigin]) -> None:
    api, server = live
    for i in range(5):
        note(api, f"n{i}")
    expected_first = materialized(api, 0, limit=2)
    with subscribe(api, server, limit=2) as ws:
        # Catch-up pages are exactly the /changes/materialized pages.
        first = recv(ws)
        assert first == expected_first
        assert recv(ws) == materialized(api, 2, limit=2)
        last = recv(ws)
        assert last == materialized(api, 4, limit=2)
        assert last["has_more"] is False and seqs(last) == [5]
        # Then every commit as it happens, one batch per commit, same entry shape.
        seq = note(api, "pushed")
        pushed = recv(ws)
        assert pushed == materialized(api, 5)
        assert seqs(pushed) == [seq] and pushed["next_cursor"]["after_seq"] == seq


def test_live1_caught_up_subscriber_gets_one_empty_page(live: tuple[Api, LiveOrigin]) -> None:
    api, server = live
    note(api, "a")
    with subscribe(api, server, after_seq=1) as ws:
        page = recv(ws)
        assert page["entries"] == [] and page["has_more"] is False
        assert page["cursor"] == page["next_cursor"] == {"project_epoch": EPOCH, "after_seq": 1}
        note(api, "b")
        assert seqs(recv(ws)) == [2]


def test_live3_vis1_hidden_commits_are_empty_batches(live: tuple[Api, LiveOrigin]) -> None:
    api, server = live
    api.session("s1")
    with (
        subscribe(api, server, as_=READER, after_seq=1) as reader,
        subscribe(api, server, as_=RECEIVER, after_seq=1) as receiver,
    ):
        assert recv(reader)["entries"] == [] and recv(receiver)["entries"] == []
        api.send("h1", "s1", RECEIVER).expect(200)
        hidden = recv(reader)
        assert hidden["entries"] == [] and hidden["next_cursor"]["after_seq"] == 2
        assert hidden["cursor"]["after_seq"] == 1
        seen = recv(receiver)
        assert seqs(seen) == [2] and seen["entries"][0]["resource"]["resource"]["kind"] == "handoff"
        assert seen == materialized(api, 1, as_=RECEIVER)
        assert hidden == materialized(api, 1, as_=READER)
        note(api, "visible")
        assert seqs(recv(reader)) == [3]
        assert seqs(recv(receiver)) == [3]


def refused(api: Api, server: LiveOrigin, as_: str | None = WRITER, **query: Any) -> Any:
    headers = {} if as_ is None else {"Authorization": f"Bearer {api.tokens[as_]}"}
    with pytest.raises(InvalidStatus) as info:
        connect(server.ws_url(**query), additional_headers=headers, open_timeout=10)
    response = info.value.response
    return response.status_code, json.loads(response.body)


def plain_get(api: Api, as_: str | None = WRITER, **query: Any) -> Any:
    reply = api.call("GET", LIVE, as_=as_, query=query)
    return reply.status, reply.body


@pytest.mark.parametrize(
    ("as_", "query", "status", "code"),
    [
        (WRITER, {"project_epoch": "other_epoch", "after_seq": 0}, 409, "cursor_epoch_mismatch"),
        (WRITER, {"project_epoch": EPOCH, "after_seq": 99}, 409, "cursor_out_of_range"),
        (None, {"project_epoch": EPOCH, "after_seq": 0}, 401, "authentication_failed"),
        (OUTSIDER, {"project_epoch": EPOCH, "after_seq": 0}, 403, "project_unauthorized"),
        (WRITER, {"project_epoch": EPOCH}, 400, "invalid_command"),
        (WRITER, {"project_epoch": EPOCH, "after_seq": 0, "x": 1}, 400, "invalid_command"),
        (WRITER, {"project_epoch": EPOCH, "after_seq": 0, "limit": 0}, 400, "invalid_change_batch"),
        (WRITER, {"project_epoch": "bad epoch", "after_seq": 0}, 400, "invalid_identifier"),
    ],
)
def test_live1_refused_before_upgrade_like_changes(
    live: tuple[Api, LiveOrigin], as_: str | None, query: dict[str, Any], status: int, code: str
) -> None:
    api, server = live
    note(api, "a")
    ws_status, ws_body = refused(api, server, as_=as_, **query)
    changes = api.call("GET", f"{P}/changes", as_=as_, query=query)
    assert (ws_status, ws_body["error"]["code"]) == (status, code)
    assert (changes.status, changes.code) == (status, code)
    assert plain_get(api, as_, **query)[0] == status


def test_live1_plain_get_is_426_after_every_check(live: tuple[Api, LiveOrigin]) -> None:
    api, _ = live
    status, body = plain_get(api, project_epoch=EPOCH, after_seq=0)
    assert (status, body["error"]["code"]) == (426, "upgrade_required")


def test_live1_websocket_elsewhere_is_refused(live: tuple[Api, LiveOrigin]) -> None:
    api, server = live
    with pytest.raises(InvalidStatus) as info:
        connect(
            server.ws_url(f"{P}/changes", project_epoch=EPOCH, after_seq=0),
            additional_headers={"Authorization": f"Bearer {api.tokens[WRITER]}"},
            open_timeout=10,
        )
    assert info.value.response.status_code == 404
    assert json.loads(info.value.response.body)["error"]["code"] == "route_not_found"


def test_live2_reconnect_from_cursor_without_loss_or_duplication(
    live: tuple[Api, LiveOrigin],
) -> None:
    api, server = live
    for i in range(3):
        note(api, f"a{i}")
    received: list[int] = []
    with subscribe(api, server) as ws:
        page = recv(ws)
        received += seqs(page)
        cursor = page["next_cursor"]["after_seq"]
        note(api, "b0")
        batch = recv(ws)
        received += seqs(batch)
        cursor = batch["next_cursor"]["after_seq"]
    for i in range(4):  # while disconnected
        note(api, f"c{i}")
    with subscribe(api, server, after_seq=cursor) as ws:
        page = recv(ws)
        received += seqs(page)
        note(api, "d0")
        received += seqs(recv(ws))
    assert received == list(range(1, 10))


def test_live2_100_concurrent_subscribers_get_every_commit_once_in_order(
    live: tuple[Api, LiveOrigin],
) -> None:
    import websockets

    api, server = live
    note(api, "before")
    total_commits = 30
    n_subs = 100
    url = server.ws_url(project_epoch=EPOCH, after_seq=0)
    actors = [WRITER, RECEIVER, HERMES, READER]

    async def follower(i: int, ready: asyncio.Event, counter: list[int]) -> list[int]:
        headers = {"Authorization": f"Bearer {api.tokens[actors[i % len(actors)]]}"}
        got: list[int] = []
        async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
            cursor = 0
            while cursor < total_commits + 1:
                batch = json.loads(await asyncio.wait_for(ws.recv(), 30))
                assert batch["cursor"]["after_seq"] == cursor
                got += seqs(batch)
                cursor = batch["next_cursor"]["after_seq"]
                if cursor >= 1 and not ready.is_set():
                    counter[0] += 1
                    if counter[0] == n_subs:
                        ready.set()
        return got

    async def writer(ready: asyncio.Event) -> None:
        await asyncio.wait_for(ready.wait(), 60)
        loop = asyncio.get_running_loop()

        def write_all() -> None:
            client = SocketClient(server.port)
            writer_api = Api("live", client, api.identity, api.clock, dict(api.tokens))
            for i in range(total_commits):
                note(writer_api, f"w{i}")
            client.close()

        await loop.run_in_executor(None, write_all)

    async def main() -> list[list[int]]:
        ready = asyncio.Event()
        counter = [0]
        tasks = [asyncio.create_task(follower(i, ready, counter)) for i in range(n_subs)]
        await writer(ready)
        return list(await asyncio.gather(*tasks))

    results = asyncio.run(main())
    assert len(results) == n_subs
    for got in results:
        assert got == list(range(1, total_commits + 2))
    assert server.feed.hubs == {}  # the hub went away with its last subscriber


def test_live5_suspended_member_is_closed_with_4403_within_5_s(
    origin_factory: Any,
) -> None:
    api, server = origin_factory(recheck_s=2.0)
    with subscribe(api, server, as_=READER) as ws:
        recv(ws)
        api.set_status(READER, MemberStatus.SUSPENDED)  # no commit: found by the recheck
        started = time.monotonic()
        error = recv(ws, timeout=6)
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(timeout=6)
        elapsed = time.monotonic() - started
    assert error["error"]["code"] == "project_unauthorized"
    assert info.value.rcvd is not None and info.value.rcvd.code == 4403
    assert elapsed < 5.0


def test_live5_revoked_token_is_closed_with_4401(origin_factory: Any) -> None:
    import hashlib

    api, server = origin_factory(recheck_s=1.0)
    with subscribe(api, server, as_=RECEIVER) as ws:
        recv(ws)
        api.identity.revoke_token(hashlib.sha256(api.tokens[RECEIVER].encode()).digest())
        started = time.monotonic()
        error = recv(ws, timeout=6)
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(timeout=6)
    assert error["error"]["code"] == "authentication_failed"
    assert info.value.rcvd is not None and info.value.rcvd.code == 4401
    assert time.monotonic() - started < 5.0


def test_live5_deleted_tenant_ends_the_subscription(origin_factory: Any) -> None:
    """Deleting the tenant removes its tokens and memberships: the origin, which re-checks the
    token, closes with 4401 (a front without the token check would close with 4403)."""
    api, server = origin_factory(recheck_s=1.0)
    with subscribe(api, server) as ws:
        recv(ws)
        server.app.services.archive.delete_tenant(TENANT, confirm=TENANT)
        assert recv(ws, timeout=6)["error"]["code"] == "authentication_failed"
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(timeout=6)
    assert info.value.rcvd is not None and info.value.rcvd.code == 4401


def test_live5_suspension_is_seen_on_the_next_push(live: tuple[Api, LiveOrigin]) -> None:
    api, server = live
    server.feed.recheck_s = 3600.0  # only the push itself may notice
    with subscribe(api, server, as_=READER) as ws:
        recv(ws)
        api.set_status(READER, MemberStatus.SUSPENDED)
        note(api, "after_suspension")
        assert recv(ws)["error"]["code"] == "project_unauthorized"
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(timeout=5)
    assert info.value.rcvd is not None and info.value.rcvd.code == 4403


def test_live7_lease_expired_notice_reaches_participants(origin_factory: Any) -> None:
    api, server = origin_factory(SystemClock(), lease_ms=400)
    api.session("s1")
    api.send("h1", "s1", RECEIVER).expect(200)
    with (
        subscribe(api, server, as_=RECEIVER, after_seq=2) as receiver,
        subscribe(api, server, as_=WRITER, after_seq=2) as sender,
        subscribe(api, server, as_=READER, after_seq=2) as reader,
    ):
        for ws in (receiver, sender, reader):
            recv(ws)
        receipt = api.transition("h1", "accept", {"claim_id": "c1"}, 1).expect(200)
        accepted_at = time.monotonic()
        for ws in (receiver, sender, reader):
            assert recv(ws)["next_cursor"]["after_seq"] == receipt["project_seq"]
        for ws in (receiver, sender):
            notice = recv(ws, timeout=5)
            assert notice == {"type": "lease_expired", "handoff_id": "h1", "claim_id": "c1"}
        assert time.monotonic() - accepted_at >= 0.3
        with pytest.raises(TimeoutError):
            reader.recv(timeout=0.5)  # not a participant: no notice (VIS-1)
        # Nothing was written by the timer (HO-6): the head did not move.
        assert api.head() == receipt["project_seq"]


def test_live7_heartbeat_renews_so_no_early_notice(origin_factory: Any) -> None:
    api, server = origin_factory(SystemClock(), lease_ms=600)
    api.session("s1")
    api.send("h1", "s1", RECEIVER).expect(200)
    with subscribe(api, server, as_=RECEIVER, after_seq=2) as ws:
        recv(ws)
        accept = api.transition("h1", "accept", {"claim_id": "c1"}, 1).expect(200)
        recv(ws)
        time.sleep(0.35)
        beat = api.transition("h1", "heartbeat", {"claim_id": "c1"}, accept["revision"])
        beat_at = time.monotonic()
        recv(ws)
        assert beat.status == 200
        notice = recv(ws, timeout=5)
        assert notice["type"] == "lease_expired"
        assert time.monotonic() - beat_at >= 0.5  # announced at the renewed expiry


class RawWebSocket:
    """A bare WebSocket client on a plain socket that reads only when told to (the
    `websockets` clients read eagerly in the background, so they are never slow)."""

    def __init__(self, port: int, target: str, token: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect
        self.sock.connect(("127.0.0.1", port))
        self.sock.settimeout(60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
            ).encode()
        )
        self.buffer = b""
        head = self._until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(marker)
        return head

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed without a close frame")
        self.buffer += chunk

    def _take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._fill()
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def frame(self) -> tuple[int, bytes]:
        """`(opcode, payload)` of the next unfragmented server frame."""
        first, second = self._take(2)
        length = second & 0x7F
        if length == 126:
            length = int.from_bytes(self._take(2), "big")
        elif length == 127:
            length = int.from_bytes(self._take(8), "big")
        return first & 0x0F, self._take(length)

    def close(self) -> None:
        self.sock.close()


def test_live6_slow_subscriber_is_closed_and_commits_never_wait(origin_factory: Any) -> None:
    api, server = origin_factory(queue_max=2)
    big = "x" * 60_000
    target = f"{LIVE}?project_epoch={EPOCH}&after_seq=0"
    slow = RawWebSocket(server.port, target, api.tokens[WRITER])
    try:
        started = time.monotonic()
        for i in range(200):  # ~12 MB that the subscriber does not read meanwhile
            api.put_note(f"big{i}", {"text": big}).expect(200)
        writing = time.monotonic() - started
        texts: list[dict[str, Any]] = []
        while True:
            opcode, payload = slow.frame()
            if opcode == 8:
                close = int.from_bytes(payload[:2], "big")
                break
            assert opcode == 1
            texts.append(json.loads(payload))
    finally:
        slow.close()
    assert close == 4429
    assert texts[-1]["error"]["code"] == "feed_overflow"
    delivered = [s for m in texts[:-1] for s in seqs(m)]
    assert 0 < len(delivered) < 200
    assert delivered == list(range(1, len(delivered) + 1))  # in order, no gap, then closed
    assert writing < 60
    # The feed itself is unharmed: a new subscriber gets everything.
    with subscribe(api, server, limit=1000) as ws:
        assert seqs(recv(ws)) == list(range(1, 201))


def test_live9_once_listen_takes_effect_every_hub_reads_again(
    origin_factory: Any, tmp_path: Path
) -> None:
    """A commit this process was not told of (another process's, made before its `LISTEN` took
    effect) reaches the subscribers when the listener reports `LISTEN` (`LiveFeed.listening`),
    not at the next re-read, an hour away here. The hub tells the listener when it is wanted."""
    api, server = origin_factory(recheck_s=3600.0)
    wanted: list[bool] = []
    server.feed.on_demand = wanted.append
    other = SqliteStore.open_file(tmp_path / "live0.sqlite", synchronous="OFF")
    try:
        with subscribe(api, server) as ws:
            assert recv(ws)["next_cursor"]["after_seq"] == 0
            assert wanted == [True]
            hub = server.feed.hubs[Scope(TENANT, PROJECT)]
            deadline = time.monotonic() + 30
            while hub.seq is None or hub.reading:  # the hub's first read is over
                assert time.monotonic() < deadline
                time.sleep(0.01)
            body = {
                "command_id": "cmd_elsewhere",
                "project_id": PROJECT,
                "expected_revision": None,
                "operation": "resource.put",
                "resource": {"kind": "custom.note", "id": "n1"},
                "change": "upsert",
                "payload": {},
            }
            headers = {
                "authorization": f"Bearer {api.tokens[WRITER]}",
                "content-type": "application/json",
            }
            request = Request("POST", "/v1/commands", "", headers, json.dumps(body).encode())
            reply = HttpApp(other, clock=FixedClock(START_MS)).dispatch(request)
            assert reply.status == 200, reply.body
            server.feed.listening()
            assert seqs(recv(ws, timeout=30)) == [json.loads(reply.body)["project_seq"]]
        deadline = time.monotonic() + 30
        while wanted != [True, False]:
            assert time.monotonic() < deadline, wanted
            time.sleep(0.02)
    finally:
        other.close()
