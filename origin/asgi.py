"""A thin ASGI 3 adapter around the core's framework-free `dispatch(request) -> response`.

The adapter only translates; every decision about a request (routing, limits, auth, errors)
is the core's request pipeline (`aidememo.http.pipeline`), so the origin and the edge answer
identically, and where a request runs is `origin.lanes`' decision, the same on the
transport's direct path (`origin.direct`, which the adapter carries as its `direct`
attribute). What it does:

- Hands the core the body as a `Body` (`aidememo.http.body`) without reading ahead of the
  pipeline: a bodiless request gets the empty body; a `Content-Length` above 1 MiB (the
  smallest route limit) gets a stream with nothing read yet, so stage one can refuse it
  unread; otherwise the first ASGI message is received, and a body that is whole in it is
  handed over whole. A body still arriving is an `AsgiBody`: the dispatch, in the pool then,
  receives each further chunk from the event loop (`asyncio.run_coroutine_threadsafe`) only
  when the core reads it, after stage one passed, counted against the route's limit. A
  response to a request whose body was not read to its end closes the connection, so the
  rest is never received.
- Folds the headers and assigns the request id (`origin.asgi_common`).
- Sends a `Response.stream` (an artifact download) chunk by chunk, each read in a pool thread.
- Logs one access line per request (`origin.accesslog.ACCESS`).
- Answers the ASGI `lifespan` protocol; at shutdown the scheduler's threads end, then
  `on_shutdown` (closing the store) runs, after the server has finished its requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from asyncio import get_running_loop
from collections.abc import Callable, Iterator
from typing import Protocol

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES
from aidememo.http.body import EMPTY, Body, StreamBody, declared_length
from aidememo.http.types import Request
from origin.accesslog import ACCESS
from origin.asgi_common import (
    AsgiApp,
    AsgiMessage,
    AsgiReceive,
    AsgiScope,
    AsgiSend,
    bodyless,
    fold_headers,
    new_request_id,
    out_headers,
    request_id,
    send_stream,
)
from origin.direct import DirectEntry
from origin.lanes import DISPATCH_THREADS, Dispatcher, Scheduler

__all__ = ["AsgiApp", "AsgiBody", "Dispatcher", "create_asgi_app", "new_request_id"]

ERROR_LOGGER = "aidememo.error"


class WebSocketHandler(Protocol):
    """What serves `websocket` scopes: `origin.live.LiveFeed` fits."""

    async def handle(self, scope: AsgiScope, receive: AsgiReceive, send: AsgiSend) -> None:
        """Serve one WebSocket from its connect to its close."""
        ...


class AsgiBody(StreamBody):
    """A body still arriving over ASGI, read from a worker thread: each chunk after `first` is
    received on the event loop when the core asks for it. When the client goes away the read
    raises and `aborted` is set, and the adapter sends nothing."""

    __slots__ = ("aborted",)

    def __init__(
        self,
        receive: AsgiReceive,
        loop: asyncio.AbstractEventLoop,
        length: int | None,
        first: bytes | None,
    ) -> None:
        super().__init__(self._receive(receive, loop, first), length)
        self.aborted = False

    def _receive(
        self, receive: AsgiReceive, loop: asyncio.AbstractEventLoop, first: bytes | None
    ) -> Iterator[bytes]:
        async def next_message() -> AsgiMessage:
            return await receive()

        if first is not None:
            yield first
        while True:
            message = asyncio.run_coroutine_threadsafe(next_message(), loop).result()
            if message["type"] != "http.request":
                self.aborted = True
                raise fail(ErrorCode.INVALID_COMMAND, "the client went away mid-body")
            yield message.get("body", b"")
            if not message.get("more_body", False):
                return


_GONE = Body.unread(None)  # what `_first` answers when the client went away


async def _first(receive: AsgiReceive, length: int | None) -> Body:
    """The body after its first ASGI message: whole when that message ends it, else an
    `AsgiBody` holding the first chunk; `_GONE` when the client disconnected."""
    message = await receive()
    if message["type"] != "http.request":
        return _GONE
    chunk: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return Body.of(chunk)
    return AsgiBody(receive, get_running_loop(), length, chunk)


def create_asgi_app(
    http_app: Dispatcher,
    *,
    on_startup: Callable[[], None] | None = None,
    on_shutdown: Callable[[], None] | None = None,
    websocket: WebSocketHandler | None = None,
    threads: int = DISPATCH_THREADS,
) -> AsgiApp:
    """Wrap `http_app` in an ASGI 3 application whose requests run in the lanes of a
    `origin.lanes.Scheduler` with a pool of `threads`; its `direct` attribute is the
    `origin.direct.DirectEntry` the origin's transport answers ordinary requests through.
    `websocket` serves the live change feed (`origin.live.LiveFeed`); without it every
    WebSocket is refused."""
    scheduler = Scheduler(http_app, threads)
    errors = logging.getLogger(ERROR_LOGGER)
    perf = time.perf_counter

    async def handle_http(scope: AsgiScope, receive: AsgiReceive, send: AsgiSend) -> None:
        started = perf()
        headers = fold_headers(scope["headers"])
        rid = request_id(headers)
        method: str = scope["method"]
        path: str = scope["path"]
        body: Body
        if bodyless(method, headers):
            body = EMPTY
        else:
            length = declared_length(headers)
            if length is not None and length > MAX_REQUEST_BODY_BYTES:
                # Over the smallest route limit: stage one decides before anything is read.
                body = AsgiBody(receive, get_running_loop(), length, None)
            else:
                body = await _first(receive, length)
        if body is _GONE:
            return  # the client disconnected before sending its body
        request = Request(
            method=method,
            path=path,
            query=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            body=body,
            request_id=rid,
        )
        streamed = type(body) is AsgiBody
        response = await scheduler.answer(request, scheduler.place(request, not streamed))
        if streamed and body.aborted:  # type: ignore[attr-defined]
            return  # the client went away while its body was read
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": out_headers(response, rid, body.complete),
            }
        )
        if response.stream is None:
            await send({"type": "http.response.body", "body": response.body})
        else:
            await send_stream(response.stream, send, scheduler.pool())
        ACCESS.request(rid, method, path, response.status, perf() - started)

    async def handle_lifespan(receive: AsgiReceive, send: AsgiSend) -> None:
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "lifespan.startup":
                try:
                    if on_startup is not None:
                        on_startup()
                except Exception as exc:
                    errors.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif kind == "lifespan.shutdown":
                try:
                    scheduler.stop()  # idle by now: the server finished its requests first
                    if on_shutdown is not None:
                        on_shutdown()
                except Exception as exc:
                    errors.exception("shutdown failed")
                    await send({"type": "lifespan.shutdown.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def app(scope: AsgiScope, receive: AsgiReceive, send: AsgiSend) -> None:
        kind = scope["type"]
        if kind == "http":
            await handle_http(scope, receive, send)
        elif kind == "lifespan":
            await handle_lifespan(receive, send)
        elif kind == "websocket":
            if websocket is not None:
                await websocket.handle(scope, receive, send)
            else:  # no live feed here: closing before accept answers 403
                await send({"type": "websocket.close", "code": 1008})

    app.direct = DirectEntry(scheduler)  # type: ignore[attr-defined]
    return app
