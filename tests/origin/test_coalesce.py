"""Answers held to the end of the loop iteration (SPEC.md HTTP-11, `origin.coalesce`).

The unit tests hold answers on `origin.transport.HttpConnection`s over real transports (the
server ends of socket pairs, read with plain sockets); the last ones send bytes to
`tests.origin.probe_serve` on a real socket.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvicorn
from uvicorn.server import ServerState

from aidememo.http.types import Request, Response
from origin.asgi import create_asgi_app
from origin.coalesce import loop_turn
from origin.transport import HttpConnection
from tests.origin.http_support import Conn, request
from tests.origin.test_request_path import Probe, probes, start

__all__ = ["probes"]  # the fixture, imported for the probe tests

Scenario = Callable[[list[HttpConnection], list[socket.socket]], Awaitable[None]]


class _Unused:
    def dispatch(self, request: Request) -> Response:
        raise AssertionError("no request is read here")


def run(connections: int, scenario: Scenario) -> None:
    """`scenario(helds, peers)` on a fresh loop: `helds[i]` is the connection over one end of
    a socket pair, `peers[i]` is the other end (non-blocking)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        config = uvicorn.Config(create_asgi_app(_Unused()))
        helds: list[HttpConnection] = []
        peers, transports = [], []
        for _ in range(connections):
            ours, theirs = socket.socketpair()
            theirs.setblocking(False)
            held = HttpConnection(config, ServerState(), {})
            transport, _ = await loop.connect_accepted_socket(lambda h=held: h, ours)
            transports.append(transport)
            helds.append(held)
            peers.append(theirs)
        try:
            await scenario(helds, peers)
        finally:
            for transport in transports:
                transport.abort()
            for peer in peers:
                peer.close()

    asyncio.run(main())


def received(peer: socket.socket) -> bytes:
    """What `peer` can read now, without waiting (b"" at EOF or when nothing came)."""
    out = b""
    while True:
        try:
            chunk = peer.recv(65536)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


async def end_of_iteration() -> None:
    """Let the loop run its ready callbacks (the flush among them) and poll once."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def test_http11_answers_of_one_iteration_are_written_together_at_its_end() -> None:
    async def scenario(helds: list[HttpConnection], peers: list[socket.socket]) -> None:
        written: list[list[bytes]] = []

        def answer_all() -> None:  # one callback answers every connection, as a read burst does
            for n, held in enumerate(helds):
                held.hold(b"answer-%d;" % n)
            written.append([received(peer) for peer in peers])  # before the iteration ends

        asyncio.get_running_loop().call_soon(answer_all)
        await end_of_iteration()
        assert written == [[b""] * len(peers)]
        assert [received(peer) for peer in peers] == [b"answer-%d;" % n for n in range(len(helds))]

    run(4, scenario)


def test_http11_the_turns_requests_are_answered_in_order_before_its_writes() -> None:
    async def scenario(helds: list[HttpConnection], peers: list[socket.socket]) -> None:
        turn = loop_turn(asyncio.get_running_loop())
        events: list[str] = []

        def answer(n: int) -> Callable[[], None]:
            def run() -> None:
                events.append(f"answer {n}: peer saw {received(peers[0])!r}")
                helds[0].hold(b"%d;" % n)
                if n == 0:  # an answer that makes another request ready (pipelining)
                    turn.later(answer(2))

            return run

        def read_burst() -> None:  # the turn's reads: each request only queued
            turn.later(answer(0))
            turn.later(answer(1))
            events.append("reads done")

        asyncio.get_running_loop().call_soon(read_burst)
        await end_of_iteration()
        assert events == [
            "reads done",
            "answer 0: peer saw b''",
            "answer 1: peer saw b''",  # nothing is written while the turn still answers
            "answer 2: peer saw b''",
        ]
        assert received(peers[0]) == b"0;1;2;"

    run(1, scenario)


def test_http11_two_answers_held_on_one_connection_keep_their_order() -> None:
    async def scenario(helds: list[HttpConnection], peers: list[socket.socket]) -> None:
        helds[0].hold(b"first;")
        helds[0].hold(b"second;")
        await end_of_iteration()
        assert received(peers[0]) == b"first;second;"

    run(1, scenario)


def test_http11_another_write_or_a_close_writes_the_held_answer_first() -> None:
    async def scenario(helds: list[HttpConnection], peers: list[socket.socket]) -> None:
        held, peer = helds[0], peers[0]
        held.hold(b"held;")
        held.write(b"refusal;")  # a refusal written at once in the same read
        assert received(peer) == b"held;refusal;"
        held.hold(b"last;")
        held.close()
        await end_of_iteration()
        assert received(peer) == b"last;"
        assert peer.recv(10) == b""  # then EOF: closing did not drop the held answer
        await end_of_iteration()  # the flush finds nothing left and writes nothing

    run(1, scenario)


def test_http11_a_lost_or_aborted_connection_drops_what_was_held() -> None:
    async def scenario(helds: list[HttpConnection], peers: list[socket.socket]) -> None:
        lost, aborted, kept = helds
        lost.hold(b"never;")
        lost.connection_lost(None)
        aborted.hold(b"never;")
        aborted.transport.abort()
        kept.hold(b"kept;")
        await end_of_iteration()
        assert received(peers[0]) == b""
        assert received(peers[2]) == b"kept;"  # the others of the iteration are still written

    run(3, scenario)


def test_http11_an_answer_held_on_a_closing_transport_is_not_written() -> None:
    async def scenario(helds: list[HttpConnection], peers: list[socket.socket]) -> None:
        held = helds[0]
        held.hold(b"late;")
        held.transport.close()  # closed under the connection (the peer went away meanwhile)
        await end_of_iteration()
        assert held.transport.is_closing()
        assert received(peers[0]) == b""

    run(1, scenario)


def test_http11_pipelined_answers_come_before_the_refusal_of_a_bad_request(
    tmp_path: Path, probes: list[Probe]
) -> None:
    probe = start(probes, tmp_path)
    with Conn(probe.port) as conn:
        burst = b"".join(request("GET", f"/seq/{n}") for n in range(4))
        conn.send(burst + b"NOT HTTP AT ALL\r\n\r\n")  # one read: four answers, then a 400
        answers = [conn.read() for _ in range(5)]
        assert [a.json()["path"] for a in answers[:4]] == [f"/seq/{n}" for n in range(4)]
        assert {a.json()["path_taken"] for a in answers[:4]} == {"whole"}
        assert answers[4].status_line.startswith(b"HTTP/1.1 400")
        assert conn.closed()


def test_http11_many_connections_answered_in_one_burst(tmp_path: Path, probes: list[Probe]) -> None:
    probe = start(probes, tmp_path)
    conns = [Conn(probe.port) for _ in range(24)]
    try:
        for n, conn in enumerate(conns):  # all sent before any is read
            conn.send(request("GET", f"/burst/{n}") + request("GET", f"/burst/{n}/again"))
        for n, conn in enumerate(conns):
            assert conn.read().json()["path"] == f"/burst/{n}"
            assert conn.read().json()["path"] == f"/burst/{n}/again"
    finally:
        for conn in conns:
            conn.sock.close()
