"""The one exception type of `aidememo.client` (SPEC.md CLIENT-4).

A refusal of the server is an `AidememoClientError` carrying the server's error code (the value
of an `aidememo.domain.errors.ErrorCode`, such as `stale_revision`), the HTTP status and the
message. A request that got no answer (connection refused, reset, a timeout) is the subclass
`AidememoUnreachable`, with `transport` true and no status, so a caller can tell "the server
said no" from "the server could not be asked".
"""

from __future__ import annotations

UNREACHABLE = "unreachable"
"""The code of `AidememoUnreachable`: no answer came back."""

INVALID_RESPONSE = "invalid_response"
"""The code of an answer that is not the contract's (not JSON, or not the expected shape)."""


class AidememoClientError(Exception):
    """A call that did not succeed: `code`, `status` (None without an answer) and `message`."""

    transport = False

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{code}: {message}" if status is None else f"{status} {code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class AidememoUnreachable(AidememoClientError):
    """No answer: the request may or may not have reached the server.

    `retryable` is true for the failures an identical retry may cure (connect errors,
    timeouts, a connection reset or closed mid-answer) and false for a request that cannot be
    sent at all (an unsupported URL scheme).
    """

    transport = True

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(UNREACHABLE, message)
        self.retryable = retryable
