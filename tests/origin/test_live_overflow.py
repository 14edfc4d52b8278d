"""The live feed's bounds against a real `aidememo serve` process (LIVE-6): a
subscriber that never reads while 1 MB commits are written is closed with `feed_overflow`
(4429) and the server's memory (VmRSS) returns near where it was; an inbound frame over
64 KiB closes the socket before its payload is buffered.

The RSS figures are printed (run with `-s` to see them); the assertion is a bound, never a
timing: less than half of what the commits written meanwhile weigh, so a server that kept
them (or kept the heap arenas they grew, `origin.allocator`) fails it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aidememo.cli.main import main
from aidememo.domain.limits import LIVE_PENDING_MAX_BYTES
from aidememo.service.access import Caller
from aidememo.service.live import FeedCursor, LiveSubscription
from origin.allocator import return_large_blocks
from origin.live import Subscriber
from tests import pg
from tests.origin.test_live_feed import RawWebSocket
from tests.origin.test_serve_process import ServeProcess

MIB = 1 << 20
BIG_TEXT = 1_000_000  # one commit's body: a little under the 1 MiB request limit (ID-3)
COMMITS = 100  # 100 MB, more than twice GROWTH_BOUND and twelve times the 8 MiB bound
GROWTH_BOUND = 48 * MIB
LIVE = "/v1/projects/demo/changes/live"


def rss(pid: int) -> int:
    """The process's resident set size in bytes (`VmRSS` of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(
    request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Iterator[tuple[ServeProcess, str]]:
    """A real server on a SQLite file or a PostgreSQL schema, with a writer token for
    project `demo`."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to read the server's VmRSS")
    with contextlib.ExitStack() as stack:
        if request.param == "postgres":
            database = stack.enter_context(pg.fresh_database()).url
        else:
            database = str(tmp_path / "aidememo.db")
        token_file = tmp_path / "demo.token"
        assert main(["token", "new", "--out", str(token_file)]) == 0
        ids = ["--tenant-id", "local", "--project-id", "demo", "--actor-id", "demo-agent"]
        args = ["bootstrap", "--database", database, *ids, "--token-file", str(token_file)]
        assert main(args) == 0
        capsys.readouterr()
        server = ServeProcess(tmp_path / "home", tmp_path / "serve.log", "--database", database)
        stack.callback(server.kill)
        yield server, token_file.read_text().strip()


def _command(n: int) -> dict[str, Any]:
    return {
        "command_id": f"big-{n}",
        "project_id": "demo",
        "operation": "resource.put",
        "resource": {"kind": "custom.note", "id": f"big-{n}"},
        "change": "upsert",
        "payload": {"n": n, "text": os.urandom(BIG_TEXT // 2).hex()},
    }


def _head(client: httpx.Client) -> tuple[str, int]:
    identity = client.get("/v1/projects/demo/identity").json()
    changes = client.get(
        "/v1/projects/demo/changes",
        params={"project_epoch": identity["project_epoch"], "after_seq": 0, "limit": 10_000},
    ).json()
    return identity["project_epoch"], int(changes["next_cursor"]["after_seq"])


def test_live6_non_reading_subscriber_is_closed_4429_and_memory_returns(
    served: tuple[ServeProcess, str],
) -> None:
    server, token = served
    pid = server.proc.pid
    headers = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60.0) as client:
        # Warm up the write and read paths with the same sizes, then take the baseline.
        for n in range(3):
            assert client.post("/v1/commands", json=_command(n)).status_code == 200
        epoch, head = _head(client)
        time.sleep(0.5)
        before = rss(pid)
        slow = RawWebSocket(server.port, f"{LIVE}?project_epoch={epoch}&after_seq={head}", token)
        try:
            during = before
            for n in range(3, 3 + COMMITS):
                reply = client.post("/v1/commands", json=_command(n))
                assert reply.status_code == 200, reply.text  # commits never wait for it
                during = max(during, rss(pid))
            texts: list[dict[str, Any]] = []
            close: int | None = None
            try:
                while True:
                    opcode, payload = slow.frame()
                    if opcode == 8:
                        close = int.from_bytes(payload[:2], "big")
                        break
                    if opcode in (9, 10):  # the server's keep-alive ping (never answered)
                        continue
                    assert opcode == 1
                    texts.append(json.loads(payload))
            except (EOFError, ConnectionResetError):
                close = None  # closed without a close frame: also a close
        finally:
            slow.close()
        time.sleep(1.0)  # let the server finish closing its side
        after = rss(pid)
        # The feed is unharmed: a new write still commits.
        assert client.post("/v1/commands", json=_command(999)).status_code == 200
    delivered = [e for m in texts if "error" not in m for e in m.get("entries", [])]
    print(
        f"\nslow subscriber: VmRSS before {before / MIB:.1f} MiB, during (peak) "
        f"{during / MIB:.1f} MiB, after close {after / MIB:.1f} MiB; "
        f"{len(delivered)} of {COMMITS} commits delivered, close {close}"
    )
    assert close in (4429, None)
    if close == 4429:
        assert texts[-1]["error"]["code"] == "feed_overflow"
    assert len(delivered) < COMMITS  # it was cut off, not served everything
    assert during - before < GROWTH_BOUND
    assert after - before < GROWTH_BOUND
    assert LIVE_PENDING_MAX_BYTES == 8 * MIB


def test_live6_inbound_frame_over_64_kib_is_refused_with_1009(
    served: tuple[ServeProcess, str],
) -> None:
    server, token = served
    with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {token}"}) as client:
        epoch, head = _head(client)
    ws = RawWebSocket(server.port, f"{LIVE}?project_epoch={epoch}&after_seq={head}", token)
    try:
        opcode, _ = ws.frame()  # the first (empty) catch-up page
        assert opcode == 1
        # A masked text frame announcing 16 MiB: only its header and a little payload go out.
        ws.sock.sendall(bytes([0x81, 0xFF]) + struct.pack(">Q", 16 * MIB) + os.urandom(4))
        ws.sock.sendall(b"x" * 1024)
        opcode, payload = ws.frame()
        assert opcode == 8
        assert int.from_bytes(payload[:2], "big") == 1009  # message too big
    finally:
        ws.close()
    with httpx.Client(base_url=server.url) as client:
        assert client.get("/health").status_code == 200


def test_live6_pending_bytes_are_bounded_and_dropped_on_overflow() -> None:
    """The subscriber's own accounting: one item always fits when nothing is pending, the
    bound counts bytes until they are sent, and an overflow drops the queue."""

    def subscriber(max_bytes: int) -> Subscriber:
        sub = LiveSubscription(Caller("tenant_t", "actor_a"), "project_p", "epoch_e", 0, 100)
        return Subscriber(FeedCursor(sub), 100, max_bytes)

    async def run() -> None:
        sub = subscriber(1000)
        sub.offer("x" * 600)
        sub.offer("y" * 300)
        assert (sub.pending, sub.queue.qsize(), sub.failure) == (900, 2, None)
        _, size = sub.queue.get_nowait()  # the sender took one: still pending until sent
        assert sub.pending == 900
        sub.offer("z" * 200)  # 900 + 200 > 1000
        assert sub.failure is not None and sub.failure.code.value == "feed_overflow"
        assert "1000 bytes" in sub.failure.message
        assert sub.queue.empty() and sub.pending == 0
        sub.sent(size)  # the sender's late report cannot go below zero
        assert sub.pending == 0
        sub.offer("late")  # a closing subscriber holds nothing more
        assert sub.queue.empty()

        alone = subscriber(1000)
        alone.offer("x" * 5000)  # larger than the bound, but nothing else is pending
        assert alone.failure is None and alone.pending == 5000
        _, size = alone.queue.get_nowait()
        alone.sent(size)
        assert alone.pending == 0

    asyncio.run(run())


def test_live6_the_server_returns_large_freed_blocks_to_the_system() -> None:
    """glibc takes the fixed mmap threshold (`origin.allocator`); elsewhere nothing changes."""
    glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert return_large_blocks() is glibc
