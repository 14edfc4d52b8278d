"""The stand-in `workers` module: the SDK classes our code touches, with the SDK's shapes.

- `Request`: `.url` (str), `.method` (an `http.HTTPMethod`; an unknown method raises
  `KeyError` like the SDK's `HTTPMethod[js.method]`), `.headers` (an
  `http.client.HTTPMessage`), `await .bytes()` / `.text()`, `.js_object.method`.
- `Request.body`: the body as a `ReadableStream` (None without one), as the SDK exposes it.
- `Response(body, status=, headers=)`: body `str`, `bytes` or a `ReadableStream` (`stream`,
  read by the harness as a client would); `Response.json(data, status=)`.
- `WorkerEntrypoint(ctx, env)` and `DurableObject(ctx, env)` keep `ctx` and `env`.
- `await fetch(url, method=, headers=, body=)`: the outbound `fetch`, a real HTTP request
  (http.client, so nothing is added but `Host`, `Accept-Encoding: identity` and
  `Content-Length`); the answer has `.status`, `.headers` (an `http.client.HTTPMessage`),
  `.body` (a `ReadableStream`, None for a `HEAD` or an empty body) and `await .bytes()`.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import types
import urllib.parse
from http import HTTPMethod
from typing import Any

from tests.edge.runtime.streams import ReadableStream


class JsRequest:
    """What `Request.js_object` exposes here: the method as the client sent it."""

    def __init__(self, method: str) -> None:
        self.method = method


class Request:
    """`workers.Request` wrapping a JS request; `Request(url, method=, headers=, body=)` as the
    SDK builds one."""

    def __init__(
        self,
        url: str,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> None:
        self.url = url
        self.js_object = JsRequest(method)
        self._headers = dict(headers or {})
        self._body = body
        self.body_used = False

    @property
    def method(self) -> HTTPMethod:
        return HTTPMethod[self.js_object.method]

    @property
    def headers(self) -> http.client.HTTPMessage:
        message = http.client.HTTPMessage()
        for key, value in self._headers.items():
            message[key] = value
        return message

    @property
    def body(self) -> ReadableStream | None:
        """The body as a stream (JS null without one); reading it uses the body."""
        if not self._body:
            return None
        if self.body_used:
            raise OSError("Body already used")
        self.body_used = True
        return ReadableStream.of(self._body)

    async def bytes(self) -> bytes:
        if self.body_used:
            raise OSError("Body already used")
        self.body_used = True
        return self._body

    async def text(self) -> str:
        return (await self.bytes()).decode("utf-8")


class Response:
    """`workers.Response`; `web_socket=` the client end of a pair, with status 101 only (as
    workerd's `Response` constructor requires)."""

    def __init__(
        self,
        body: str | bytes | None = None,
        status: int = 200,
        status_text: str = "",
        headers: dict[str, str] | None = None,
        web_socket: Any = None,
    ) -> None:
        self.stream = body if isinstance(body, ReadableStream) else None
        if body is not None and self.stream is None and not isinstance(body, (str, bytes)):
            raise TypeError(f"unsupported body type {type(body).__name__}")
        if (status == 101) != (web_socket is not None):
            raise JsRangeError("status 101 goes with a webSocket, and only it")
        self.web_socket = web_socket
        if isinstance(body, str):
            body = body.encode("utf-8")
        self.body = body if isinstance(body, bytes) else b""
        self.status = status
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}

    @classmethod
    def json(cls, data: Any, status: int = 200) -> Response:
        return cls(json.dumps(data), status=status, headers={"content-type": "application/json"})


class JsRangeError(ValueError):
    """A JS `RangeError` from the `Response` constructor."""


class WorkerEntrypoint:
    """Base of `Default`: the runtime creates one per request with `(ctx, env)`."""

    def __init__(self, ctx: Any, env: Any) -> None:
        self.ctx = ctx
        self.env = env


class DurableObject:
    """Base of a Durable Object class: `(ctx, env)`."""

    def __init__(self, ctx: Any, env: Any) -> None:
        self.ctx = ctx
        self.env = env


class FetchResponse:
    """What `workers.fetch` answers."""

    def __init__(self, status: int, headers: http.client.HTTPMessage, data: bytes) -> None:
        self.status = status
        self.headers = headers
        self._data = data

    @property
    def body(self) -> ReadableStream | None:
        return ReadableStream.of(self._data) if self._data else None

    async def bytes(self) -> bytes:
        return self._data

    async def text(self) -> str:
        return self._data.decode("utf-8")


def _send(url: str, method: str, headers: dict[str, str], body: bytes | None) -> FetchResponse:
    parts = urllib.parse.urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.netloc, timeout=30)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request(method, target, body=body, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        return FetchResponse(answer.status, answer.headers, data)
    finally:
        conn.close()


async def fetch(
    url: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> FetchResponse:
    """The Workers outbound `fetch` (a real request, sent from a thread)."""
    return await asyncio.to_thread(_send, str(url), method, dict(headers or {}), body)


def module() -> types.ModuleType:
    """A fresh `workers` module object holding the classes above."""
    mod = types.ModuleType("workers")
    mod.__dict__.update(
        {
            "Request": Request,
            "Response": Response,
            "WorkerEntrypoint": WorkerEntrypoint,
            "DurableObject": DurableObject,
            "fetch": fetch,
        }
    )
    return mod
