"""A cheap look at one top-level string of a JSON object, without decoding the document.

The edge Worker routes `POST /v1/commands` to the project object its body names, and the
object then decodes the body in full (CJ-3, ID-3); the Worker only needs `project_id`.
`top_level_string` walks the structure without recursion, jumping from one structural
character to the next (strings are skipped whole), and stops at the first top-level key
spelled exactly as asked. It answers only what it can be sure of: a plain string value (no
escapes) under a plain key. It gives None when the key is missing, when a top-level key
holds an escape before it (that key might spell the same name), when the value is not a
plain string, or when the text is not an object; a caller then falls back to the full
decode, whose error is the answer. For a document the full decode would refuse (a duplicate
key, a syntax error later on), a found value only decides which object refuses it.
"""

from __future__ import annotations

import re

_STRUCTURE = re.compile(rb'["{}\[\],:]')
_SPACE = b" \t\r\n"
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPEN = frozenset(b"{[")
_CLOSE = frozenset(b"}]")


def _string_end(data: bytes, start: int) -> int:
    """The index of the quote that ends the string whose text starts at `start`; -1 if none."""
    end = start
    while True:
        end = data.find(b'"', end)
        if end < 0:
            return -1
        k = end - 1
        while data[k] == _BACKSLASH:
            k -= 1
        if (end - 1 - k) % 2 == 0:  # an even run of backslashes: the quote is not escaped
            return end
        end += 1


def top_level_string(data: bytes, key: str) -> str | None:
    """The plain string value of `key` in the top-level object of `data`, or None."""
    want = key.encode()
    i = len(data) - len(data.lstrip(_SPACE))
    if data[i : i + 1] != b"{":
        return None
    depth = 0
    expect_key = False
    while True:
        m = _STRUCTURE.search(data, i)
        if m is None:
            return None
        i = m.start()
        c = data[i]
        if c == _QUOTE:
            end = _string_end(data, i + 1)
            if end < 0:
                return None
            if depth == 1 and expect_key:
                name = data[i + 1 : end]
                if b"\\" in name:
                    return None
                if name == want:
                    return _plain_value(data, end + 1)
                expect_key = False
            i = end + 1
        elif c in _OPEN:
            depth += 1
            expect_key = depth == 1 and c == ord("{")
            i += 1
        elif c in _CLOSE:
            depth -= 1
            if depth <= 0:
                return None
            i += 1
        else:  # "," or ":"
            if depth == 1 and c == ord(","):
                expect_key = True
            i += 1


def _plain_value(data: bytes, i: int) -> str | None:
    """The string after `: ` at `i`, when it is plain (no escapes) UTF-8."""
    rest = data[i : i + 1024].lstrip(_SPACE)  # an id is at most a few hundred bytes
    if rest[:1] != b":":
        return None
    rest = rest[1:].lstrip(_SPACE)
    if rest[:1] != b'"':
        return None
    end = rest.find(b'"', 1)
    if end < 0:
        return None
    value = rest[1:end]
    if b"\\" in value:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None
