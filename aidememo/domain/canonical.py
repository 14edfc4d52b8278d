"""Canonical JSON, the command fingerprint and the strict request decoder (SPEC.md CJ-*).

Canonical bytes are UTF-8 JSON with object keys sorted by code point at every depth, no
insignificant whitespace and non-ASCII characters kept as they are. The fingerprint is the
SHA-256 hex digest of the canonical bytes of the command's material without its command id,
so a retried command with a fresh id is still recognised as the same intent by its receipt.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from itertools import accumulate
from json.encoder import encode_basestring
from typing import Any

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import INT64_MAX, INT64_MIN, MAX_JSON_DEPTH

JsonValue = Any
"""A decoded JSON value: dict, list, str, int, float, bool or None."""

_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
)
_encode_str = encode_basestring
"""How `_ENCODER` encodes a string (`ensure_ascii=False`), at any depth."""


def canonical_text(value: JsonValue) -> str:
    """The canonical JSON text of `value` (CJ-1)."""
    return _ENCODER.encode(value)


def canonical_bytes(value: JsonValue) -> bytes:
    """The canonical JSON bytes of `value` (CJ-1): what bodies are stored and hashed as."""
    return _ENCODER.encode(value).encode("utf-8")


def fingerprint_of_payload(
    *,
    project_id: str,
    expected_revision: int | None,
    operation: str,
    resource_kind: str,
    resource_id: str,
    change: str,
    payload_bytes: bytes,
) -> str:
    """SHA-256 hex of the canonical fingerprint material (CJ-2); the command id is excluded.

    The material is the canonical JSON object `{change, expected_revision, operation, payload,
    project_id, resource: {id, kind}}` (keys in code point order); it is hashed in pieces
    around `payload_bytes`, which are the bytes `canonical_bytes` gives for the payload inside
    it, so a write that has encoded its payload already does not encode it a second time.
    """
    enc = _encode_str
    if expected_revision is None:
        expected = "null"
    elif type(expected_revision) is int:
        expected = int.__repr__(expected_revision)
    else:
        expected = _ENCODER.encode(expected_revision)
    head = (
        f'{{"change":{enc(change)},"expected_revision":{expected},'
        f'"operation":{enc(operation)},"payload":'
    )
    tail = (
        f',"project_id":{enc(project_id)},'
        f'"resource":{{"id":{enc(resource_id)},"kind":{enc(resource_kind)}}}}}'
    )
    digest = hashlib.sha256(head.encode("utf-8"))
    digest.update(payload_bytes)
    digest.update(tail.encode("utf-8"))
    return digest.hexdigest()


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def _parse_int(text: str) -> int:
    # JSON has no leading zeros, so more than 19 digits is out of range: decided before
    # int() would meet CPython's own digit limit (int_max_str_digits) and its message.
    if len(text.lstrip("-")) > 19:
        raise ValueError("integer outside the signed 64-bit range")
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError("integer outside the signed 64-bit range")
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number outside the double range")
    return value


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate object key")
    return result


_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_object,
    parse_int=_parse_int,
    parse_float=_parse_float,
    parse_constant=_reject_constant,
)

# -- UTF-8 and lone surrogates ------------------------------------------------------------

# A UTF-16 surrogate as a character (text decoded with "surrogatepass", or handed in as str).
_SURROGATE = re.compile("[\ud800-\udfff]")
# A `\uXXXX` escape of a surrogate that is not half of an escaped pair (high then low): only
# such a document can decode to a string holding a lone surrogate. It is searched for after
# `_ESCAPED_BACKSLASH` became `__` (left to right, as a parser reads escapes), so every `\u`
# left is a real escape and an escaped backslash cannot hide one half of a pair or fake it.
_ESCAPED_BACKSLASH = b"\\\\"
_LONE_ESCAPE = re.compile(
    rb"\\u[dD](?:[89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
    rb"|[c-fC-F](?<!\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F]))"
)
_POINTER_SHOWN = 200  # characters of a JSON Pointer an error message quotes


def _decode_utf8(data: bytes, what: str) -> tuple[str, bool]:
    """`data` as text, and whether it encodes a surrogate (ED A0-BF xx, which UTF-8 forbids
    but which is how a lone surrogate arrives raw); any other invalid byte is refused with
    its offset."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("utf-8", "surrogatepass"), True
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data":
            message = f"it ends inside a multi-byte sequence that starts at byte offset {exc.start}"
        else:
            message = f"byte 0x{data[exc.start]:02X} at offset {exc.start} cannot appear there"
        raise fail(ErrorCode.INVALID_COMMAND, f"{what} is not UTF-8: {message}") from None


def decode_utf8(data: bytes, what: str) -> str:
    """`data` as UTF-8 text (CJ-4), or `invalid_command` naming `what` and the offset of the
    first invalid byte; an encoded surrogate is refused as a lone surrogate."""
    text, surrogates = _decode_utf8(data, what)
    if surrogates:
        found = _SURROGATE.search(text)
        assert found is not None
        raise fail(ErrorCode.INVALID_COMMAND, f"{what} holds a lone surrogate {_u(found[0])}")
    return text


def _u(char: str) -> str:
    return f"U+{ord(char):04X}"


def _pointer(path: list[str]) -> str:
    """The JSON Pointer (RFC 6901) of `path`, shortened for a message."""
    text = "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path)
    return text if len(text) <= _POINTER_SHOWN else text[:_POINTER_SHOWN] + "..."


def _surrogate_at(value: JsonValue) -> str | None:
    """Where the first string (key or value, in document order) holding a lone surrogate is,
    as the message names it; None when there is none. Iterative: depth is already bounded,
    but the walk need not rely on it."""
    stack: list[tuple[JsonValue, list[str]]] = [(value, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            found = _SURROGATE.search(node)
            if found is not None:
                where = _pointer(path) if path else "the top level"
                return f"the string at {where} holds a lone surrogate {_u(found[0])}"
        elif isinstance(node, dict):
            for key in node:
                found = _SURROGATE.search(key)
                if found is not None:
                    where = _pointer(path) if path else "the top level"
                    return f"an object key at {where} holds a lone surrogate {_u(found[0])}"
            stack.extend((v, [*path, k]) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((v, [*path, str(i)]) for i, v in reversed(list(enumerate(node))))
    return None


# -- nesting depth ------------------------------------------------------------------------

# Every byte but the quote and the brackets, deleted by `bytes.translate`.
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'"[]{}')
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_STEP = tuple(1 if c == 0x5B else -1 if c == 0x5D else 0 for c in range(256))
_TOO_DEEP_RUN = b"[" * (MAX_JSON_DEPTH + 1)


def _depth_exceeds(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when `data` opens more than `limit` arrays and objects at once (CJ-4).

    A linear scan that neither decodes nor recurses, made of C-speed byte operations: the
    parser's own recursion (in C, or in WebAssembly at the edge) then stays within `limit`.
    Strings are taken out first: escaped backslashes and escaped quotes are dropped (left to
    right, as a parser reads them), then everything but quotes and brackets, then the quoted
    runs. For the part of a document a parser reads before it finds an error, this is exact;
    past that point it may count more, refusing a broken document as too deep instead.
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False  # brackets inside strings only add to the count
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Adjacent quotes are an empty string or the end and start of two strings: dropping them
    # keeps every remaining quote's role, and most strings hold no brackets.
    rest = data.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in rest:
        rest = b"".join(rest.split(b'"')[::2])
    rest = rest.translate(_BRACKETS)
    if rest.count(b"[") <= limit:
        return False
    if _TOO_DEEP_RUN in rest:
        return True
    # Balanced brackets of depth d vanish after d passes of dropping innermost pairs.
    reduced = rest
    for _ in range(limit):
        reduced = reduced.replace(b"[]", b"")
        if not reduced:
            return False
    # Unbalanced or deep: the most brackets open at any point, counted exactly.
    return max(accumulate(map(_STEP.__getitem__, rest))) > limit


# -- the decoder ----------------------------------------------------------------------------


def decode_json(data: bytes | str, what: str = "the body") -> JsonValue:
    """Decode a request body, or another untrusted JSON text, strictly (CJ-3, CJ-4).

    Rejected with `invalid_command`, the message naming `what`: text that is not UTF-8 (with
    the offset of the first bad byte), a byte order mark, nesting deeper than 64 (found by a
    scan before the parser runs, so no document can exhaust a C or WebAssembly stack), a lone
    surrogate in any key or string (named by its JSON Pointer), malformed JSON, NaN and
    Infinity, numbers that overflow a double, integers outside the signed 64-bit range and
    duplicate keys. Never raises anything but `AidememoError`.
    """
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    text, surrogates = _decode_utf8(raw, what)
    if text.startswith("\ufeff"):
        raise fail(
            ErrorCode.INVALID_COMMAND,
            f"{what} starts with a byte order mark (U+FEFF): send UTF-8 JSON without one",
        )
    if _depth_exceeds(raw):
        raise fail(
            ErrorCode.INVALID_COMMAND,
            f"{what} nests arrays and objects deeper than {MAX_JSON_DEPTH}",
        )
    try:
        value = _DECODER.decode(text)
    except ValueError as exc:  # JSONDecodeError, and the hooks' refusals
        raise fail(ErrorCode.INVALID_COMMAND, f"{what} is not valid JSON: {exc}") from None
    except RecursionError:  # not reached: the depth scan came first
        raise fail(ErrorCode.INVALID_COMMAND, f"{what} nests too deep") from None
    if surrogates or _LONE_ESCAPE.search(raw.replace(_ESCAPED_BACKSLASH, b"__")) is not None:
        problem = _surrogate_at(value)
        if problem is not None:
            raise fail(ErrorCode.INVALID_COMMAND, f"{what}: {problem}")
    return value


def decode_stored(data: bytes | str) -> JsonValue:
    """Decode JSON this service wrote itself: canonical bytes of stored records, and the
    edge's own attachments and stage specs. It passed `decode_json` (or was built here) before
    it was written, so no hostile-input checks are needed."""
    return json.loads(data)
