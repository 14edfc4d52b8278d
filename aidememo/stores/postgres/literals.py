"""A statement's parameters written into its text, for one simple query (SPEC.md STORE-10).

A read view of one statement (`Session.execute_alone`) is sent as one simple query that holds
the transaction's timeouts and the statement, so it needs no `BEGIN`, no `COMMIT` and no
separate round trip for its parameters. A simple query carries no parameters, so they are
written as literals here, in forms whose meaning no server setting changes:

- text as an escape string `E'...'` (backslashes and quotes doubled): its reading does not
  depend on `standard_conforming_strings`; a NUL character, which no PostgreSQL text can hold,
  is refused (the extended protocol would refuse it too);
- bytes as `'\\x…'::bytea` inside an escape string;
- integers in decimal; floats as their shortest round-trip text cast from a string
  (`'0.1'::float8`, which PostgreSQL reads back to the same double), never NaN or infinite;
- None as NULL, booleans as true/false.

Any other type raises TypeError: a new caller must add its type here on purpose.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

PLACEHOLDER = "%s"


def literal(value: Any) -> str:
    """`value` as a SQL literal of the types above."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("a non-finite float has no literal here")
        return f"'{value!r}'::float8"
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("PostgreSQL text cannot hold a NUL character")
        return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"E'\\\\x{bytes(value).hex()}'::bytea"
    raise TypeError(f"no SQL literal for {type(value).__name__}")


def inline(sql: str, params: Sequence[Any]) -> str:
    """`sql` with each `%s` replaced by the next parameter's literal; the statement must hold
    no other `%` (the shared statements hold none) and exactly one placeholder per parameter."""
    parts = sql.split(PLACEHOLDER)
    if len(parts) != len(params) + 1 or any("%" in part for part in parts):
        raise ValueError("the statement's placeholders do not match its parameters")
    out = [parts[0]]
    for value, part in zip(params, parts[1:], strict=True):
        out.append(literal(value))
        out.append(part)
    return "".join(out)
