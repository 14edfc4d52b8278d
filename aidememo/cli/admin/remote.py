"""The admin commands' `--url URL --admin-token-file F` mode: the admin HTTP routes, spoken to
with the standard library only (`http.client`, no new dependency).

HTTPS is the default (a URL without a scheme is read as `https://`); plain `http://` is allowed
only for a loopback host, or with an explicit `--allow-insecure-http`, because the admin token
would otherwise cross the network in clear text. A failed request becomes one `CliError`
carrying the server's structured error code and message (exit status 1). Exports are written
as the response arrives and imports stream the file as the request body, so neither is held in
memory.
"""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Callable
from typing import Any, BinaryIO
from urllib.parse import quote, urlencode

from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.urls import as_http, checked_url, is_loopback

TIMEOUT_S = 300.0
CHUNK_BYTES = 64 * 1024
NDJSON = "application/x-ndjson"


def _error_text(status: int, reason: str, raw: bytes) -> str:
    """`message (code)` from a structured error body, else the HTTP status line."""
    try:
        error = json.loads(raw)["error"]
        return f"{error['message']} ({error['code']})"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status} {reason}".strip()


class AdminClient:
    """One admin endpoint: a base URL plus the admin token sent as the bearer."""

    def __init__(
        self, url: str, token: str, *, allow_insecure_http: bool = False, timeout: float = TIMEOUT_S
    ) -> None:
        parts = checked_url(url, "the admin token", allow_insecure_http=allow_insecure_http)
        url = parts.geturl()
        try:
            port = parts.port
        except ValueError:
            raise CliError(f"--url has an invalid port: {url!r}", EXIT_USAGE) from None
        self.url = url
        self.secure = parts.scheme == "https"
        self.host = parts.hostname or ""  # checked_url refuses a URL without one
        self.port = port
        self.prefix = parts.path.rstrip("/")
        self.token = token
        self.timeout = timeout

    # -- transport ------------------------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        if self.secure:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def _target(self, path: str, query: dict[str, str] | None) -> str:
        target = quote(self.prefix + path, safe="/:@!$&'()*+,;=-._~")
        return target + ("?" + urlencode(query) if query else "")

    def _exchange(
        self,
        what: str,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: bytes | BinaryIO | None = None,
        content_type: str | None = None,
        length: int | None = None,
        sink: Callable[[bytes], None] | None = None,
    ) -> tuple[int, bytes]:
        """One request; a 2xx answer is `(status, body)` (the body goes to `sink` as it
        arrives when one is given), anything else a `CliError` with the server's error."""
        headers = {"authorization": f"Bearer {self.token}", "accept": "*/*"}
        if content_type is not None:
            headers["content-type"] = content_type
        if length is not None:
            headers["content-length"] = str(length)
        conn = self._connection()
        try:
            try:
                conn.request(method, self._target(path, query), body=body, headers=headers)
            except (BrokenPipeError, ConnectionResetError):
                # The server answered (an error) before taking the whole body: read it.
                pass
            response = conn.getresponse()
            if not 200 <= response.status < 300:
                raw = response.read()
                raise CliError(f"{what}: {_error_text(response.status, response.reason, raw)}")
            if sink is None:
                return response.status, response.read()
            while chunk := response.read(CHUNK_BYTES):
                sink(chunk)
            return response.status, b""
        except ssl.SSLError as exc:
            hint = ""
            if is_loopback(self.host):  # `aidememo serve` on loopback speaks plain HTTP
                hint = f"; a local `aidememo serve` speaks plain HTTP: try {as_http(self.url)}"
            raise CliError(f"{what}: TLS failure talking to {self.url}: {exc}{hint}") from None
        except (OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise CliError(f"{what}: cannot reach {self.url}: {reason}") from None
        finally:
            conn.close()

    def post_json(self, what: str, path: str, document: dict[str, Any]) -> dict[str, Any]:
        """POST a JSON document; the decoded JSON answer."""
        raw = json.dumps(document).encode()
        _, answer = self._exchange(
            what, "POST", path, body=raw, content_type="application/json", length=len(raw)
        )
        return _decode(what, answer)

    def delete(self, what: str, path: str, query: dict[str, str]) -> dict[str, Any]:
        """DELETE; the decoded JSON answer."""
        _, answer = self._exchange(what, "DELETE", path, query=query)
        return _decode(what, answer)

    def download(
        self, what: str, path: str, query: dict[str, str], sink: Callable[[bytes], None]
    ) -> None:
        """GET a body and hand it to `sink` chunk by chunk as it arrives."""
        self._exchange(what, "GET", path, query=query, sink=sink)

    def upload(self, what: str, path: str, source: BinaryIO, size: int) -> dict[str, Any]:
        """POST `size` bytes of `source` as an ndjson body, streamed; the decoded answer."""
        _, answer = self._exchange(
            what, "POST", path, body=source, content_type=NDJSON, length=size
        )
        return _decode(what, answer)


def _decode(what: str, raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        raise CliError(f"{what}: the server's answer is not JSON") from None
    if not isinstance(value, dict):
        raise CliError(f"{what}: the server's answer is not a JSON object")
    return value
