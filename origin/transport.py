"""The origin's HTTP/1.1 connection: the one place HTTP requests are read, bounded, scheduled
and answered (SPEC.md HTTP-9).

`HttpConnection` is the asyncio protocol uvicorn runs for each accepted connection. It feeds
httptools' parser and keeps the requests of the connection in order (`exchanges`, pipelined
ones waiting behind the first with reading paused). A request's body is collected on the loop
when it declares a length within 1 MiB; any other body (chunked, larger, behind `Expect:
100-continue`) is an `origin.exchange.ArrivingBody` the core reads from a pool thread while
the loop receives it. A request goes to its lane (`origin.lanes.Scheduler`) once its body is
whole, or at its head when the body arrives while it runs; a read answered on the loop waits
for the end of the loop turn (`origin.coalesce`, HTTP-11). Every answer's head is made by
`origin.exchange.encode`; a whole answer is held and written at the end of the turn, a
streamed one written chunk by chunk under flow control. Each answered request is one
`aidememo.access` line.

The bounds of HTTP-4 and HTTP-5 hold before any work: the bytes of a head are counted as they
arrive and the parser never sees more than `max_head_bytes` of one (431); more than
`max_header_fields` fields stop it at the head's end (431); a head must end
`header_timeout_s` after its first byte (408, or a silent close when nothing came); a body
must keep arriving every `body_timeout_s` while the server reads (408); an idle keep-alive
connection closes after `idle_timeout_s`, one lazily re-armed timer per connection.

A WebSocket upgrade hands the connection to uvicorn's WebSocket protocol (`QuietWebSocketProtocol`,
without its ERROR line per denied upgrade); `origin.asgi` serves it. uvicorn's `Server` runs the
loop, the listening sockets and graceful shutdown (`shutdown`: close when idle, else after the
answer in flight).
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
from collections import deque
from time import perf_counter as perf
from typing import Any, ClassVar

import httptools
from websockets.http11 import Request as WsRequest

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES
from aidememo.http.body import declared_length
from aidememo.http.types import Request, Response
from origin.accesslog import ACCESS
from origin.asgi_common import fold_headers, new_request_id
from origin.coalesce import JOIN_MAX_BYTES, loop_turn
from origin.exchange import ArrivingBody, Exchange, encode
from origin.lanes import Lane, Scheduler
from origin.limits import TransportLimits
from origin.uvicorn_parts import Config, ServerState, WebSocketsSansIOProtocol

logger = logging.getLogger("uvicorn.error")
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def scheduler_of(app: Any) -> Scheduler:
    """The scheduler of the application `origin.asgi.create_asgi_app` made, found behind
    uvicorn's middleware wrappers too."""
    for _ in range(4):
        scheduler = getattr(app, "scheduler", None)
        if isinstance(scheduler, Scheduler):
            return scheduler
        app = getattr(app, "app", None)
    raise TypeError("origin.transport serves only an application of origin.asgi")


class _TooManyFields(Exception):
    """Raised in `on_headers_complete` to stop the parser at a head with too many fields."""


def refusal(status: int, message: str, request_id: str, content_type: str) -> bytes:
    """A complete response closing the connection."""
    answer = Response(status, [("content-type", content_type)], message.encode())
    head, _, _ = encode(answer, request_id, [], False, False)
    return head + answer.body


def error_refusal(code: ErrorCode, message: str, request_id: str) -> bytes:
    """A complete response with the error shape (ERR-1), closing the connection."""
    error = fail(code, message)
    return refusal(error.http_status, json.dumps(error.to_json()), request_id, "application/json")


class HttpConnection(asyncio.Protocol):
    """One client connection; see the module doc."""

    limits: ClassVar[TransportLimits] = TransportLimits()

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if not config.loaded:
            config.load()
        self.config = config
        self.server_state = server_state
        self.app_state = app_state
        self.loop = _loop or asyncio.get_event_loop()
        self.scheduler = scheduler_of(config.loaded_app)
        self.turn = loop_turn(self.loop)
        self.parser = httptools.HttpRequestParser(self)
        # a request after one that asks to close is left unread, not a parse error
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.exchanges: deque[Exchange] = deque()  # read and not yet answered, in order
        self._reading: Exchange | None = None  # the one whose body the parser is reading
        self._ready: tuple[Exchange, Request] | None = None  # a loop read, due at turn end
        self._held: bytes | None = None  # answers written at the end of the turn
        self._writable: asyncio.Event | None = None  # set while writes are not paused
        self._url = b""
        self._fields: list[tuple[bytes, bytes]] = []
        self._method = ""
        self._upgrade = False
        self._in_head = True  # between a request's end (or the connection's start) and a head
        self._head_bytes = 0  # of the current head, fed to the parser so far
        self._head_started = -1.0
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_seen = 0.0  # loop time of the last body progress
        self._idle_timer: asyncio.TimerHandle | None = None
        self._idle_since = -1.0  # loop time the connection went idle, -1 while busy

    # -- connection -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.server_state.connections.add(self)  # type: ignore[arg-type]
        self.transport = transport  # type: ignore[assignment]
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server_state.connections.discard(self)
        self._stop_timers()
        self._held = None
        for exchange in self.exchanges:
            exchange.disconnected = True
            if isinstance(exchange.body, ArrivingBody) and not exchange.complete:
                exchange.body.gone()
        if self._writable is not None:
            self._writable.set()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.Event()
        self._writable.clear()

    def resume_writing(self) -> None:
        if self._writable is not None:
            self._writable.set()

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown: close now when idle, else after the answer due."""
        if self.exchanges:
            self.exchanges[0].keep_alive = False
        else:
            self.close()

    def data_received(self, data: bytes) -> None:
        self._idle_since = -1.0  # bytes came: not idle (the armed timer finds that out)
        if self._in_head:
            if self._head_bytes + len(data) > self.limits.max_head_bytes:
                self._receive_long_head(data)
                return
            self._head_bytes += len(data)
        if not self._feed(data):
            return
        if self._in_head:
            if self._head_bytes and self._head_timer is None:
                self._arm_head_timer()  # part of a head: it must end in time
        elif self._body_timer is None:  # part of a body: it must keep coming
            self._body_seen = self.loop.time()
            self._body_timer = self.loop.call_later(self.limits.body_timeout_s, self._body_late)

    def _receive_long_head(self, data: bytes) -> None:
        """Feed at most the head's remaining room; refuse if the head has not ended there."""
        room = self.limits.max_head_bytes - self._head_bytes
        self._head_bytes = self.limits.max_head_bytes  # on_message_complete resets it to 0
        if not self._feed(data[:room]):
            return
        if self._in_head and self._head_bytes == self.limits.max_head_bytes:  # still that head
            self._refuse(ErrorCode.HEADERS_TOO_LARGE, "request line and headers over 64 KiB")
        else:  # the head ended (and maybe its request, and more pipelined ones): read on
            self.data_received(data[room:])

    def _feed(self, data: bytes) -> bool:
        """Feed the parser; False once the connection is refused, closed or upgraded."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._answer_ready()  # what came before the upgrade is answered first
            if self._upgrade:
                self._to_websocket()
            else:
                logger.warning("Unsupported upgrade request.")
            return False
        except httptools.HttpParserError as exc:
            self._answer_ready()  # what came before the bad request is answered first
            if isinstance(exc.__context__, _TooManyFields):
                self._refuse(ErrorCode.HEADERS_TOO_LARGE, "more than 100 header fields")
            else:
                logger.warning("Invalid HTTP request received.")
                self._refuse_plain(400, "Invalid HTTP request received.")
            return False
        return True

    # -- parser callbacks -----------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url = b""
        self._fields = []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        # llhttp keeps a value's trailing white space, which is not part of it (RFC 9110 5.5)
        self._fields.append((name.lower(), value.rstrip(b" \t")))

    def on_headers_complete(self) -> None:
        if len(self._fields) > self.limits.max_header_fields:
            raise _TooManyFields
        self._in_head = False
        self._head_started = -1.0
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._reading = None
        if self.transport.is_closing():
            return  # a request after the connection's last one is not read
        parser = self.parser
        self._method = method = parser.get_method().decode("ascii")
        headers = fold_headers(self._fields)
        if parser.should_upgrade():
            self._upgrade = headers.get("upgrade", "").lower() == "websocket" and (
                self.config.ws_protocol_class is not None
            )
            if self._upgrade:
                return  # the parser stops at the head's end: `_feed` hands the connection over
        url = httptools.parse_url(self._url)
        path = url.path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        version = parser.get_http_version()
        keep_alive = version != "1.0" and parser.should_keep_alive()
        length = declared_length(headers)
        expects = headers.get("expect", "").lower() == "100-continue"
        body: bytearray | ArrivingBody
        if (
            not expects
            and "transfer-encoding" not in headers
            and (length is None or length <= MAX_REQUEST_BODY_BYTES)
        ):
            body = bytearray()  # collected here: no body, or a length within 1 MiB
        else:
            body = ArrivingBody(
                length,
                self.loop,
                self.transport.pause_reading,
                self.transport.resume_reading,
                self._send_continue if expects else None,
            )
        query = (url.query or b"").decode("latin-1")
        exchange = Exchange(method, self.config.root_path + path, query, headers, keep_alive, body)
        self._reading = exchange
        self.exchanges.append(exchange)
        if len(self.exchanges) > 1:
            self.transport.pause_reading()  # pipelined: read on once the earlier are answered
        elif isinstance(body, ArrivingBody):
            self._start(exchange)

    def on_body(self, chunk: bytes) -> None:
        self._body_seen = self.loop.time()
        exchange = self._reading
        if exchange is None or exchange.answered:
            return
        if isinstance(exchange.body, ArrivingBody):
            exchange.body.put(chunk)
        else:
            exchange.body += chunk

    def on_message_complete(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        exchange = self._reading
        if exchange is None:  # an upgrade's head
            return
        self._reading = None
        exchange.complete = True
        if isinstance(exchange.body, ArrivingBody):
            exchange.body.end()
        elif exchange is self.exchanges[0]:
            self._start(exchange)

    # -- answering --------------------------------------------------------------------------

    def _start(self, exchange: Exchange) -> None:
        """Hand `exchange`, the first unanswered one, to its lane."""
        exchange.started = perf()  # the access line's duration counts from here
        request = exchange.request()
        where = self.scheduler.place(request, not isinstance(exchange.body, ArrivingBody))
        if where is Lane.LOOP:  # after the turn's other reads (HTTP-11)
            self._ready = (exchange, request)
            self.turn.later(self._answer_ready)
        else:
            self.scheduler.run(
                self.loop, request, where, lambda answer: self._respond(exchange, request, answer)
            )

    def _answer_ready(self) -> None:
        """Answer the loop read waiting for the end of the turn, and the pipelined loop reads
        behind it, if there are any."""
        while (ready := self._ready) is not None:
            self._ready = None
            exchange, request = ready
            self._respond(exchange, request, self.scheduler.call(request))

    def _send_continue(self) -> None:
        if self.exchanges and not self.exchanges[0].answered and not self.transport.is_closing():
            self.write(CONTINUE)

    def _respond(self, exchange: Exchange, request: Request, response: Response) -> None:
        """Write the answer of `exchange` (held to the end of the turn, or streamed), then go
        on with the connection. A body not read to its end closes the connection after it."""
        if exchange.disconnected or self.transport.is_closing():  # the client went away
            close = getattr(response.stream, "close", None)
            if close is not None:  # an unsent download: its file is released now
                close()
            exchange.answered = True
            self._log(request, response.status, exchange.started)
            return
        head_only = request.method == "HEAD"
        try:
            head, keep_alive, chunked = encode(
                response,
                request.request_id,
                self.server_state.default_headers,
                exchange.keep_alive and request.body.complete,
                head_only,
            )
        except Exception as exc:  # an invalid header: nothing can be sent
            logger.error("Exception in the request path", exc_info=exc)
            self.close()
            return
        exchange.answered = True
        if response.stream is not None:
            self._spawn(self._stream(exchange, request, response, head, keep_alive, chunked))
            return
        body = response.body
        if head_only or not body:
            self.hold(head)
        elif len(body) <= JOIN_MAX_BYTES:
            self.hold(head + body)
        else:  # a large body is not copied into the held buffer: written now
            self.write(head)
            self.transport.write(body)
        self._next(keep_alive)
        self._log(request, response.status, exchange.started)

    async def _stream(
        self,
        exchange: Exchange,
        request: Request,
        response: Response,
        head: bytes,
        keep: bool,
        chunked: bool,
    ) -> None:
        """A streamed answer (a download, an export): each chunk read in a pool thread and
        written under flow control, `chunked` when its head declared no length."""
        stream = response.stream
        assert stream is not None
        pool = self.scheduler.pool()
        try:
            self.write(head)
            if request.method != "HEAD":
                while (
                    chunk := await self.loop.run_in_executor(pool, next, stream, None)
                ) is not None:
                    if exchange.disconnected or self.transport.is_closing():
                        break
                    if chunk:
                        self.transport.write(
                            b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk
                        )
                        if self._writable is not None:
                            await self._writable.wait()
                else:
                    if chunked:
                        self.transport.write(b"0\r\n\r\n")
        except Exception as exc:
            logger.error("Exception in the request path", exc_info=exc)
            self.close()
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                await self.loop.run_in_executor(pool, close)
        self._next(keep and not exchange.disconnected)
        self._log(request, response.status, exchange.started)

    def _next(self, keep_alive: bool) -> None:
        """The first exchange is answered: close, start the next one, or wait idle."""
        self.exchanges.popleft()
        self.server_state.total_requests += 1
        if not keep_alive:
            self.close()
            return
        if self.transport.is_closing():
            return
        if self.exchanges:
            self.transport.resume_reading()
            following = self.exchanges[0]
            if following.complete or isinstance(following.body, ArrivingBody):
                self._start(following)
            return
        self._idle_since = self.loop.time()
        if self._idle_timer is None:
            self._idle_timer = self.loop.call_later(self.limits.idle_timeout_s, self._idle_due)

    def _spawn(self, work: Any) -> None:
        task = self.loop.create_task(work)
        task.add_done_callback(self.server_state.tasks.discard)
        self.server_state.tasks.add(task)

    @staticmethod
    def _log(request: Request, status: int, started: float) -> None:
        ACCESS.request(request.request_id, request.method, request.path, status, perf() - started)

    # -- writes: answers held to the end of the turn come before any other write ------------

    def hold(self, data: bytes) -> None:
        """Write `data` at the end of this turn, or before any other write."""
        if self._held is None:
            self._held = data
            self.turn.due(self)
        else:
            self._held += data

    def release(self) -> None:
        """Write the held answers now (the end of the turn, or before another write)."""
        data = self._held
        if data is not None:
            self._held = None
            if not self.transport.is_closing():
                self.transport.write(data)

    def write(self, data: bytes) -> None:
        self.release()
        self.transport.write(data)

    def close(self) -> None:
        self.release()
        self.transport.close()

    # -- the WebSocket upgrade --------------------------------------------------------------

    def _to_websocket(self) -> None:
        """Hand the connection to the WebSocket protocol, replaying the request head to it."""
        self._stop_timers()
        self.release()
        self.server_state.connections.discard(self)
        head = [self._method.encode(), b" ", self._url, b" HTTP/1.1\r\n"]
        for name, value in self._fields:
            head += (name, b": ", value, b"\r\n")
        head.append(b"\r\n")
        websocket = self.config.ws_protocol_class
        assert websocket is not None  # `_upgrade` is set only when there is one
        protocol = websocket(  # type: ignore[call-arg]
            config=self.config, server_state=self.server_state, app_state=self.app_state
        )
        protocol.connection_made(self.transport)
        self.transport.set_protocol(protocol)
        protocol.data_received(b"".join(head))

    # -- limits -----------------------------------------------------------------------------

    def _arm_head_timer(self) -> None:
        self._head_started = self.loop.time()
        self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_late)

    def _stop_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer, self._idle_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = self._idle_timer = None

    def _idle_due(self) -> None:
        self._idle_timer = None
        since = self._idle_since
        if since < 0 or self.transport.is_closing():
            return  # busy: the end of its answer arms the timer again
        left = since + self.limits.idle_timeout_s - self.loop.time()
        if left > 0:
            self._idle_timer = self.loop.call_later(left, self._idle_due)
        else:
            self.close()

    def _head_late(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self.exchanges:
            self.exchanges[-1].keep_alive = False  # an answer is on its way: close after it
        elif self._head_bytes == 0:
            self.close()  # nothing sent: nothing to answer
        else:
            self._refuse(ErrorCode.REQUEST_TIMEOUT, "request headers not complete within the limit")

    def _body_late(self) -> None:
        self._body_timer = None
        exchange = self._reading
        if exchange is None or self.transport.is_closing():
            return
        now = self.loop.time()
        if not self.transport.is_reading():  # the server stopped reading: not the client's delay
            self._body_seen = now
        quiet = now - self._body_seen
        if quiet < self.limits.body_timeout_s:
            wait = self.limits.body_timeout_s - quiet
            self._body_timer = self.loop.call_later(wait, self._body_late)
        elif exchange.answered:
            self.close()  # answered already: only the rest of the body is missing
        else:
            exchange.disconnected = True
            if isinstance(exchange.body, ArrivingBody):
                exchange.body.gone()  # the core's read raises: it answers nothing
            self._refuse(
                ErrorCode.REQUEST_TIMEOUT, "request body made no progress within the limit"
            )

    def _refuse(self, code: ErrorCode, message: str) -> None:
        """Answer `code` with the error shape, log one access line, close the connection. While
        an earlier request's answer is still due, the refusal would take its place: then the
        connection closes without one."""
        rid = new_request_id()
        if self._write_refusal(error_refusal(code, message, rid)):
            now = self.loop.time()
            if self._in_head:  # no complete head: no method or path to name
                method, path = "-", "-"
                started = self._head_started if self._head_started >= 0 else now
            else:
                reading = self._reading
                method, path = (reading.method, reading.path) if reading else ("-", "-")
                started = self._body_seen
            status = 431 if code is ErrorCode.HEADERS_TOO_LARGE else 408
            ACCESS.request(rid, method, path, status, now - started)

    def _refuse_plain(self, status: int, message: str) -> None:
        self._write_refusal(refusal(status, message, new_request_id(), "text/plain; charset=utf-8"))

    def _write_refusal(self, answer: bytes) -> bool:
        """Write `answer` unless an earlier answer is due, close; False when closing already."""
        self._answer_ready()
        if self.transport.is_closing():
            return False
        due = [e for e in self.exchanges if not e.answered and e is not self._reading]
        if not due:
            self.write(answer)
        self.close()
        self._stop_timers()
        return True


class QuietWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websockets-sansio protocol without an ERROR line per denied upgrade (LIVE-1),
    and with one access line for a handshake the websockets library itself refuses."""

    async def send(self, message: Any) -> None:
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get("more_body"):
            self.handshake_complete = True  # the denial response is the end of the handshake

    def handle_connect(self, event: WsRequest) -> None:
        started = self.loop.time()
        super().handle_connect(event)
        status = self.response.status_code
        if status != 101:  # the library refused the handshake; the application never ran
            path = event.path.partition("?")[0]
            ACCESS.request(new_request_id(), "GET", path, status, self.loop.time() - started)
