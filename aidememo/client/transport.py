"""What a client hands its transport, and what it gets back (standard library only).

A `Request` is one HTTP exchange (method, absolute URL, headers, body, timeouts); a transport
answers it with an `Answer` (status, lower-case headers, the body whole or, for a download, as
it arrives) or raises `AidememoUnreachable` when no answer came back, naming the failure's kind
(`ConnectError`, `ReadTimeout`, ...) and whether an identical retry may cure it (CLIENT-1).
`Transport` is the synchronous shape (`Client`; default `KeepAliveTransport` on plain sockets,
so an agent command imports no HTTP library) and `AsyncTransport` the asynchronous one
(`AsyncClient`; default httpx's, `aidememo.client.httpx_transport`, which also adapts any
other httpx transport, such as one through a proxy: none is read from the environment).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, NamedTuple, Protocol, TypeVar

from aidememo.client.errors import AidememoUnreachable

if TYPE_CHECKING:
    import httpx

Body = bytes | Iterator[bytes] | None

# The failures an identical retry may cure: no connection, no answer in time, a connection
# reset or closed before the answer was complete (CLIENT-1). Not: a URL the transport cannot
# speak to at all.
NOT_RETRYABLE = frozenset({"UnsupportedProtocol", "LocalProtocolError"})


def unreachable(kind: str, detail: str) -> AidememoUnreachable:
    """A failure without an answer as the client's error: `kind: detail`."""
    return AidememoUnreachable(f"{kind}: {detail or kind}", retryable=kind not in NOT_RETRYABLE)


class Timeouts:
    """Seconds to connect and to wait for each read (None: no limit)."""

    __slots__ = ("connect", "read")

    def __init__(self, connect: float | None, read: float | None) -> None:
        self.connect = connect
        self.read = read


Timeout = float | Timeouts
"""Seconds for each phase of an exchange, or `Timeouts` (an `httpx.Timeout` is read too)."""


def timeouts(value: Timeout | httpx.Timeout) -> Timeouts:
    if isinstance(value, Timeouts):
        return value
    if isinstance(value, int | float):
        return Timeouts(float(value), float(value))
    return Timeouts(value.connect, value.read)


class Request(NamedTuple):
    """One exchange: `body` bytes, chunks (sent as they come) or None."""

    method: str
    url: str
    headers: dict[str, str]
    body: Body
    timeouts: Timeouts


S = TypeVar("S")  # how a streamed body arrives
F = TypeVar("F")  # what releases it


@dataclass(slots=True, eq=False)
class _Answer(Generic[S, F]):
    """What `Answer` and `AsyncAnswer` hold: the status, lower-case headers, and the body,
    whole (`content`) or streamed (read with `chunks()`, released with `close()`/`aclose()`,
    which call `release`)."""

    status: int
    headers: Mapping[str, str]
    content: bytes = b""
    stream: S | None = None
    release: F | None = None


class Answer(_Answer[Iterator[bytes], Callable[[], None]]):
    """One answer of a `Transport`."""

    __slots__ = ()

    def chunks(self) -> Iterator[bytes]:
        if self.stream is None:
            if self.content:
                yield self.content
            return
        yield from self.stream

    def close(self) -> None:
        """Release a streamed answer's connection (one read to its end is kept)."""
        if self.release is not None:
            self.release()
            self.release = None


class AsyncAnswer(_Answer[AsyncIterator[bytes], Callable[[], Awaitable[None]]]):
    """One answer of an `AsyncTransport`."""

    __slots__ = ()

    async def chunks(self) -> AsyncIterator[bytes]:
        if self.stream is None:
            if self.content:
                yield self.content
            return
        async for chunk in self.stream:
            yield chunk

    async def aclose(self) -> None:
        if self.release is not None:
            await self.release()
            self.release = None


class Transport(Protocol):
    def exchange(self, request: Request, *, stream: bool = False) -> Answer: ...

    def close(self) -> None: ...


class AsyncTransport(Protocol):
    async def exchange(self, request: Request, *, stream: bool = False) -> AsyncAnswer: ...

    async def aclose(self) -> None: ...


class Wire:
    """How one client's requests are built: the base URL, headers and timeouts."""

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: Timeout | httpx.Timeout,
        extra: Mapping[str, str] | None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
        self.base_url = base_url.rstrip("/")
        headers = {"accept": "application/json", "authorization": f"Bearer {token}"}
        headers.update({k.lower(): v for k, v in (extra or {}).items()})
        for name, value in headers.items():
            if any(c in name + value for c in "\r\n\0"):
                raise ValueError(f"header {name!r} (or the token) holds a line break or NUL")
        self.headers = headers
        self.timeouts = timeouts(timeout)

    def request(
        self, method: str, target: str, body: Body = None, content_type: str | None = None
    ) -> Request:
        """A request to `target` under the base URL; `content_type` defaults to JSON for a
        body given as bytes."""
        headers = self.headers
        if content_type is None and isinstance(body, bytes):
            content_type = "application/json"
        if content_type is not None:
            headers = {**headers, "content-type": content_type}
        return Request(method, self.base_url + target, headers, body, self.timeouts)
