"""Text, number and time rules the memory store shares with stores written by Nuzo 1.2.

A store on disk holds values computed by Nuzo's JavaScript: capture keys made with ECMAScript
`trim()` and `\\s`, lengths counted in UTF-16 code units, timestamps in `toISOString()` form and
JSON printed by `JSON.stringify`. This module reproduces exactly those rules (SPEC.md MEM-3), so a
key or length computed here equals the one already stored, and output is byte-compatible.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

# ECMAScript WhiteSpace plus LineTerminator: what `\s` and `trim()` mean in JavaScript. Python's
# `\s` differs (it adds U+001C..U+001F and U+0085 and lacks U+FEFF).
JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_SPACE_RUN = re.compile(f"[{JS_SPACE}]+")
# The same characters as a plain string, for `str.strip`.
_SPACE_CHARS = (
    "\t\n\v\f\r \u00a0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000\ufeff")
)


def js_trim(text: str) -> str:
    """ECMAScript `String.prototype.trim`."""
    return text.strip(_SPACE_CHARS)


def is_blank(text: str) -> bool:
    """`text.trim().length === 0`."""
    return not text.strip(_SPACE_CHARS)


def collapse_spaces(text: str) -> str:
    """`text.trim().replace(/\\s+/g, " ")`."""
    return _SPACE_RUN.sub(" ", js_trim(text))


def utf16_len(text: str) -> int:
    """JavaScript `length`: UTF-16 code units (a character outside the BMP counts 2)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


# -- time --------------------------------------------------------------------------------------


def iso_ms(moment: datetime) -> str:
    """`Date.prototype.toISOString()`: UTC, milliseconds, `Z`."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def now_iso() -> str:
    """The current time as `toISOString()` text."""
    return iso_ms(datetime.now(UTC))


_ISO = re.compile(
    r"^(?P<y>[+-]\d{6}|\d{4})(?:-(?P<mo>\d{2})(?:-(?P<d>\d{2}))?)?"
    r"(?:[T ](?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?"
    r"\s*(?P<z>Z|z|[+-]\d{2}:?\d{2})?)?$"
)


def parse_date(text: str) -> datetime | None:
    """The instant an ISO 8601 date or date-time names, or None when it names none.

    Accepts what JavaScript's `Date` parses from ISO text: a date alone is UTC midnight, a
    date-time without an offset is taken as UTC (the CLI and MCP callers run in UTC; a local
    reading is a documented difference, SPEC.md MEM-3). Other free-form dates are refused.
    """
    match = _ISO.match(text.strip())
    if match is None:
        return None
    parts = match.groupdict()
    try:
        year = int(parts["y"])
        base = datetime(
            year if 1 <= year <= 9999 else 2000,
            int(parts["mo"] or 1),
            int(parts["d"] or 1),
            int(parts["h"] or 0),
            int(parts["mi"] or 0),
            int(parts["s"] or 0),
            int(((parts["f"] or "0") + "000")[:3]) * 1000,
            tzinfo=UTC,
        )
    except ValueError:
        return None
    if not 1 <= year <= 9999:
        return None
    zone = parts["z"]
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        base -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return base


def normalize_date(text: str) -> str | None:
    """`new Date(text).toISOString()`, or None when `text` is no date."""
    moment = parse_date(text)
    return None if moment is None else iso_ms(moment)


# -- numbers and JSON --------------------------------------------------------------------------


def js_number(value: float | int) -> str:
    """`String(number)` / `JSON.stringify(number)` in JavaScript."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "null"
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, _, exponent = text.partition("e")
    power = int(exponent)
    if -7 < power < 0:  # JavaScript writes 1e-6..1e-4 out in full, Python does not
        sign = "-" if mantissa.startswith("-") else ""
        digits = mantissa.lstrip("-").replace(".", "")
        return f"{sign}0.{'0' * (-power - 1)}{digits}"
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def to_precision(value: float, digits: int) -> str:
    """`Number.prototype.toPrecision(digits)`: the exact binary value rounded half up."""
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    sign = "-" if value < 0 else ""
    exact = Decimal(abs(value))
    if exact == 0:
        return "0" if digits == 1 else "0." + "0" * (digits - 1)
    exponent = exact.adjusted()
    scaled = exact.scaleb(digits - 1 - exponent).to_integral_value(ROUND_HALF_UP)
    if scaled >= 10**digits:
        exponent += 1
        scaled = exact.scaleb(digits - 1 - exponent).to_integral_value(ROUND_HALF_UP)
    text = str(int(scaled))
    if exponent < -6 or exponent >= digits:
        mantissa = text[0] + ("." + text[1:] if digits > 1 else "")
        return f"{sign}{mantissa}e{'+' if exponent >= 0 else '-'}{abs(exponent)}"
    if exponent >= digits - 1:
        return sign + text
    if exponent >= 0:
        return f"{sign}{text[: exponent + 1]}.{text[exponent + 1 :]}"
    return f"{sign}0.{'0' * (-exponent - 1)}{text}"


_JSON_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_JSON_NEEDS = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')


def _json_string(text: str) -> str:
    def escape(match: re.Match[str]) -> str:
        ch = match.group(0)
        return _JSON_ESCAPES.get(ch) or f"\\u{ord(ch):04x}"

    return '"' + _JSON_NEEDS.sub(escape, text) + '"'


def js_json(value: Any, indent: int | None = None) -> str:
    """`JSON.stringify(value, null, indent)`: JavaScript number forms, `None` as `null`."""
    return _json(value, indent, 0)


def _json(value: Any, indent: int | None, depth: int) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
        if not items:
            return "{}"
        if indent is None:
            return "{" + ",".join(f"{_json_string(k)}:{_json(v, None, 0)}" for k, v in items) + "}"
        pad = "\n" + " " * (indent * (depth + 1))
        body = ",".join(f"{pad}{_json_string(k)}: {_json(v, indent, depth + 1)}" for k, v in items)
        return "{" + body + "\n" + " " * (indent * depth) + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        if indent is None:
            return "[" + ",".join(_json(v, None, 0) for v in value) + "]"
        pad = "\n" + " " * (indent * (depth + 1))
        body = ",".join(f"{pad}{_json(v, indent, depth + 1)}" for v in value)
        return "[" + body + "\n" + " " * (indent * depth) + "]"
    raise TypeError(f"not JSON: {type(value).__name__}")
