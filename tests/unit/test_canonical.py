"""Canonical JSON, the fingerprint and the strict decoder (CJ-1..3), with SPEC.md's vectors."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aidememo.domain.canonical import (
    canonical_bytes,
    canonical_text,
    decode_json,
    fingerprint_of_payload,
)
from aidememo.domain.errors import AidememoError, ErrorCode


def test_cj1_vectors() -> None:
    assert canonical_text({"z": 2, "a": {"d": 4, "b": 3}}) == '{"a":{"b":3,"d":4},"z":2}'
    text = canonical_text({"b": "서버", "a": [1, 2.5, None, True], "é": "x"})
    assert text == '{"a":[1,2.5,null,true],"b":"서버","é":"x"}'
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert digest == "46b0239d0916e9c4c9982af34d2b9c8fd4a5c3114a7b24d21667d6237995c349"


def test_cj2_fingerprint_vectors_exclude_command_id() -> None:
    assert (
        fingerprint_of_payload(
            project_id="project_http",
            expected_revision=None,
            operation="resource.put",
            resource_kind="custom.note",
            resource_id="note_http",
            change="upsert",
            payload_bytes=canonical_bytes({"z": 2, "a": {"d": 4, "b": 3}}),
        )
        == "9413b2a5c2fb757a08ae01ef397c94a533a2fa8c4b63884006bd4e0a0f29e43f"
    )
    assert (
        fingerprint_of_payload(
            project_id="project_fixture",
            expected_revision=2,
            operation="fact.delete",
            resource_kind="custom.fact",
            resource_id="fact_fixture",
            change="delete",
            payload_bytes=canonical_bytes(None),
        )
        == "cac6483edbccfc72cedc5e6f2529966558880516aedcd3730eddc3b726d1b44e"
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_cj1_canonical_bytes_round_trip_and_are_stable(value: object) -> None:
    encoded = canonical_bytes(value)
    assert decode_json(encoded) == value
    assert canonical_bytes(decode_json(encoded)) == encoded


@given(
    st.text(),
    st.none() | st.integers(1, 2**63 - 1),
    st.text(),
    st.text(),
    st.text(),
    st.sampled_from(["upsert", "delete"]),
    json_values,
)
def test_cj2_fingerprint_of_payload_bytes_is_the_fingerprint(
    project_id: str,
    expected: int | None,
    operation: str,
    kind: str,
    rid: str,
    change: str,
    payload: object,
) -> None:
    """Hashing the material in pieces around the payload's canonical bytes gives the SHA-256
    of the canonical material object (CJ-2), whatever the strings hold."""
    material = {
        "change": change,
        "expected_revision": expected,
        "operation": operation,
        "payload": payload,
        "project_id": project_id,
        "resource": {"id": rid, "kind": kind},
    }
    digest = hashlib.sha256(canonical_bytes(material)).hexdigest()
    pieces = fingerprint_of_payload(
        project_id=project_id,
        expected_revision=expected,
        operation=operation,
        resource_kind=kind,
        resource_id=rid,
        change=change,
        payload_bytes=canonical_bytes(payload),
    )
    assert pieces == digest


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b'{"a":NaN}',
        b'{"a":Infinity}',
        b'{"a":-Infinity}',
        b'{"a":1e400}',
        b'{"a":1,"a":2}',
        b'{"a":9223372036854775808}',
        b'{"a":-9223372036854775809}',
        b"[" * 65 + b"]" * 65,
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":"\xff"}',
        b'{"a":' + b"9" * 5000 + b"}",
        b"",
    ],
)
def test_cj3_decoder_rejects_with_invalid_command(body: bytes) -> None:
    with pytest.raises(AidememoError) as err:
        decode_json(body)
    assert err.value.code is ErrorCode.INVALID_COMMAND


def test_cj3_decoder_accepts_depth_64_and_int64_bounds() -> None:
    assert decode_json(b"[" * 64 + b"]" * 64) is not None
    assert decode_json(b"[9223372036854775807,-9223372036854775808]") == [2**63 - 1, -(2**63)]
