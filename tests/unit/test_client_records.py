"""The client's typed answers (`aidememo.client.records`, SPEC.md CLIENT-3, CLIENT-4): checked
against their annotations, unknown fields ignored, frozen values with pydantic's method names."""

from __future__ import annotations

import json

import pytest

from aidememo.client import plans as p
from aidememo.client.errors import AidememoClientError
from aidememo.client.models import HandoffStatus, Identity, Receipt, Search, Written
from aidememo.client.records import RecordError

IDENTITY = {"tenant_id": "t", "project_id": "p", "project_epoch": "e", "actor_id": "a",
            "role": "writer"}  # fmt: skip
RECEIPT = {"command_id": "c", "fingerprint": "f", "tenant_id": "t", "project_id": "p",
           "actor_id": "a", "project_seq": 3, "resource": {"kind": "fact", "id": "f1"},
           "revision": 1, "committed_at_ms": 5}  # fmt: skip


def test_client3_answers_ignore_unknown_fields_and_are_frozen_values() -> None:
    who = Identity.model_validate({**IDENTITY, "added_later": [1, 2]})
    assert who == Identity.model_validate_json(json.dumps(IDENTITY).encode())
    assert hash(who) == hash(Identity(tenant_id="t", project_id="p", project_epoch="e",
                                      actor_id="a", role="writer"))  # fmt: skip
    assert who.model_dump() == IDENTITY
    with pytest.raises(AttributeError):
        who.actor_id = "b"  # type: ignore[misc]
    assert who.model_copy(update={"actor_id": "b"}).actor_id == "b" and who.actor_id == "a"
    written = Written(receipt=Receipt.model_validate(RECEIPT), recovered=False)
    assert written.id == "f1" and written.model_dump()["receipt"]["resource"]["kind"] == "fact"
    assert repr(who).startswith("Identity(tenant_id='t'")


@pytest.mark.parametrize(
    ("document", "where"),
    [
        ({**IDENTITY, "role": "king"}, "role"),
        ({**IDENTITY, "actor_id": 7}, "actor_id"),
        ({k: v for k, v in IDENTITY.items() if k != "tenant_id"}, "tenant_id"),
    ],
)
def test_client3_a_field_of_the_wrong_type_is_refused(
    document: dict[str, object], where: str
) -> None:
    with pytest.raises(RecordError, match=where):
        Identity.model_validate(document)


def test_client3_nested_lists_optionals_and_numbers_are_checked() -> None:
    search = Search.model_validate({
        "project_epoch": "e", "index_seq": 1, "mode": "lexical", "semantic_model": None,
        "results": [{"fact_id": "f", "session_id": "s", "source_id": "x", "actor_id": "a",
                     "content": "c", "score": 1}],
    })  # fmt: skip
    assert search.results[0].score == 1.0 and isinstance(search.results[0].score, float)
    assert search.semantic_lag is None
    with pytest.raises(RecordError, match=r"results\[0\].score"):
        wrong = {**search.model_dump()["results"][0], "score": True}
        Search.model_validate({**search.model_dump(), "results": [wrong]})
    with pytest.raises(RecordError, match="record"):
        HandoffStatus.model_validate({"revision": 1, "record": []})
    with pytest.raises(RecordError, match=r"revision"):
        HandoffStatus.model_validate({"revision": True, "record": {}})


def test_client4_an_answer_outside_the_contract_is_invalid_response() -> None:
    call = p.get("/identity", Identity)
    with pytest.raises(AidememoClientError) as bad:
        p.parse(call, 200, b'{"tenant_id": 1}')
    assert bad.value.code == "invalid_response" and bad.value.status == 200
    with pytest.raises(AidememoClientError) as not_json:
        p.parse(call, 200, b"<html>")
    assert not_json.value.code == "invalid_response"
    receipt = p.parse(p.Call("POST", "/x", Receipt), 200, json.dumps(RECEIPT).encode(), "true")
    assert receipt.replayed and receipt == Receipt.model_validate(RECEIPT)
