"""Framework-free request and response values."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Request:
    """An HTTP request as the core sees it.

    `headers` keys are lower-case; `query` is the raw query string without `?`; `body` is
    the whole body (adapters stop reading past the size limit and set `body_too_large`).
    """

    method: str
    path: str
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    body_too_large: bool = False
    request_id: str = ""


@dataclass(frozen=True, slots=True)
class Response:
    """An HTTP response: status, headers (lower-case names) and the encoded body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def json_content(self) -> bool:
        """True when the body is JSON."""
        return any(k == "content-type" and "json" in v for k, v in self.headers)
