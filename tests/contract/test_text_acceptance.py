"""Text every store keeps byte for byte (ID-5): U+0000, the other controls, U+2028, the
noncharacters and the last code point, in every text field and in `custom.*` bodies (keys
and values), accepted and read back alike on every backend."""

from __future__ import annotations

from typing import Any

import pytest

from tests.contract.support import EPOCH, PROJECT, RECEIVER, WRITER, Api, P

# Every class of code point JSON can carry that a store might trip on (surrogates are CJ-4's).
SAMPLES = {
    "nul": "a\x00b",
    "only_nul": "\x00",
    "controls": "".join(chr(c) for c in range(1, 32)) + "\x7f",
    "separators": "\u2028\u2029\x85",
    "nonchars": "\ufdd0\ufffe\uffff\U0001fffe",
    "last": "\U0010ffff\U000e0001",
    "bom_inside": "x\ufeffy",
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_id5_text_fields_keep_every_code_point(api: Api, name: str) -> None:
    text = SAMPLES[name]
    api.session("s1")
    api.fact("f1", "s1", text)
    api.fact("f2", "s1", f"plain {name}")
    got = api.get(f"{P}/resources/fact/f1").expect(200)
    assert got["state"]["body"]["content"] == text
    facts = api.get(f"{P}/sessions/s1/facts").expect(200)
    assert [f["record"]["content"] for f in facts["facts"]] == [text, f"plain {name}"]
    send = {
        "command_id": "cmd_send",
        "payload": {
            "handoff_id": "h1",
            "session_id": "s1",
            "to_actor": RECEIVER,
            "focus": text,
            "done_when": text,
        },
    }
    api.post(f"{P}/handoffs", send, WRITER).expect(200)
    record = api.status_of("h1")["record"]
    assert (record["focus"], record["done_when"]) == (text, text)
    context = {
        "command_id": "cmd_ctx",
        "payload": {
            "context_id": "c1",
            "handoff_id": "h1",
            "session_id": "s1",
            "to_actor": RECEIVER,
            "content": text,
        },
    }
    api.post(f"{P}/handoff-contexts", context, WRITER).expect(200)
    api.put_note("n1", {text: text, "list": [text, {"k": text}]}).expect(200)
    note = api.get(f"{P}/resources/custom.note/n1").expect(200)
    assert note["state"]["body"] == {text: text, "list": [text, {"k": text}]}
    changes = api.get(f"{P}/changes/materialized", query=_feed()).expect(200)
    bodies = [e["resource"]["state"].get("body") for e in changes["entries"]]
    assert _find(bodies, "fact_id", "f1")["content"] == text
    assert _find(bodies, "context_id", "c1")["content"] == text
    snapshot = api.get(f"{P}/snapshot").expect(200)["resources"]
    kept = [r["state"].get("body") for r in snapshot]
    assert _find(kept, "fact_id", "f1")["content"] == text


def test_id5_a_topic_refuses_controls_alike_before_anything_is_written(api: Api) -> None:
    head = api.head()
    for topic in ("a\x00b", "\x1f"):
        body = {"command_id": "cmd_s", "payload": {"session_id": "s1", "topic": topic}}
        api.post(f"{P}/sessions", body, WRITER).expect(400, "invalid_command")
    assert api.head() == head


def _feed() -> dict[str, Any]:
    return {"project_epoch": EPOCH, "after_seq": 0, "limit": 100}


def _find(records: list[Any], key: str, value: str) -> dict[str, Any]:
    for record in records:
        if isinstance(record, dict) and record.get(key) == value:
            return record
    raise AssertionError(f"no record with {key}={value!r} in {PROJECT}")
