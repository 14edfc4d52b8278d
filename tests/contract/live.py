"""A live uvicorn server in a thread, and a `Client` that talks to it over a real socket.

The server serves `origin.asgi.create_asgi_app(HttpApp(...))` on a loopback port through the
origin's own transport (`origin.server.http_protocol`: the limits of HTTP-4/HTTP-5 and the
request path of HTTP-9), so every socket test also checks that path; the app
keeps its injected clock, so socket tests advance time exactly like in-process ones.
"""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import time
from typing import Any
from urllib.parse import quote, urlsplit

from aidememo.http.app import HttpApp
from aidememo.http.types import Request, Response
from tests.contract.support import (
    Headers,
    Query,
    body_limit,
    decode_body,
    encode_query,
    request_parts,
)

# Characters left as they are in a request target: the path grammar plus "%" (escapes a test
# wrote on purpose stay escapes; anything else, such as a space, is percent-encoded).
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"


class SwitchApp:
    """A dispatcher that forwards to whichever app the current test installed, so one server
    (about 0.2 s to start and stop) serves every socket test of the session."""

    def __init__(self) -> None:
        self.app: HttpApp | None = None

    def dispatch(self, request: Request) -> Response:
        assert self.app is not None, "no app installed"
        return self.app.dispatch(request)


_SHARED: tuple[LiveServer, SwitchApp] | None = None


def shared_server(app: HttpApp) -> LiveServer:
    """The session's one socket server, now serving `app`."""
    global _SHARED  # noqa: PLW0603 - one server per test process
    if _SHARED is None:
        switch = SwitchApp()
        _SHARED = (LiveServer(switch).start(), switch)
    server, switch = _SHARED
    switch.app = app
    return server


class LiveServer:
    """uvicorn serving one app on 127.0.0.1, in a daemon thread."""

    def __init__(self, app: HttpApp | SwitchApp) -> None:
        import uvicorn

        from origin.asgi import create_asgi_app
        from origin.limits import TransportLimits
        from origin.server import http_protocol

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Accepted connections inherit this: without it, Nagle's algorithm and delayed ACKs
        # add about 40 ms to every exchange on loopback.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        config = uvicorn.Config(
            create_asgi_app(app),
            log_level="warning",
            access_log=False,
            lifespan="off",
            http=http_protocol(TransportLimits()),
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SocketClient:
    """`Client` over HTTP(S)/1.1 with keep-alive, reconnecting when the server closes.

    `target` is a loopback port (a server of this test run) or a base URL (a live edge,
    possibly https and with a path prefix).
    """

    def __init__(self, target: int | str, *, timeout: float = 30) -> None:
        parts = urlsplit(target if isinstance(target, str) else f"http://127.0.0.1:{target}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self.conn is None:
            cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            self.conn = cls(self.host, self.port, timeout=self.timeout)
        return self.conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        json: Any = None,
        body: bytes | None = None,
        headers: Headers | None = None,
        query: Query = None,
    ) -> tuple[int, dict[str, str], Any]:
        hdrs, raw = request_parts(token, json, body, headers)
        query_string = encode_query(query)
        target = self.prefix + quote(path, safe=_PATH_SAFE)
        target += f"?{query_string}" if query_string else ""
        send: bytes | None = raw if raw or method not in ("GET", "DELETE") else None
        if len(raw) > body_limit(method, path):
            # The adapter refuses by Content-Length and closes without reading the body;
            # announce it and send none, as a client that waits for 100-continue would.
            hdrs["content-length"] = str(len(raw))
            send = None
        conn = self._connection()
        try:
            conn.request(method, target, body=send, headers=hdrs)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):  # timeouts included: never reuse it
            self.close()
            raise
        result_headers = {k.lower(): v for k, v in response.getheaders()}
        if response.will_close:
            self.close()
        return response.status, result_headers, decode_body(data)
