"""The origin's ASGI 3 application: the lifespan and the live feed's WebSockets, and the
scheduler the transport answers HTTP requests through.

HTTP requests never reach the application: `origin.transport` turns each into the core's
`Request`, runs it in its lane (`origin.lanes`, the application's `scheduler`) and writes the
answer itself (SPEC.md HTTP-9). What the application does:

- Answers the ASGI `lifespan` protocol; at shutdown the scheduler's threads end, then
  `on_shutdown` (closing the store) runs, after the server has finished its requests.
- Hands `websocket` scopes to the live feed (`origin.live.LiveFeed`), whose store calls run
  in the scheduler's dispatch pool; without one every WebSocket is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Protocol

from origin.asgi_common import AsgiApp, AsgiReceive, AsgiScope, AsgiSend, new_request_id
from origin.lanes import DISPATCH_THREADS, Dispatcher, Scheduler

__all__ = ["AsgiApp", "Dispatcher", "create_asgi_app", "new_request_id"]

ERROR_LOGGER = "aidememo.error"


class WebSocketHandler(Protocol):
    """What serves `websocket` scopes: `origin.live.LiveFeed` fits."""

    async def handle(
        self, scope: AsgiScope, receive: AsgiReceive, send: AsgiSend, pool: Executor
    ) -> None:
        """Serve one WebSocket from its connect to its close, its blocking store calls on
        `pool` (the scheduler's dispatch pool)."""
        ...


def create_asgi_app(
    http_app: Dispatcher,
    *,
    on_startup: Callable[[], None] | None = None,
    on_shutdown: Callable[[], None] | None = None,
    websocket: WebSocketHandler | None = None,
    threads: int = DISPATCH_THREADS,
) -> AsgiApp:
    """The ASGI application of an origin serving `http_app`; its `scheduler` attribute (an
    `origin.lanes.Scheduler` with a pool of `threads`) is what `origin.transport` runs the
    HTTP requests through. `websocket` serves the live change feed."""
    scheduler = Scheduler(http_app, threads)
    errors = logging.getLogger(ERROR_LOGGER)

    def start() -> None:
        if on_startup is not None:
            on_startup()

    def stop() -> None:
        scheduler.stop()  # idle by now: the server finished its requests first
        if on_shutdown is not None:
            on_shutdown()

    async def phase(name: str, run: Callable[[], None], send: AsgiSend) -> bool:
        """Run one lifespan phase and report it; False when it failed."""
        try:
            run()
        except Exception as exc:
            errors.exception("%s failed", name)
            await send({"type": f"lifespan.{name}.failed", "message": str(exc)})
            return False
        await send({"type": f"lifespan.{name}.complete"})
        return True

    async def handle_lifespan(receive: AsgiReceive, send: AsgiSend) -> None:
        while True:
            kind = (await receive())["type"]
            if kind == "lifespan.startup" and not await phase("startup", start, send):
                return
            if kind == "lifespan.shutdown":
                await phase("shutdown", stop, send)
                return

    async def app(scope: AsgiScope, receive: AsgiReceive, send: AsgiSend) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await handle_lifespan(receive, send)
        elif kind == "websocket":
            if websocket is not None:
                await websocket.handle(scope, receive, send, scheduler.pool())
            else:  # no live feed here: closing before accept answers 403
                await send({"type": "websocket.close", "code": 1008})
        else:
            raise RuntimeError("HTTP is served by origin.transport, not through ASGI")

    app.scheduler = scheduler  # type: ignore[attr-defined]
    return app
