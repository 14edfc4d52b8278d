"""A test harness: `origin.asgi.create_asgi_app(dispatcher)` behind the origin's transport
(`origin.transport`), served by uvicorn in a daemon thread named `LOOP_THREAD` on a loopback
port, for tests that speak raw HTTP to it (`tests.origin.http_support.Conn`)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

from origin.asgi import create_asgi_app
from origin.lanes import DISPATCH_THREADS
from origin.limits import TransportLimits
from origin.server import http_protocol
from tests.origin.http_support import Conn

LOOP_THREAD = "origin-loop"


class ThreadServer:
    """One served dispatcher; `close` (or leaving the `with`) stops the server and the
    scheduler's threads."""

    def __init__(self, dispatcher: Any, threads: int = DISPATCH_THREADS) -> None:
        import uvicorn

        self.app = create_asgi_app(dispatcher, threads=threads)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            http=http_protocol(TransportLimits()),
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])),
            name=LOOP_THREAD,
            daemon=True,
        )
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.005)

    def conn(self) -> Conn:
        """A new client connection."""
        return Conn(self.port)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.app.scheduler.stop()  # type: ignore[attr-defined]

    def __enter__(self) -> ThreadServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
