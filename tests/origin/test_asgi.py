"""The origin's ASGI application (lifespan and WebSockets; HTTP is the transport's,
tests/origin/test_transport_entry.py), driven by hand-written ASGI messages."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from aidememo.domain.errors import AidememoError
from aidememo.http.types import Request, Response
from origin.asgi import create_asgi_app


class Recorder:
    """A dispatcher that remembers what it saw, reads the body as the core would (unless
    `read` is False; its bytes, or the error code reading it raised) and answers 200 `{}`."""

    def __init__(
        self, response: Response | None = None, fail: bool = False, read: bool = True
    ) -> None:
        self.requests: list[Request] = []
        self.bodies: list[bytes | str] = []
        self.response = response or Response(200, [("content-type", "application/json")], b"{}")
        self.fail = fail
        self.read = read

    def dispatch(self, request: Request) -> Response:
        self.requests.append(request)
        if self.read:
            try:
                self.bodies.append(request.body.read())
            except AidememoError as error:
                self.bodies.append(error.code.value)
        if self.fail:
            raise RuntimeError("boom")
        return self.response


def call(
    app: Any, scope: dict[str, Any], messages: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], int]:
    """Run one ASGI call; returns what was sent and how many messages were received."""
    sent: list[dict[str, Any]] = []
    pending = list(messages)
    received = 0

    async def receive() -> dict[str, Any]:
        nonlocal received
        received += 1
        if pending:
            return pending.pop(0)
        await asyncio.sleep(3600)  # like a server: nothing more until the client speaks
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(scope, receive, send), 5))
    return sent, received


def test_http9_lifespan_startup_and_shutdown_run_hooks() -> None:
    calls: list[str] = []
    app = create_asgi_app(
        Recorder(), on_startup=lambda: calls.append("up"), on_shutdown=lambda: calls.append("down")
    )
    sent, _ = call(
        app,
        {"type": "lifespan", "asgi": {"version": "3.0"}},
        [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}],
    )
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert calls == ["up", "down"]


def test_http9_lifespan_startup_failure_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    def explode() -> None:
        raise RuntimeError("no store")

    with caplog.at_level(logging.CRITICAL):
        sent, _ = call(
            create_asgi_app(Recorder(), on_startup=explode),
            {"type": "lifespan", "asgi": {"version": "3.0"}},
            [{"type": "lifespan.startup"}],
        )
    assert sent == [{"type": "lifespan.startup.failed", "message": "no store"}]


def test_live1_websocket_is_refused() -> None:
    sent, _ = call(
        create_asgi_app(Recorder()),
        {"type": "websocket", "path": "/ws", "headers": []},
        [{"type": "websocket.connect"}],
    )
    assert sent == [{"type": "websocket.close", "code": 1008}]


def test_http9_an_http_scope_is_not_served_through_asgi() -> None:
    with pytest.raises(RuntimeError):
        call(create_asgi_app(Recorder()), {"type": "http", "method": "GET", "path": "/"}, [])
