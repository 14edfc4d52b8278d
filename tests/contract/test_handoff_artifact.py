"""A handoff return naming its result artifact (HO-9, VIS-2) over every contract backend."""

from __future__ import annotations

from typing import Any

from aidememo.domain import command_ids
from tests.contract.support import HERMES, PROJECT, RECEIVER, WRITER, Api
from tests.contract.test_artifacts import put
from tests.contract.test_mcp import ok


def _claimed(api: Api) -> None:
    api.session("s1")
    api.send("h1", "s1", RECEIVER).expect(200)
    api.transition("h1", "accept", {"claim_id": "claim_1"}, 1).expect(200)
    api.fact("fact_result", "s1", "the result", as_=RECEIVER)


def _ret(api: Api, artifact: str | None, tag: str, revision: int = 2, **kw: Any) -> Any:
    payload: dict[str, Any] = {
        "claim_id": "claim_1",
        "result_fact_id": "fact_result",
        "outcome": "succeeded",
    }
    if artifact is not None:
        payload["result_artifact_id"] = artifact
    return api.transition("h1", "return", payload, revision, command_id=f"cmd_ret_{tag}", **kw)


def test_ho9_return_names_a_published_artifact(api: Api) -> None:
    _claimed(api)
    ref = put(api, "res", b"result bytes", path="handoffs/h1/result.json", as_=RECEIVER)
    status = api.status_of("h1")
    assert status["record"]["status"] == "accepted"  # a published file completes nothing
    assert "result_artifact_id" not in status["record"]
    receipt = _ret(api, ref["artifact_id"], "ok").expect(200)
    record = api.status_of("h1")["record"]
    assert (record["status"], record["result_artifact_id"]) == ("completed", ref["artifact_id"])
    replay = _ret(api, ref["artifact_id"], "ok")
    assert replay.expect(200) == receipt and replay.headers.get("aidememo-replayed") == "true"
    # the artifact is part of the command: the same id with another payload is a conflict
    _ret(api, None, "ok").expect(409, "command_conflict")
    # the same claim and fact with other evidence, under a new command id
    _ret(api, None, "other", revision=3).expect(409, "handoff_conflict")
    _ret(api, ref["artifact_id"], "same", revision=3).expect(200)  # HO-5: the identical return


def test_ho9_vis2_unknown_or_invisible_artifact_is_refused(api: Api) -> None:
    _claimed(api)
    api.send("h2", "s1", HERMES).expect(200)
    missing = "art_" + "0" * 32
    _ret(api, missing, "missing").expect(404, "artifact_not_found")
    _ret(api, "not an id", "bad").expect(400, "invalid_identifier")
    # a file of another handoff the receiver takes no part in stays invisible to it
    other = put(api, "oth", b"theirs", path="handoffs/h2/request.json", as_=WRITER)
    _ret(api, other["artifact_id"], "other").expect(404, "artifact_not_found")
    assert api.status_of("h1")["record"]["status"] == "accepted"
    plain = put(api, "plain", b"plain", path="sessions/s1/artifacts/out.txt")
    _ret(api, plain["artifact_id"], "plain").expect(200)
    assert api.status_of("h1")["record"]["result_artifact_id"] == plain["artifact_id"]


def test_ho9_a_new_claim_clears_the_artifact(api: Api) -> None:
    _claimed(api)
    ref = put(api, "res", b"r", path="handoffs/h1/result.json", as_=RECEIVER)
    payload = {
        "claim_id": "claim_1",
        "result_fact_id": "fact_result",
        "outcome": "failed",
        "result_artifact_id": ref["artifact_id"],
    }
    api.transition("h1", "return", payload, 2).expect(200)
    assert api.status_of("h1")["record"]["result_artifact_id"] == ref["artifact_id"]
    api.transition("h1", "accept", {"claim_id": "claim_2"}, 3).expect(200)
    assert "result_artifact_id" not in api.status_of("h1")["record"]


def test_ho9_mcp_handoff_return_carries_the_artifact(api: Api) -> None:
    _claimed(api)
    ref = put(api, "res", b"r", path="handoffs/h1/result.json", as_=RECEIVER)
    args = {
        "handoff_id": "h1",
        "expected_revision": 2,
        "claim_id": "claim_1",
        "result_fact_id": "fact_result",
        "outcome": "succeeded",
        "result_artifact_id": ref["artifact_id"],
    }
    first = ok(api, "handoff_return", args, as_=RECEIVER)
    assert first["command_id"] == command_ids.return_command_id(
        PROJECT, RECEIVER, "h1", "claim_1", "fact_result", "succeeded", ref["artifact_id"]
    )
    assert ok(api, "handoff_return", args, as_=RECEIVER) == first
    assert api.status_of("h1")["record"]["result_artifact_id"] == ref["artifact_id"]
