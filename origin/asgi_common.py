"""What the origin's HTTP transport (`origin.transport`, `origin.exchange`) and the live feed's
WebSockets (`origin.live`) share: the ASGI 3 type aliases, header folding, request ids, which
requests have no body, the log-safe rendering of a request line's text, and the 503 a
dispatch bug turns into.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from random import getrandbits
from typing import Any

from aidememo.domain.errors import STORAGE_RETRY_AFTER_S, ErrorCode, fail
from aidememo.domain.ids import is_valid_id
from aidememo.http.types import Response

AsgiScope = MutableMapping[str, Any]
AsgiMessage = MutableMapping[str, Any]
AsgiReceive = Callable[[], Awaitable[AsgiMessage]]
AsgiSend = Callable[[AsgiMessage], Awaitable[None]]
AsgiApp = Callable[[AsgiScope, AsgiReceive, AsgiSend], Awaitable[None]]

REQUEST_ID_HEADER = "x-request-id"

_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})


def bodyless(method: str, headers: dict[str, str]) -> bool:
    """True when a request has no body at all: a method that has none, announcing none (no
    `Content-Length`, no `Transfer-Encoding`). Any other request without a declared body
    gets the (empty) body the client sent."""
    return (
        method in _BODYLESS
        and "content-length" not in headers
        and "transfer-encoding" not in headers
    )


def fold_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """ASGI headers as a dict: names lower-cased, repeated headers joined with ", "."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in raw:
        name = raw_name.decode("latin-1").lower()
        if name in headers:
            headers[name] = f"{headers[name]}, {raw_value.decode('latin-1')}"
        else:
            headers[name] = raw_value.decode("latin-1")
    return headers


def new_request_id() -> str:
    """16 random hex characters: an identifier, not a secret, so from the process's
    pseudo-random generator (reseeded in every forked worker) rather than a system call."""
    return f"{getrandbits(64):016x}"


def request_id(headers: dict[str, str]) -> str:
    """The incoming `x-request-id` when it is a valid identifier (ID-1), else a new one."""
    incoming = headers.get(REQUEST_ID_HEADER)
    return incoming if incoming is not None and is_valid_id(incoming) else new_request_id()


def log_safe(text: str) -> str:
    """The text as is when it is plain printable ASCII without spaces, else JSON-quoted."""
    if text.isascii() and text.isprintable() and " " not in text:
        return text
    return json.dumps(text)


def internal_error(request_id: str) -> Response:
    """What a dispatch bug turns into: a retryable 503 whose message leaks nothing."""
    body = json.dumps(fail(ErrorCode.STORAGE_FAILURE, "dispatch raised").to_json()).encode()
    return Response(
        503,
        [("content-type", "application/json"), ("retry-after", str(STORAGE_RETRY_AFTER_S))],
        body,
    )
