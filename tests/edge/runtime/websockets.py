"""WebSockets of the Workers runtime, as far as the live feed uses them, and the stand-in `js`.

- `js.WebSocketPair.new().object_values()` -> `[client, server]` (Pyodide's `object_values`
  of the JS pair `{0: client, 1: server}`).
- `WebSocket` (the server end a Durable Object holds): `send(text)`, `close(code, reason)`
  (1000 or 3000-4999; the reserved 1005/1006/1015 are refused as workerd refuses them; a
  close of a closed socket does nothing, as with `web_socket_auto_reply_to_close`),
  `serializeAttachment(value)` (structured-clone check; a copy is kept) and
  `deserializeAttachment()` (a copy, or None), `readyState`.
- `ClientSocket` (the end the Worker's 101 hands to the client, i.e. the test): its `inbox`
  of received texts, `close_code`/`close_reason` once the server closed, and `send`/`close`,
  which the runtime delivers to the owning object's `webSocketMessage`/`webSocketClose`
  through its input gate, re-creating an object that hibernated.

The Context side (`acceptWebSocket`, `getWebSockets`, hibernation) is in
`tests.edge.runtime.objects`: accepted sockets belong to the object's name, not to the
instance, so they outlive an instance dropped by `Namespace.evict` (hibernation).
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from typing import Any

from tests.edge.runtime import streams

CONNECTING, OPEN, CLOSING, CLOSED = 0, 1, 2, 3
_RESERVED = frozenset({1004, 1005, 1006, 1015})


class InvalidAccessError(Exception):
    """What workerd throws for a close code a server may not send."""


def _clone(value: Any) -> Any:
    from tests.edge.runtime.objects import clone

    return clone(value, "attachment")


class WebSocket:
    """The server end: accepted by `ctx.acceptWebSocket` (hibernatable)."""

    def __init__(self) -> None:
        self.peer: ClientSocket | None = None
        self.readyState = OPEN
        self.accepted = False
        self._attachment: Any = None
        # Set when accepted: delivers an event to the owning object by name.
        self.deliver: Callable[..., None] | None = None

    def accept(self) -> None:
        # workerd has ws.accept() too, but it pins the object in memory; the double refuses it
        # so that a test fails if the live feed ever stops using the hibernation API.
        raise AssertionError("use ctx.acceptWebSocket (hibernation), not WebSocket.accept()")

    def send(self, data: str | bytes) -> None:
        if not self.accepted:
            raise RuntimeError("You must call accept() on this WebSocket before sending.")
        if self.readyState != OPEN:
            raise RuntimeError("Can't call WebSocket send() after close().")
        if not isinstance(data, (str, bytes)):
            raise TypeError(f"cannot send {type(data).__name__}")
        assert self.peer is not None
        self.peer.inbox.append(data if isinstance(data, str) else data.decode())

    def close(self, code: int = 1000, reason: str = "") -> None:
        if code in _RESERVED or not (code == 1000 or 3000 <= code <= 4999):
            raise InvalidAccessError(f"invalid WebSocket close code {code}")
        if len(reason.encode()) > 123:
            raise ValueError("close reason longer than 123 bytes")
        if self.readyState == CLOSED:
            return
        self.readyState = CLOSED
        assert self.peer is not None
        self.peer.close_code, self.peer.close_reason = code, reason

    def serializeAttachment(self, value: Any) -> None:
        self._attachment = _clone(value)

    def deserializeAttachment(self) -> Any:
        return None if self._attachment is None else _clone(self._attachment)


class ClientSocket:
    """The client end, read by the test."""

    def __init__(self, server: WebSocket) -> None:
        self.server = server
        self.inbox: list[str] = []
        self.close_code: int | None = None
        self.close_reason = ""

    @property
    def closed(self) -> bool:
        return self.close_code is not None

    def recv(self) -> dict[str, Any]:
        """The next received message, decoded; fails when none is waiting."""
        assert self.inbox, f"no message waiting (closed with {self.close_code})"
        decoded: dict[str, Any] = json.loads(self.inbox.pop(0))
        return decoded

    def drain(self) -> list[dict[str, Any]]:
        """Every message waiting, decoded."""
        out = [json.loads(text) for text in self.inbox]
        self.inbox.clear()
        return out

    def send(self, text: str) -> None:
        """A message to the object (`webSocketMessage`)."""
        assert not self.closed and self.server.deliver is not None
        self.server.deliver("webSocketMessage", self.server, text)

    def close(self, code: int = 1000, reason: str = "") -> None:
        """The client closes; the runtime answers the close and tells the object."""
        if self.closed:
            return
        self.close_code, self.close_reason = code, reason
        self.server.readyState = CLOSED  # web_socket_auto_reply_to_close
        if self.server.deliver is not None:
            self.server.deliver("webSocketClose", self.server, code, reason, True)


class WebSocketPair:
    """`js.WebSocketPair`."""

    def __init__(self) -> None:
        self.server = WebSocket()
        self.client = ClientSocket(self.server)
        self.server.peer = self.client

    @classmethod
    def new(cls) -> WebSocketPair:
        return cls()

    def object_values(self) -> list[Any]:
        return [self.client, self.server]


def js_module() -> types.ModuleType:
    """A fresh stand-in `js` module: what the edge code imports from it."""
    mod = types.ModuleType("js")
    mod.__dict__["WebSocketPair"] = WebSocketPair
    mod.__dict__["TransformStream"] = streams.TransformStream
    mod.__dict__["TextEncoder"] = streams.TextEncoder
    return mod
