"""Strict query-string reading: unknown or repeated parameters are refused (HTTP-3), and
every name and value is percent-decoded to bytes and then read as UTF-8 by the decoder's own
rules (CJ-4): the offset of an invalid byte, and no lone surrogates.

A route declares its parameters once, as `Param`s (`Route.query`, HTTP-16): the pipeline reads a
request's query against that declaration once (`aidememo.http.query_values.parse_query`) and the
handler takes the values from the request (`query_of`); the OpenAPI document (`Param.openapi`)
and the MCP tools' argument schemas (`aidememo.mcp.twins`) are made from the same `Param`s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

from aidememo.domain.canonical import decode_utf8
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.domain.limits import INT64_MAX


def _raw_bytes(raw: str) -> bytes:
    """The bytes of a raw query string. The origin hands the request target's bytes over as
    latin-1 text (one character per byte), the edge as the URL's ASCII (non-ASCII is
    percent-encoded there); text beyond latin-1 (the core called directly) is UTF-8."""
    if raw.isascii():
        return raw.encode("ascii")
    try:
        return raw.encode("latin-1")
    except UnicodeEncodeError:
        return raw.encode("utf-8", "surrogatepass")


def _component(data: bytes, what: str) -> str:
    return decode_utf8(unquote_to_bytes(data.replace(b"+", b" ")), what)


class Query:
    """The parameters of one request, consumed by name and then checked for leftovers."""

    def __init__(self, raw: str) -> None:
        self._values: dict[str, str] = {}
        for pair in _raw_bytes(raw).split(b"&"):
            if not pair:
                continue
            raw_key, _, raw_value = pair.partition(b"=")
            key = _component(raw_key, "a query parameter name")
            value = _component(raw_value, f"query parameter {key}")
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
        bounds = f"{key} must be an integer {minimum}-{maximum}"
        if not value.isascii() or not value.isdigit():
            raise fail(code, f"{bounds} (plain decimal digits)")
        if len(value) > 19 or not minimum <= int(value) <= maximum:
            raise fail(code, bounds)
        return int(value)

    def boolean(self, key: str) -> bool | None:
        """`true` or `false`, nothing else."""
        value = self._values.get(key)
        if value is None:
            return None
        if value not in ("true", "false"):
            raise fail(ErrorCode.INVALID_COMMAND, f"{key} must be true or false")
        return value == "true"


IDENTITY_PARAMS = frozenset({"actor_id", "tenant_id"})
"""Who the caller is comes from the token: these are refused in a member route's query."""

_ID_SCHEMA = {"$ref": "#/components/schemas/Id"}


@dataclass(frozen=True, slots=True)
class Param:
    """One query parameter of a route: its JSON Schema (type, range, default), whether it is
    required, its description, and the code of an integer out of its range."""

    name: str
    schema: dict[str, Any]
    required: bool = False
    doc: str = ""
    code: ErrorCode = ErrorCode.INVALID_COMMAND

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI parameter object."""
        param: dict[str, Any] = {
            "name": self.name,
            "in": "query",
            "required": self.required,
            "schema": self.schema,
        }
        if self.doc:
            param["description"] = self.doc
        return param

    def read(self, query: Query) -> Any:
        """The parameter's value as its type says (integers within their range, `true` or
        `false`, else the text), None when absent."""
        kind = self.schema.get("type")
        if kind == "integer":
            return query.integer(
                self.name,
                minimum=self.schema.get("minimum", 0),
                maximum=self.schema.get("maximum", INT64_MAX),
                code=self.code,
            )
        if kind == "boolean":
            return query.boolean(self.name)
        return query.text(self.name)


def read_params(
    raw: str, params: tuple[Param, ...], *, forbidden: frozenset[str] = IDENTITY_PARAMS
) -> dict[str, Any]:
    """Every parameter of `params` by name: each value read and checked, then unknown and
    `forbidden` names refused, then required ones insisted on, then ids checked; an absent
    parameter is its schema's default, or None."""
    if not raw and not any(p.required for p in params):  # the common case: nothing given
        return {p.name: p.schema.get("default") for p in params}
    query = Query(raw)
    values = {p.name: p.read(query) for p in params}
    query.finish(frozenset(values), forbidden=forbidden)
    missing = [p.name for p in params if p.required and values[p.name] is None]
    if missing:
        raise fail(
            ErrorCode.INVALID_COMMAND,
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} required",
        )
    for p in params:
        value = values[p.name]
        if value is None:
            values[p.name] = p.schema.get("default")
        elif p.schema == _ID_SCHEMA:
            validate_id(value, p.name)
    return values
