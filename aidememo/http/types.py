"""Framework-free request and response values."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aidememo.http.body import EMPTY, Body

if TYPE_CHECKING:
    from aidememo.http.routing import Match

# Request and Response are made for every request on the hot path: plain slotted dataclasses,
# since a frozen one costs five times as much to build (each field set through
# `object.__setattr__`); nothing changes them after they are made (none is hashable either:
# they hold a dict or a list).


@dataclass(slots=True)
class Request:
    """An HTTP request as the core sees it.

    `headers` keys are lower-case; `query` is the raw query string without `?`; `body` is a
    `Body` (`aidememo.http.body`: whole, or a bounded stream still arriving; `bytes` given
    here are wrapped as a whole body). `upgrade` is True when the front received the request
    as a WebSocket upgrade (only the live feed accepts one, LIVE-1). `match` is the route a
    front resolved already (the origin resolves each request once, to choose where it runs);
    None: the pipeline resolves it.
    """

    method: str
    path: str
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: Body = EMPTY
    request_id: str = ""
    upgrade: bool = False
    match: Match | None = None

    def __post_init__(self) -> None:
        body: object = self.body
        if isinstance(body, bytes):
            self.body = Body.of(body)


@dataclass(slots=True)
class Response:
    """An HTTP response: status, headers (lower-case names) and the encoded body.

    `stream`, when set, is the body instead of `body`: chunks a front sends as they come
    (an artifact download, ART-6), with the length in the `content-length` header.
    """

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    stream: Iterator[bytes] | None = None

    @property
    def json_content(self) -> bool:
        """True when the body is JSON."""
        return any(k == "content-type" and "json" in v for k, v in self.headers)
