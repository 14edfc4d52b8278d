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


def fingerprint(
    *,
    project_id: str,
    expected_revision: int | None,
    operation: str,
    resource_kind: str,
    resource_id: str,
    change: str,
    payload: JsonValue,
) -> str:
    """SHA-256 hex of the canonical fingerprint material (CJ-2); the command id is excluded."""
    return fingerprint_of_payload(
        project_id=project_id,
        expected_revision=expected_revision,
        operation=operation,
        resource_kind=resource_kind,
        resource_id=resource_id,
        change=change,
        payload_bytes=canonical_bytes(payload),
    )


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
    """`fingerprint` from the payload's canonical bytes, which a write has encoded already.

    The material is the canonical JSON object `{change, expected_revision, operation, payload,
    project_id, resource: {id, kind}}` (keys in code point order); it is hashed in pieces
    around `payload_bytes`, which are the bytes `canonical_bytes` gives for the payload inside
    it, so the payload is not encoded a second time.
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


def _check_depth(value: JsonValue) -> None:
    # Iterative, so a hostile document cannot exhaust the Python stack here.
    stack: list[tuple[JsonValue, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node  # type: ignore[assignment]
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"nesting deeper than {MAX_JSON_DEPTH}")
        stack.extend((child, depth + 1) for child in children)


def decode_json(data: bytes | str) -> JsonValue:
    """Decode a request body strictly (CJ-3), raising `invalid_command` on any violation.

    Rejected: invalid UTF-8, NaN and Infinity, duplicate keys, nesting deeper than 64 and
    integers outside the signed 64-bit range. Never raises anything but `AidememoError`.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        value = _DECODER.decode(text)
        _check_depth(value)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise fail(ErrorCode.INVALID_COMMAND, f"malformed JSON: {exc}") from None
    return value


def decode_stored(data: bytes) -> JsonValue:
    """Decode canonical bytes this service wrote itself (no hostile-input checks needed)."""
    return json.loads(data)
