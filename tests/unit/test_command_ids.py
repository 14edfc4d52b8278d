"""Stable command and claim ids (SPEC.md ID-4): the committed vectors and their properties."""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aidememo.domain import command_ids
from aidememo.domain.canonical import canonical_bytes
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.ids import is_valid_id

VECTORS_PATH = Path(__file__).resolve().parents[1] / "data" / "command_id_vectors.json"
VECTORS: dict[str, Any] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
FUNCTIONS: dict[str, Callable[..., str]] = {
    "create_command_id": command_ids.create_command_id,
    "claim_id": command_ids.claim_id,
    "accept_command_id": command_ids.accept_command_id,
    "heartbeat_command_id": command_ids.heartbeat_command_id,
    "return_command_id": command_ids.return_command_id,
}

ids = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:@",
    min_size=1,
    max_size=128,
)
positive = st.integers(min_value=1, max_value=2**63 - 1)
outcomes = st.sampled_from(command_ids.OUTCOMES)
kinds = st.sampled_from(sorted(command_ids.CREATE_PREFIXES))


def derive(function: str, args: dict[str, Any]) -> str:
    return FUNCTIONS[function](**args)


@pytest.mark.parametrize(
    "vector",
    VECTORS["vectors"],
    ids=[f"{v['function']}-{i}" for i, v in enumerate(VECTORS["vectors"])],
)
def test_id4_vectors_derive_their_ids(vector: dict[str, Any]) -> None:
    assert derive(vector["function"], vector["args"]) == vector["id"]
    assert is_valid_id(vector["id"])


@pytest.mark.parametrize("vector", VECTORS["stable_id"])
def test_id4_stable_id_vectors(vector: dict[str, Any]) -> None:
    assert command_ids.stable_id(vector["prefix"], *vector["parts"]) == vector["id"]


def test_id4_vectors_cover_every_function_and_every_create_kind() -> None:
    assert {v["function"] for v in VECTORS["vectors"]} == set(FUNCTIONS)
    created = {
        v["args"]["kind"] for v in VECTORS["vectors"] if v["function"] == "create_command_id"
    }
    assert created == set(command_ids.CREATE_PREFIXES)


def test_id4_framing_follows_the_rule_text() -> None:
    """Recompute one vector from the SPEC.md wording alone: 8-byte big-endian lengths."""

    def frame(text: str) -> bytes:
        data = text.encode("utf-8")
        return struct.pack(">Q", len(data)) + data

    material = b"".join(frame(p) for p in ("claim", "project_demo", "codex-p2", "handoff_01", "1"))
    expected = "claim_" + hashlib.sha256(material).hexdigest()
    assert command_ids.claim_id("project_demo", "codex-p2", "handoff_01", 1) == expected
    evidence = canonical_bytes({"result_fact_id": "fact_result", "outcome": "failed"})
    assert evidence == b'{"outcome":"failed","result_fact_id":"fact_result"}'
    parts = ("command_return", "project_demo", "codex-p2", "handoff_01", expected)
    material = b"".join(frame(p) for p in parts)
    material += struct.pack(">Q", len(evidence)) + evidence
    assert command_ids.return_command_id(
        "project_demo", "codex-p2", "handoff_01", expected, "fact_result", "failed"
    ) == ("command_return_" + hashlib.sha256(material).hexdigest())


def test_id4_framing_keeps_split_parts_apart() -> None:
    assert command_ids.stable_id("p", "ab", "c") != command_ids.stable_id("p", "a", "bc")
    assert command_ids.stable_id("p") != command_ids.stable_id("p", "")
    # The prefix is hashed too, so two kinds of id with equal parts differ beyond the prefix.
    a = command_ids.stable_id("command_accept", "x").split("_")[-1]
    b = command_ids.stable_id("command_heartbeat", "x").split("_")[-1]
    assert a != b


@given(project=ids, kind=kinds, resource=ids)
def test_id4_create_ids_are_valid_and_deterministic(project: str, kind: str, resource: str) -> None:
    first = command_ids.create_command_id(project, kind, resource)
    assert is_valid_id(first)
    assert first.startswith(command_ids.CREATE_PREFIXES[kind] + "_")
    assert first == command_ids.create_command_id(project, kind, resource)


@given(project=ids, actor=ids, handoff=ids, attempt=positive, revision=positive, fact=ids)
def test_id4_handoff_ids_are_valid_and_deterministic(
    project: str, actor: str, handoff: str, attempt: int, revision: int, fact: str
) -> None:
    claim = command_ids.claim_id(project, actor, handoff, attempt)
    derived = [
        claim,
        command_ids.accept_command_id(project, actor, handoff, claim),
        command_ids.heartbeat_command_id(project, actor, handoff, claim, revision),
        command_ids.return_command_id(project, actor, handoff, claim, fact, "succeeded"),
    ]
    assert all(is_valid_id(i) and 70 <= len(i) <= 82 for i in derived)
    assert claim == command_ids.claim_id(project, actor, handoff, attempt)
    assert derived[3] == command_ids.return_command_id(
        project, actor, handoff, claim, fact, "succeeded"
    )
    assert len(set(derived)) == 4


@given(
    base=st.tuples(ids, ids, ids, positive),
    other=st.tuples(ids, ids, ids, positive),
    index=st.integers(min_value=0, max_value=3),
)
def test_id4_claims_differ_when_any_input_differs(
    base: tuple[str, str, str, int], other: tuple[str, str, str, int], index: int
) -> None:
    changed = list(base)
    changed[index] = other[index]
    if changed[index] == base[index]:
        return
    project, actor, handoff, attempt = base
    assert command_ids.claim_id(project, actor, handoff, attempt) != command_ids.claim_id(
        *changed  # type: ignore[arg-type]
    )


@given(
    base=st.tuples(ids, ids, ids, ids, ids, outcomes),
    other=st.tuples(ids, ids, ids, ids, ids, outcomes),
    index=st.integers(min_value=0, max_value=5),
)
def test_id4_returns_differ_when_any_input_or_evidence_differs(
    base: tuple[str, str, str, str, str, str],
    other: tuple[str, str, str, str, str, str],
    index: int,
) -> None:
    changed = list(base)
    changed[index] = other[index]
    if changed[index] == base[index]:
        return
    assert command_ids.return_command_id(*base) != command_ids.return_command_id(*changed)


@given(
    base=st.tuples(ids, ids, ids, ids, positive),
    other=st.tuples(ids, ids, ids, ids, positive),
    index=st.integers(min_value=0, max_value=4),
)
def test_id4_heartbeats_and_accepts_differ_when_any_input_differs(
    base: tuple[str, str, str, str, int], other: tuple[str, str, str, str, int], index: int
) -> None:
    changed = list(base)
    changed[index] = other[index]
    if changed[index] == base[index]:
        return
    beat = command_ids.heartbeat_command_id
    assert beat(*base) != beat(*changed)  # type: ignore[arg-type]
    if index < 4:
        accept = command_ids.accept_command_id
        assert accept(*base[:4]) != accept(*changed[:4])  # type: ignore[arg-type]


@given(base=st.tuples(ids, kinds, ids), other=st.tuples(ids, kinds, ids), index=st.integers(0, 2))
def test_id4_creates_differ_when_any_input_differs(
    base: tuple[str, str, str], other: tuple[str, str, str], index: int
) -> None:
    changed = list(base)
    changed[index] = other[index]
    if changed[index] == base[index]:
        return
    assert command_ids.create_command_id(*base) != command_ids.create_command_id(*changed)


@given(fact=ids, outcome=outcomes)
def test_id4_cj1_return_evidence_is_independent_of_key_order(fact: str, outcome: str) -> None:
    forward = canonical_bytes({"outcome": outcome, "result_fact_id": fact})
    backward = canonical_bytes({"result_fact_id": fact, "outcome": outcome})
    assert command_ids.return_evidence(fact, outcome) == forward == backward
    claim = "claim_x"
    via_bytes = command_ids.stable_id(command_ids.RETURN, "p", "a", "h", claim, backward)
    assert command_ids.return_command_id("p", "a", "h", claim, fact, outcome) == via_bytes


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda: command_ids.create_command_id("p", "custom.note", "n"), ErrorCode.INVALID_COMMAND),
        (
            lambda: command_ids.create_command_id("p", "fact", "bad id"),
            ErrorCode.INVALID_IDENTIFIER,
        ),
        (lambda: command_ids.create_command_id("", "fact", "f"), ErrorCode.INVALID_IDENTIFIER),
        (lambda: command_ids.claim_id("p", "a", "h", 0), ErrorCode.INVALID_COMMAND),
        (lambda: command_ids.claim_id("p", "a", "h", True), ErrorCode.INVALID_COMMAND),
        (lambda: command_ids.claim_id("p", "a" * 129, "h", 1), ErrorCode.INVALID_IDENTIFIER),
        (lambda: command_ids.accept_command_id("p", "a", "h", "é"), ErrorCode.INVALID_IDENTIFIER),
        (
            lambda: command_ids.heartbeat_command_id("p", "a", "h", "c", -1),
            ErrorCode.INVALID_COMMAND,
        ),
        (
            lambda: command_ids.return_command_id("p", "a", "h", "c", "f", "done"),
            ErrorCode.INVALID_COMMAND,
        ),
        (
            lambda: command_ids.return_command_id("p", "a", "h", "c", "f/1", "failed"),
            ErrorCode.INVALID_IDENTIFIER,
        ),
    ],
)
def test_id4_id1_bad_inputs_are_refused_with_a_code(call: Any, code: ErrorCode) -> None:
    with pytest.raises(AidememoError) as raised:
        call()
    assert raised.value.code is code


def test_ho9_return_command_id_names_the_artifact_only_when_given() -> None:
    plain = command_ids.return_command_id("p", "a", "h", "c", "f", "succeeded")
    assert command_ids.return_command_id("p", "a", "h", "c", "f", "succeeded", None) == plain
    named = command_ids.return_command_id("p", "a", "h", "c", "f", "succeeded", "art_" + "1" * 32)
    assert named != plain
