"""The synchronous client's default transport (`aidememo.client.connection`) on real sockets.

Each test runs a small loopback server that misbehaves on purpose (closes a kept connection,
never answers, cuts an answer short, is not there), and checks that the client sees the
failure as CLIENT-1 and CLIENT-4 say: retried once, then `AidememoUnreachable`.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from aidememo.client import AidememoUnreachable, Client
from aidememo.client.connection import KeepAliveTransport

IDENTITY = {
    "tenant_id": "t",
    "project_id": "p",
    "project_epoch": "e",
    "actor_id": "a",
    "role": "writer",
}

Handler = Callable[[socket.socket, int], None]


def _answer(conn: socket.socket, *, close: bool = False, cut: bool = False) -> None:
    """Read one request head and answer it with the identity (or half of it)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    body = json.dumps(IDENTITY).encode()
    head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
    head += "connection: close\r\n\r\n" if close else "\r\n"
    conn.sendall(head.encode() + (body[:5] if cut else body))


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], int]]:
    """`serve(handler)`: a loopback port whose n-th accepted connection goes to
    `handler(conn, n)` in a thread of its own."""
    listeners: list[socket.socket] = []

    def start(handler: Handler) -> int:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def run(conn: socket.socket, n: int) -> None:
            with conn:
                handler(conn, n)

        def loop() -> None:
            n = 0
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                threading.Thread(target=run, args=(conn, n), daemon=True).start()
                n += 1

        threading.Thread(target=loop, daemon=True).start()
        port: int = listener.getsockname()[1]
        return port

    yield start
    for listener in listeners:
        listener.close()


def _client(port: int, **options: float) -> Client:
    return Client(
        f"http://127.0.0.1:{port}", "token", "p", transport=KeepAliveTransport(), **options
    )


def test_client1_a_kept_connection_the_server_closed_is_replaced(
    serve: Callable[[Handler], int],
) -> None:
    connections: list[int] = []

    def handler(conn: socket.socket, n: int) -> None:
        connections.append(n)
        _answer(conn)  # keep-alive answered, then the server closes the connection

    with _client(serve(handler)) as client:
        for _ in range(3):
            assert client.identity().actor_id == "a"
    assert connections == [0, 1, 2]


def test_client1_keep_alive_reuses_one_connection(serve: Callable[[Handler], int]) -> None:
    connections: list[int] = []

    def handler(conn: socket.socket, n: int) -> None:
        connections.append(n)
        for _ in range(3):
            _answer(conn)

    with _client(serve(handler)) as client:
        for _ in range(3):
            client.identity()
    assert connections == [0]


def test_client1_client4_no_answer_in_time_is_retried_then_unreachable(
    serve: Callable[[Handler], int],
) -> None:
    attempts: list[int] = []
    done = threading.Event()

    def handler(conn: socket.socket, n: int) -> None:
        attempts.append(n)
        conn.recv(65536)
        done.wait(5)  # never answers

    with _client(serve(handler), timeout=0.2) as client:
        with pytest.raises(AidememoUnreachable) as failed:
            client.identity()
    done.set()
    assert failed.value.retryable and "ReadTimeout" in failed.value.message
    assert len(attempts) == 2  # the call and its one retry


def test_client1_an_answer_cut_short_is_retried(serve: Callable[[Handler], int]) -> None:
    def handler(conn: socket.socket, n: int) -> None:
        _answer(conn, cut=n == 0)  # the first answer stops after five bytes of its body

    with _client(serve(handler)) as client:
        assert client.identity().project_epoch == "e"


def test_client4_nobody_listening_is_unreachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with _client(port) as client:
        with pytest.raises(AidememoUnreachable) as failed:
            client.identity()
    assert failed.value.status is None and "ConnectError" in failed.value.message
