"""What both clients configure alike on httpx: headers, timeouts, transport failures."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from aidememo.client.errors import AidememoUnreachable

Timeout = float | httpx.Timeout
"""Seconds for each phase of an exchange (connect, write, read, pool), or an `httpx.Timeout`."""

# The failures an identical retry may cure: no connection, no answer in time, a connection
# reset or closed before the answer was complete (CLIENT-1).
RETRYABLE = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


def client_headers(token: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"accept": "application/json", "authorization": f"Bearer {token}"}
    headers.update(extra or {})
    return headers


def web_timeout(timeout: Timeout) -> httpx.Timeout:
    return timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)


def unreachable(exc: httpx.TransportError) -> AidememoUnreachable:
    """A transport failure as the client's error; its message names the failure's type."""
    detail = str(exc) or type(exc).__name__
    return AidememoUnreachable(
        f"{type(exc).__name__}: {detail}", retryable=isinstance(exc, RETRYABLE)
    )
