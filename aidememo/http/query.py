"""Strict query-string reading: unknown or repeated parameters are refused (HTTP-3)."""

from __future__ import annotations

from urllib.parse import parse_qsl

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import INT64_MAX


class Query:
    """The parameters of one request, consumed by name and then checked for leftovers."""

    def __init__(self, raw: str) -> None:
        try:
            pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=False, errors="strict")
        except (UnicodeDecodeError, ValueError):
            raise fail(ErrorCode.INVALID_COMMAND, "malformed query string") from None
        self._values: dict[str, str] = {}
        for key, value in pairs:
            if key in self._values:
                raise fail(ErrorCode.INVALID_COMMAND, f"query parameter {key!r} is repeated")
            self._values[key] = value

    def finish(self, allowed: frozenset[str], *, forbidden: frozenset[str] = frozenset()) -> None:
        """Refuse identity-widening and unknown parameters."""
        for key in self._values:
            if key in forbidden:
                raise fail(
                    ErrorCode.INVALID_COMMAND, f"{key} is taken from the token, not the query"
                )
        unknown = self._values.keys() - allowed
        if unknown:
            raise fail(ErrorCode.INVALID_COMMAND, f"unknown query parameter(s) {sorted(unknown)}")

    def text(self, key: str) -> str | None:
        """A raw string parameter, or None."""
        return self._values.get(key)

    def integer(
        self,
        key: str,
        *,
        minimum: int = 0,
        maximum: int = INT64_MAX,
        code: ErrorCode = ErrorCode.INVALID_COMMAND,
    ) -> int | None:
        """A decimal integer parameter (no sign, no spaces) in `[minimum, maximum]`."""
        value = self._values.get(key)
        if value is None:
            return None
        if not value.isascii() or not value.isdigit() or len(value) > 19:
            raise fail(code, f"{key} must be a non-negative integer")
        number = int(value)
        if not minimum <= number <= maximum:
            raise fail(code, f"{key} must be {minimum}-{maximum}")
        return number

    def boolean(self, key: str) -> bool | None:
        """`true` or `false`, nothing else."""
        value = self._values.get(key)
        if value is None:
            return None
        if value not in ("true", "false"):
            raise fail(ErrorCode.INVALID_COMMAND, f"{key} must be true or false")
        return value == "true"
