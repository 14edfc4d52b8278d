"""The origin's HTTP/1.1 transport: uvicorn's httptools protocol with limits before work, and the
one place HTTP requests are made, scheduled and answered.

uvicorn's httptools protocol puts no bound on a request head: it parses a head of any size, at
a cost growing with the square of its size (httptools joins the pieces of a header name or
value, and uvicorn's `on_url` those of the target, by repeated bytes concatenation), and a
connection that sends half a head, or announces a body and sends nothing, stays open forever.
`LimitedHttpProtocol` is that protocol with the limits of SPEC.md HTTP-4 and HTTP-5 enforced
in `data_received`, before the parser sees the bytes:

- Head size: the bytes of a request line plus headers are counted as they arrive; the parser is
  never fed more than `max_head_bytes` of one head, so parsing costs at most that much per
  request (linear in the bytes received). A head still incomplete at the limit is answered 431
  `headers_too_large` and the connection is closed. (A head that begins inside the same read
  as the end of the previous request is counted from the next read on: at most one more read.)
- Header fields: a head of more than `max_header_fields` fields stops the parser when it
  completes (`on_headers_complete` raises before uvicorn starts an ASGI task); 431
  `headers_too_large` and close. Counting them as they are parsed would cost a call per
  field on every request; the 64 KiB bound already caps the parsing.
- Head time: a head must be complete `header_timeout_s` after its first byte (a new connection:
  after it opened). Past that, a connection that sent part of a head gets 408
  `request_timeout` and is closed; one that sent nothing is closed without an answer.
- Body progress: while a request body is incomplete, some of it must arrive at least every
  `body_timeout_s` (time the server itself stopped reading, under flow control, does not
  count). Else, if the application has not answered yet, it is told the client disconnected
  (its `receive` returns `http.disconnect`, its `send` is dropped) and the protocol answers
  408 `request_timeout`; either way the connection is closed.
- Idle keep-alive: uvicorn's `timeout_keep_alive`, set to `idle_timeout_s`, counted from the
  end of the last response; one timer per connection, re-armed for the time left when it
  fires on a connection that was busy meanwhile (uvicorn arms and cancels one per request).

A refusal answers the error shape of SPEC.md ERR-1 (the message from `ErrorCode`'s mapping,
with `x-request-id` and `connection: close`) and logs one `aidememo.access` line in the
adapter's format, method and path `-` when the head was not complete. A client still writing
a huge head may see the connection reset before it reads the 431.

Every HTTP request is answered here, the one entry of HTTP at the origin (SPEC.md HTTP-9):
the transport makes the core's `Request`, has `origin.lanes.Scheduler` run it in its lane and
writes the answer with `origin.direct.encode`, the one writer of a response head; the ASGI
application (`origin.asgi`) serves only the lifespan and WebSockets. A request whose head
completes with no earlier request of the connection unanswered, no `Expect: 100-continue`,
no upgrade, writes not paused and a `Content-Length` within the smallest route limit gets a
`DirectCycle` (`_begin_direct`); when its whole body arrived in the same read,
`on_message_complete` hands it to the scheduler (a read of the loop lane at the end of the
loop's turn, `origin.coalesce`, HTTP-11). Any other request (a body still due at the end of
the read, a large or `100-continue` body, one pipelined behind an unanswered request, which
uvicorn queues) gets a uvicorn `RequestResponseCycle` that receives its body with uvicorn's
flow control (`_serve`). Either way `_respond` holds the answer, one buffer written at the end
of the turn, or writes a streamed answer chunk by chunk under flow control (`_stream`), then
completes the response as uvicorn's cycle does (`on_response_complete`: the next pipelined
request, the keep-alive timer) and logs the access line. Graceful shutdown sees an unanswered
cycle as a response still due and waits for it.

`QuietWebSocketProtocol` is uvicorn's websockets-sansio protocol without its two leaks: after
an application's denial response (LIVE-1) it marks the handshake done, so uvicorn does not log
the ERROR "ASGI callable returned without completing handshake"; and a handshake the websockets
library itself refuses (a malformed upgrade) gets one access line. `ClientDetailFilter` drops
uvicorn's records that carry a client address or a query string (its WebSocket handshake lines
and its TRACE lines) and everything below INFO from uvicorn and websockets (the library's DEBUG
lines print request heads), so no server logger writes a header value either (SPEC.md HTTP-6).
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from time import perf_counter as perf
from typing import Any, ClassVar

import httptools
from websockets.http11 import Request as WsRequest

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES
from aidememo.http.body import EMPTY, Body, declared_length
from aidememo.http.types import Request, Response
from origin.accesslog import ACCESS
from origin.asgi_common import bodyless, fold_headers, new_request_id, request_id
from origin.coalesce import JOIN_MAX_BYTES, HeldWrites, loop_turn
from origin.direct import GONE, DirectCycle, ReceivedBody, encode, first_body
from origin.lanes import Lane, Scheduler
from origin.limits import TransportLimits
from origin.uvicorn_parts import HttpToolsProtocol, RequestResponseCycle, WebSocketsSansIOProtocol

Cycle = DirectCycle | RequestResponseCycle
"""The exchange a request's answer goes to: a direct one, or a uvicorn cycle receiving it."""


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
    """Raised in `on_headers_complete` to stop the parser before the application starts."""


def refusal(code: ErrorCode, message: str, request_id: str) -> bytes:
    """A complete HTTP/1.1 response with the error shape, closing the connection."""
    error = fail(code, message)
    answer = Response(
        error.http_status,
        [("content-type", "application/json")],
        json.dumps(error.to_json()).encode(),
    )
    head, _ = encode(answer, request_id, [], False, False)
    return head + answer.body


class LimitedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with SPEC.md HTTP-4/HTTP-5 enforced; see the module doc."""

    limits: ClassVar[TransportLimits] = TransportLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_keep_alive = self.limits.idle_timeout_s  # type: ignore[assignment]
        self._max_head = self.limits.max_head_bytes
        self._max_fields = self.limits.max_header_fields
        self._in_head = True  # between a request's end (or the connection's start) and a head
        self._head_bytes = 0  # of the current head, fed to the parser so far
        self._head_started = -1.0  # loop time the current head's timer was armed, or -1
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_seen = 0.0  # loop time of the last body progress
        self._scheduler = scheduler_of(self.app)
        self._waiting: DirectCycle | None = None  # a direct request whose body is still due
        self._idle_since = -1.0  # loop time the connection went idle, -1 while it is busy
        self._held: HeldWrites | None = None  # the transport, answers held (HTTP-11)
        # read in this turn, answered on the loop at its end
        self._ready: tuple[DirectCycle, Request] | None = None

    # -- connection ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # every write and close of the connection goes through it
        self._held = HeldWrites(transport, loop_turn(self.loop))
        self.transport = self._held  # type: ignore[assignment]
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timers()
        if self._held is not None:
            self._held.drop()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self) -> None:
        self._stop_timers()  # the WebSocket protocol takes the connection over
        held = self._held
        if held is not None:  # what was answered before the upgrade goes first
            held.release()
            self.transport = held.transport
            self._held = None
        super().handle_websocket_upgrade()

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if self._in_head:
            if self._head_bytes + len(data) > self._max_head:
                self._receive_long_head(data)
                return
            self._head_bytes += len(data)
        if not self._feed(data):
            return
        if self._waiting is not None:  # a direct request's body did not all come in this read
            self._to_asgi(self._waiting)
        if self._in_head:
            if self._head_bytes and self._head_timer is None:
                self._arm_head_timer()  # part of a head: it must end in time
        elif self._body_timer is None:  # part of a body: it must keep coming
            self._body_seen = self.loop.time()
            self._body_timer = self.loop.call_later(self.limits.body_timeout_s, self._body_late)

    def _receive_long_head(self, data: bytes) -> None:
        """Feed at most the head's remaining room; refuse if the head has not ended there."""
        room = self._max_head - self._head_bytes
        self._head_bytes = self._max_head  # on_message_complete resets it to 0
        if not self._feed(data[:room]):
            return
        if self._in_head and self._head_bytes == self._max_head:  # the same head, unfinished
            self._refuse(ErrorCode.HEADERS_TOO_LARGE, "request line and headers over 64 KiB")
        else:  # the head ended (and maybe its request, and more pipelined ones): read on
            self.data_received(data[room:])

    def _feed(self, data: bytes) -> bool:
        """Feed the parser; False once the connection is answered, closed or upgraded."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._answer_ready()  # what came before the upgrade is answered first
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return False
        except httptools.HttpParserError as exc:
            self._answer_ready()  # what came before the bad request is answered first
            if isinstance(exc.__context__, _TooManyFields):
                self._refuse(ErrorCode.HEADERS_TOO_LARGE, "more than 100 header fields")
            else:
                msg = "Invalid HTTP request received."
                self.logger.warning(msg)
                self.send_400_response(msg)
            return False
        return True

    # -- parser callbacks ---------------------------------------------------------------------

    def on_headers_complete(self) -> None:
        if self._ready is not None:  # a pipelined request: the one before it is answered first
            self._answer_ready()
        if len(self.headers) > self._max_fields:
            raise _TooManyFields  # before uvicorn starts the application
        self._in_head = False
        self._head_started = -1.0
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if self._begin_direct():
            return
        super().on_headers_complete()  # a uvicorn cycle, started by `_start_asgi_task`

    def on_body(self, body: bytes) -> None:
        self._body_seen = self.loop.time()
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()
        waiting = self._waiting
        if waiting is not None:  # the whole request is here
            self._waiting = None
            waiting.started = perf()  # the access line's duration counts from here
            assert self._held is not None
            request = waiting.request()
            where = self._scheduler.place(request, True)
            if where is Lane.LOOP:  # after the turn's other reads (HTTP-11)
                self._ready = (waiting, request)
                self._held.turn.later(self._answer_ready)
            else:
                self._run_direct(waiting, request, where)

    def _answer_ready(self) -> None:
        """Answer the request read in this turn that waits for its end, if there is one."""
        ready = self._ready
        if ready is not None:
            self._ready = None
            self._run_direct(*ready, Lane.LOOP)

    def _run_direct(self, cycle: DirectCycle, request: Request, where: Lane) -> None:
        started = cycle.started
        if where is Lane.LOOP:  # the scheduler's loop lane, without a callback to make
            self._respond(cycle, request, started, self._scheduler.call(request))
        else:
            self._scheduler.run(
                self.loop,
                request,
                where,
                lambda answer: self._respond(cycle, request, started, answer),
            )

    # -- idle keep-alive ------------------------------------------------------------------

    def _unset_keepalive_if_required(self) -> None:
        self._idle_since = -1.0  # bytes came: not idle (the armed timer finds that out)

    def on_response_complete(self) -> None:
        """uvicorn's, with a lazy idle timer: armed once and, when it fires early (the
        connection was busy since), re-armed for what is left, instead of a `call_later`
        and a `cancel` per request."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:
            cycle, _ = self.pipeline.pop()
            self._start_asgi_task(cycle, self.app)
            return
        self._idle_since = self.loop.time()
        if self.timeout_keep_alive_task is None:
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self._keep_alive_due
            )

    def _keep_alive_due(self) -> None:
        self.timeout_keep_alive_task = None
        since = self._idle_since
        if since < 0 or self.transport.is_closing():
            return  # busy: the end of its response arms the timer again
        left = since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self.timeout_keep_alive_task = self.loop.call_later(left, self._keep_alive_due)
        else:
            self.transport.close()

    # -- the direct path (origin.direct) --------------------------------------------------

    def _begin_direct(self) -> bool:
        """Take the request whose head just ended onto the direct path, if it may go there:
        uvicorn's scope is filled in as its `on_headers_complete` fills it (the ASGI path may
        still take the request over), and a `DirectCycle` stands in for the ASGI cycle."""
        cycle = self.cycle
        if (
            (cycle is not None and not cycle.response_complete)  # pipelined: keep the order
            or self.expect_100_continue
            or self.flow.write_paused
            or self.transport.is_closing()
            or self.parser.should_upgrade()
        ):
            return False
        headers = fold_headers(self.headers)
        if "content-length" in headers:
            length = declared_length(headers)
            if length is not None and length > MAX_REQUEST_BODY_BYTES:
                return False  # stage one refuses it before anything is read
        parser = self.parser
        scope = self.scope
        http_version = parser.get_http_version()
        method = parser.get_method().decode("ascii")
        scope["method"] = method
        if http_version != "1.1":
            scope["http_version"] = http_version
        parsed_url = httptools.parse_url(self.url)
        raw_path = parsed_url.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        path = self.root_path + path
        query = parsed_url.query or b""
        scope["path"] = path
        scope["raw_path"] = self.root_path.encode("ascii") + raw_path
        scope["query_string"] = query
        keep_alive = http_version != "1.0" and parser.should_keep_alive()
        self.cycle = self._waiting = DirectCycle(method, path, query, headers, keep_alive)  # type: ignore[assignment]
        return True

    def _to_asgi(self, waiting: DirectCycle) -> None:
        """A direct request whose body is still arriving goes on in a uvicorn cycle holding
        what has come so far."""
        self._waiting = None
        cycle = RequestResponseCycle(
            scope=self.scope,
            transport=self.transport,
            flow=self.flow,
            logger=self.logger,
            access_logger=self.access_logger,
            access_log=False,
            default_headers=self.server_state.default_headers,
            message_event=asyncio.Event(),
            expect_100_continue=False,
            keep_alive=waiting.keep_alive,
            on_response=self.on_response_complete,
        )
        cycle.body = waiting.body
        self.cycle = cycle
        self._start_asgi_task(cycle, self.app)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        """Where uvicorn would run the ASGI application for `cycle`: `_serve` it instead."""
        self._spawn(self._serve(cycle))

    def _spawn(self, work: Any) -> None:
        task = self.loop.create_task(work)
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    async def _serve(self, cycle: RequestResponseCycle) -> None:
        """Answer a request whose body comes through `cycle`: none, whole in its first
        message, nothing read yet when its declared size is over the smallest route limit
        (stage one refuses it unread), else a `ReceivedBody` the dispatch reads from a pool
        thread, chunk by chunk, as the core asks for it."""
        started = perf()
        scope = cycle.scope
        headers = fold_headers(scope["headers"])
        method: str = scope["method"]
        receive: Any = cycle.receive
        body: Body
        try:
            if bodyless(method, headers):
                body = EMPTY
            else:
                length = declared_length(headers)
                if length is not None and length > MAX_REQUEST_BODY_BYTES:
                    body = ReceivedBody(receive, self.loop, length, None)
                else:
                    body = await first_body(receive, length)
            if body is GONE:
                return  # the client went away before its body
            query = scope.get("query_string", b"").decode("latin-1")
            request = Request(method, scope["path"], query, headers, body, request_id(headers))
            received = type(body) is ReceivedBody
            where = self._scheduler.place(request, not received)
            response = await self._scheduler.answer(request, where)
            if received and body.aborted:  # type: ignore[attr-defined]
                return  # the client went away while its body was read
            self._respond(cycle, request, started, response)
        except Exception as exc:
            self.logger.error("Exception in the request path", exc_info=exc)
            self.transport.close()

    def _respond(self, cycle: Cycle, request: Request, started: float, response: Response) -> None:
        """Hold a request's answer for the end of the loop iteration (on the loop), complete
        the response, then log its line. A connection whose request body was not read to
        its end closes after the answer, so the rest is never received."""
        rid = request.request_id
        if cycle.disconnected or self.transport.is_closing():  # the client went away
            cycle.response_complete = True
            close = getattr(response.stream, "close", None)
            if close is not None:  # an unsent download: its file is released now
                close()
            self._log(request, response.status, started)
            return
        head_only = request.method == "HEAD"
        keep_alive = cycle.keep_alive and request.body.complete
        try:
            head, keep_alive = encode(
                response, rid, self.server_state.default_headers, keep_alive, head_only
            )
        except Exception as exc:  # an invalid header: uvicorn's cycle would fail the same
            self.logger.error("Exception in ASGI application\n", exc_info=exc)
            self.transport.close()
            return
        cycle.response_started = True
        held = self._held
        assert held is not None  # every connection holds its answers
        if response.stream is not None:
            self._spawn(self._stream(cycle, request, started, response, head, keep_alive))
            return
        body = response.body
        if head_only or not body:
            held.hold(head)
        elif len(body) <= JOIN_MAX_BYTES:
            held.hold(head + body)
        else:  # a large body is not copied into a held buffer: it is written now
            held.writelines((head, body))
        cycle.response_complete = True  # `_complete` and `_log`, inline on the hot path
        cycle.message_event.set()
        if not keep_alive:
            self.transport.close()
        self.on_response_complete()
        ACCESS.request(rid, request.method, request.path, response.status, perf() - started)

    async def _stream(
        self,
        cycle: Cycle,
        request: Request,
        started: float,
        response: Response,
        head: bytes,
        keep_alive: bool,
    ) -> None:
        """A streamed answer (an artifact download, an export): each chunk read in a pool
        thread and written under flow control, chunked when no length was declared."""
        stream = response.stream
        assert stream is not None
        chunked = all(name.lower() != "content-length" for name, _ in response.headers)
        pool = self._scheduler.pool()
        write = self.transport.write
        try:
            write(head)
            if request.method != "HEAD":
                while (
                    chunk := await self.loop.run_in_executor(pool, next, stream, None)
                ) is not None:
                    if cycle.disconnected or self.transport.is_closing():
                        break
                    if chunk:
                        write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)
                        await self.flow.drain()
                else:
                    if chunked:
                        write(b"0\r\n\r\n")
        except Exception as exc:
            self.logger.error("Exception in ASGI application\n", exc_info=exc)
            self.transport.close()
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                await self.loop.run_in_executor(pool, close)
        self._complete(cycle, keep_alive and not cycle.disconnected)
        self._log(request, response.status, started)

    def _complete(self, cycle: Cycle, keep_alive: bool) -> None:
        """The response of `cycle` is written: close, or go on with the connection."""
        cycle.response_complete = True
        cycle.message_event.set()  # a receive still waiting learns the exchange is over
        if not (keep_alive and cycle.keep_alive):
            self.transport.close()
        self.on_response_complete()

    @staticmethod
    def _log(request: Request, status: int, started: float) -> None:
        ACCESS.request(request.request_id, request.method, request.path, status, perf() - started)

    # -- limits -------------------------------------------------------------------------------

    def _arm_head_timer(self) -> None:
        self._head_started = self.loop.time()
        self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_late)

    def _stop_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer, self.timeout_keep_alive_task):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = self.timeout_keep_alive_task = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False  # a response is on its way: close after it
            return
        if self._head_bytes == 0:
            self.transport.close()  # nothing sent: nothing to answer
            return
        self._refuse(ErrorCode.REQUEST_TIMEOUT, "request headers not complete within the limit")

    def _body_late(self) -> None:
        self._body_timer = None
        if self._in_head or self.transport.is_closing():
            return
        now = self.loop.time()
        if self.flow.read_paused:  # the server stopped reading: not the client's delay
            self._body_seen = now
        quiet = now - self._body_seen
        if quiet < self.limits.body_timeout_s:
            wait = self.limits.body_timeout_s - quiet
            self._body_timer = self.loop.call_later(wait, self._body_late)
            return
        cycle = self.cycle
        if cycle is None or cycle.response_started:
            self.transport.close()  # answered already: only the rest of the body is missing
            return
        cycle.disconnected = True  # the application's receive returns http.disconnect
        cycle.message_event.set()
        self._refuse(ErrorCode.REQUEST_TIMEOUT, "request body made no progress within the limit")

    def _refuse(self, code: ErrorCode, message: str) -> None:
        """Answer `code` with the error shape, log one access line, close the connection.
        While an earlier (pipelined) request's response is still to come, the answer would
        take its place: then the connection is closed without one."""
        self._answer_ready()
        if self.transport.is_closing():
            return
        request_id = new_request_id()
        pending = self.cycle is not None and not self.cycle.response_complete
        if not (self._in_head and pending):
            self.transport.write(refusal(code, message, request_id))
        self.transport.close()
        self._stop_timers()
        now = self.loop.time()
        if self._in_head:  # no complete head: no method or path to name
            method, path = "-", "-"
            started = self._head_started if self._head_started >= 0 else now
        else:
            method, path = self.scope.get("method", "-"), self.scope.get("path", "-")
            started = self._body_seen
        status = 431 if code is ErrorCode.HEADERS_TOO_LARGE else 408
        ACCESS.request(request_id, method, path, status, now - started)


class QuietWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websockets-sansio protocol without an ERROR per denied upgrade; see the
    module doc."""

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
