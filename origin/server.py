"""Run the origin under uvicorn, programmatically, with access logs and a clean SIGTERM.

Shutdown on SIGTERM or SIGINT: uvicorn stops accepting, lets every in-flight request finish
(up to `graceful_timeout_s`), then sends the lifespan shutdown, which closes the store; the
process then exits 0. Nothing acknowledged is lost, because a SQLite commit is durable
(`synchronous=FULL`) before dispatch returns its response.

uvicorn re-raises a captured signal after a graceful shutdown, which would turn a clean stop
into exit status 143; `serve` installs its own no-op handlers first, so that re-raise lands
on them and the process exits 0. A second SIGINT still forces an immediate exit (uvicorn's
behaviour).

uvicorn runs the loop, the sockets and graceful shutdown; each connection is
`origin.transport.HttpConnection`, which answers every HTTP request itself (HTTP-9) in the
lane `origin.lanes` names, within the head size, header count and time limits of SPEC.md
HTTP-4/HTTP-5 (`settings.limits`, `origin.limits`), and hands a WebSocket upgrade to uvicorn's
websockets-sansio protocol (without its ERROR line per denied upgrade); the ASGI application
(`origin.asgi`) serves the lifespan and the live feed's WebSockets.

Logging goes to stderr: uvicorn's own lines, and one `aidememo.access` line per request with
request id, method, path without the query string, status and duration. uvicorn's access
log is off, because it would log the query string and the client address, and
`origin.logsink.ClientDetailFilter` drops uvicorn's other lines that carry a client address,
a query string or a header value (SPEC.md HTTP-6). The stderr handler
is `origin.logsink.BackgroundStreamHandler`: a writer thread formats and writes the lines in
batches, off the event loop; `serve` flushes it after the server stopped, so no line is lost.
With `log_format` `json` every line is one JSON object (`origin.logjson`). `metered` wraps the
app in the Prometheus counters of `origin.metrics` (`--metrics-bind`).
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import logging
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from aidememo.domain.limits import LIVE_INBOUND_MAX_BYTES
from origin.asgi import create_asgi_app
from origin.lanes import DISPATCH_THREADS, Dispatcher
from origin.limits import TransportLimits
from origin.logsink import CachedTimeFormatter, ClientDetailFilter

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 3030
GRACEFUL_TIMEOUT_S = 30
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
WORKER_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s pid=%(process)d %(message)s"
"""With several workers (`origin.workers`) each line names the process that wrote it."""


def logging_config(
    level: str = "INFO", *, with_pid: bool = False, log_format: str = "text"
) -> dict[str, Any]:
    """The `logging.config.dictConfig` document the server runs with; `log_format` `json`
    writes one JSON object per line (`origin.logjson`)."""
    fmt = WORKER_LOG_FORMAT if with_pid else LOG_FORMAT
    formatter: dict[str, Any] = {"()": CachedTimeFormatter, "fmt": fmt}
    if log_format == "json":
        from origin.logjson import JsonFormatter

        formatter = {"()": JsonFormatter}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": formatter},
        "filters": {"client_detail": {"()": ClientDetailFilter}},
        "handlers": {
            "stderr": {
                "class": "origin.logsink.BackgroundStreamHandler",
                "formatter": "plain",
                "filters": ["client_detail"],
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "CRITICAL", "propagate": False},
            "aidememo": {"handlers": ["stderr"], "level": level, "propagate": False},
        },
    }


def _flush_logs() -> None:
    """Write every line the background log handlers still hold (they write in batches)."""
    for name in ("aidememo", "uvicorn"):
        for handler in logging.getLogger(name).handlers:
            handler.flush()


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Where and how to listen."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    threads: int = DISPATCH_THREADS
    """Threads of the dispatch pool (`origin.lanes`)."""
    log_level: str = "INFO"
    graceful_timeout_s: int = GRACEFUL_TIMEOUT_S
    limits: TransportLimits = field(default_factory=TransportLimits)
    listen_url: str | None = None
    """A direct PostgreSQL URL to `LISTEN` on for other processes' commits (`origin.notify`,
    LIVE-9); None: the live feed sees them through its periodic re-read only."""
    log_format: str = "text"
    """`text` or `json` (`origin.logjson`, DEPLOY-4)."""
    metered: Callable[[Dispatcher], Dispatcher] | None = None
    """Wraps the app so its answers are counted (`origin.metrics`, METRICS-1); None: not."""


class _Once:
    """Call a function at most once, whichever path (lifespan or finally) gets there first."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self._done = False

    def __call__(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._fn()


def http_protocol(limits: TransportLimits) -> type[asyncio.Protocol]:
    """The origin's HTTP connection with `limits` enforced (`origin.transport`)."""
    from origin.transport import HttpConnection

    return type("OriginHttpConnection", (HttpConnection,), {"limits": limits})


def ws_protocol() -> type[asyncio.Protocol]:
    """uvicorn's websockets-sansio protocol without an ERROR per denied upgrade."""
    from origin.transport import QuietWebSocketProtocol

    return QuietWebSocketProtocol


def freeze_startup_objects() -> None:
    """Collect once, then move every object the start-up made (modules, the app, the server)
    out of the collector's reach: a full collection then walks only what serving made since,
    so its pause, a tail latency of every request waiting behind it, stays short
    (docs/bench-notes.md)."""
    gc.collect()
    gc.freeze()


def serve(
    http_app: Dispatcher,
    settings: ServerSettings,
    *,
    close: Callable[[], None],
    sockets: list[socket.socket] | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit status (0 after a clean stop).

    `close` releases the store; it runs once, after the in-flight requests have finished.
    `sockets` are listening sockets to accept on instead of binding `host:port` (a worker of
    `origin.workers`, which bound them before forking).
    """
    import uvicorn

    from aidememo.http.app import HttpApp
    from origin.allocator import return_large_blocks
    from origin.live import LiveFeed

    return_large_blocks()

    live = LiveFeed(http_app) if isinstance(http_app, HttpApp) else None
    listener = None
    if live is not None and settings.listen_url is not None:
        from origin.notify import CommitListener

        listener = CommitListener(
            settings.listen_url, live.notified, on_listening=live.listening, on_demand=True
        )
        live.on_demand = listener.want

    def shutdown() -> None:
        if listener is not None:
            listener.stop()
        close()

    def start() -> None:
        if listener is not None:
            listener.start()
        freeze_startup_objects()

    close_once = _Once(shutdown)
    served = http_app if settings.metered is None else settings.metered(http_app)
    app = create_asgi_app(
        served,
        on_startup=start,
        on_shutdown=close_once,
        websocket=live,
        threads=settings.threads,
    )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        loop="uvloop" if _installed("uvloop") else "asyncio",
        http=http_protocol(settings.limits),
        ws=ws_protocol(),
        lifespan="on",
        access_log=False,
        log_config=logging_config(
            settings.log_level.upper(),
            with_pid=sockets is not None,
            log_format=settings.log_format,
        ),
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=settings.graceful_timeout_s,
        # The live feed sends the same small JSON message to many subscribers: per-message
        # deflate would compress it once per subscriber (docs/bench-notes.md), for little
        # gain on ~1 KB texts.
        ws_per_message_deflate=False,
        # Clients send the live feed nothing it needs: a frame over 64 KiB closes the socket
        # (1009) before its payload is buffered (LIVE-6).
        ws_max_size=LIVE_INBOUND_MAX_BYTES,
    )
    server = uvicorn.Server(config)
    received: list[int] = []

    def remember(sig: int, _frame: FrameType | None) -> None:
        received.append(sig)

    previous = {}
    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, remember)
    try:
        server.run(sockets=sockets)
    except SystemExit as exc:  # uvicorn exits 1 when it cannot bind or start up
        return exc.code if isinstance(exc.code, int) else 1
    finally:
        close_once()
        _flush_logs()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        logging.getLogger("aidememo.server").info(
            "stopped on %s", ", ".join(signal.Signals(s).name for s in received)
        )
    return 0 if server.started else 1
