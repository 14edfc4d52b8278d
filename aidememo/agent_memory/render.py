"""Rendering stored memory text, which is untrusted data (SPEC.md MEM-11).

Inline text escapes control characters (C0, DEL, C1, U+2028/2029 and bidi controls) so a stored
value cannot forge an output row, a tab-separated column or a terminal sequence; JSON output
escapes the code points `JSON.stringify` leaves raw; a Markdown block uses a fence longer than
any backtick run in the value. The outputs equal Nuzo 1.2's byte for byte.
"""

from __future__ import annotations

from typing import Any

from aidememo.agent_memory.jstext import js_json
from aidememo.agent_memory.model import Relation

_BIDI = frozenset(
    {0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069}
)


def _is_control(cp: int) -> bool:
    return cp <= 0x1F or 0x7F <= cp <= 0x9F or cp in (0x2028, 0x2029) or cp in _BIDI


def _is_raw_json_unsafe(cp: int) -> bool:
    return 0x7F <= cp <= 0x9F or cp in (0x2028, 0x2029) or cp in _BIDI


def _escape_one(cp: int) -> str:
    return {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}.get(cp) or f"\\u{cp:04x}"


def escape_controls(text: str) -> str:
    """Every control character replaced by a visible escape; backslashes left alone."""
    return "".join(_escape_one(ord(ch)) if _is_control(ord(ch)) else ch for ch in text)


def inline(text: str) -> str:
    """One line of human-readable output: backslashes doubled, controls escaped."""
    return escape_controls(text.replace("\\", "\\\\"))


def untrusted_json(value: Any, indent: int | None = 2) -> str:
    """`JSON.stringify(value, null, indent)` with DEL, C1, separators and bidi escaped."""
    text = js_json(value, indent)
    return "".join(_escape_one(ord(ch)) if _is_raw_json_unsafe(ord(ch)) else ch for ch in text)


def markdown_block(text: str) -> str:
    """An inert fenced block: line feeds kept, other controls escaped, a long enough fence."""
    escaped = "".join(
        _escape_one(ord(ch))
        if ord(ch) != 0x0A and (_is_control(ord(ch)) or ord(ch) == 0x0D)
        else ch
        for ch in text
    )
    longest = current = 0
    for ch in escaped:
        current = current + 1 if ch == "`" else 0
        longest = max(longest, current)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{escaped}\n{fence}"


def yaml_string(value: str | None) -> str:
    return "null" if value is None else escape_controls(js_json(value))


def relation_markers(relations: list[Relation], perspective: str) -> str:
    """The ` rel=...` markers a listing line shows for `relations`, seen from `perspective`."""
    return "".join(f" rel={r.marker(perspective)}" for r in relations)
