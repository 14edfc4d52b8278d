"""Anchor 3.5 lease rows and 2.8's state table over HTTP, with the injected clock (HO-*)."""

from __future__ import annotations

from typing import Any

from tests.contract.support import HERMES, LEASE_MS, READER, RECEIVER, WRITER, Api, P

SESSION = "session_lease"


def _pending(api: Api, handoff_id: str = "handoff_lease") -> str:
    api.session(SESSION, source_id="project:lease")
    api.send(handoff_id, SESSION, RECEIVER).expect(200)
    return handoff_id


def _claim(api: Api, handoff_id: str, claim: str, revision: int, as_: str = RECEIVER) -> Any:
    return api.transition(handoff_id, "accept", {"claim_id": claim}, revision, as_=as_)


def _beat(api: Api, handoff_id: str, claim: str, revision: int, as_: str = RECEIVER) -> Any:
    return api.transition(handoff_id, "heartbeat", {"claim_id": claim}, revision, as_=as_)


def _ret(
    api: Api, handoff_id: str, claim: str, fact: str, revision: int, outcome: str = "succeeded"
) -> Any:
    payload = {"claim_id": claim, "result_fact_id": fact, "outcome": outcome}
    return api.transition(handoff_id, "return", payload, revision)


def test_ho2_ho6_accept_assigns_lease_and_heartbeat_renews_only_active_claim(api: Api) -> None:
    h = _pending(api)
    accepted = _claim(api, h, "lease-claim-one", 1).expect(200)
    record = api.status_of(h)["record"]
    assert record["claim_expires_at_ms"] > record["claim_heartbeat_at_ms"]
    assert record["claim_heartbeat_at_ms"] == accepted["committed_at_ms"] == api.clock.value
    assert record["claim_expires_at_ms"] == api.clock.value + LEASE_MS
    assert record["attempt_count"] == 1
    api.clock.advance(1_000)
    beat = _beat(api, h, "lease-claim-one", 2).expect(200)
    assert beat["revision"] == 3  # a heartbeat writes a new revision
    renewed = api.status_of(h)["record"]
    assert renewed["claim_heartbeat_at_ms"] == api.clock.value
    assert renewed["claim_expires_at_ms"] == api.clock.value + LEASE_MS
    assert renewed["attempt_count"] == 1
    _beat(api, h, "lease-claim-other", 3).expect(409, "handoff_conflict")
    _beat(api, h, "lease-claim-one", 3, as_=WRITER).expect(403, "handoff_actor_mismatch")
    _beat(api, h, "lease-claim-one", 3, as_=READER).expect(403, "project_unauthorized")


def test_ho6_heartbeat_keeps_an_old_lease_alive_past_its_first_expiry(api: Api) -> None:
    h = _pending(api)
    _claim(api, h, "claim-a", 1).expect(200)
    api.clock.advance(LEASE_MS - 1)
    _beat(api, h, "claim-a", 2).expect(200)
    api.clock.advance(LEASE_MS - 1)
    _claim(api, h, "claim-b", 3).expect(409, "handoff_conflict")  # still live
    api.fact("fact_lease", SESSION, "done", as_=RECEIVER)
    _ret(api, h, "claim-a", "fact_lease", 3).expect(200)


def test_ho6_heartbeat_on_pending_or_expired_lease_is_conflict(api: Api) -> None:
    h = _pending(api)
    _beat(api, h, "claim-a", 1).expect(409, "handoff_conflict")
    _claim(api, h, "claim-a", 1).expect(200)
    api.clock.advance(LEASE_MS)  # live while now < expires: exactly at expiry it is over
    _beat(api, h, "claim-a", 2).expect(409, "handoff_conflict")
    # the same claim cannot be revived by accepting it again
    _claim(api, h, "claim-a", 2).expect(409, "handoff_conflict")


def test_ho3_expired_claim_replaced_and_old_fenced(api: Api) -> None:
    h = _pending(api)
    _claim(api, h, "claim-old", 1).expect(200)
    api.clock.advance(LEASE_MS - 1)
    _claim(api, h, "claim-new", 2).expect(409, "handoff_conflict")  # live other claim
    api.clock.advance(1)
    replaced = _claim(api, h, "claim-new", 2).expect(200)
    assert replaced["revision"] == 3
    record = api.status_of(h)["record"]
    assert (record["claim_id"], record["attempt_count"], record["status"]) == (
        "claim-new",
        2,
        "accepted",
    )
    assert record["claim_expires_at_ms"] == api.clock.value + LEASE_MS
    api.fact("fact_old", SESSION, "late result", as_=RECEIVER)
    _beat(api, h, "claim-old", 3).expect(409, "handoff_conflict")
    _ret(api, h, "claim-old", "fact_old", 3).expect(409, "handoff_conflict")
    done = _ret(api, h, "claim-new", "fact_old", 3).expect(200)
    assert done["revision"] == 4
    assert api.status_of(h)["record"]["status"] == "completed"


def test_ho4_ho6_return_after_lease_expiry_is_conflict(api: Api) -> None:
    h = _pending(api)
    _claim(api, h, "claim-a", 1).expect(200)
    api.fact("fact_a", SESSION, "result", as_=RECEIVER)
    api.clock.advance(LEASE_MS)
    _ret(api, h, "claim-a", "fact_a", 2).expect(409, "handoff_conflict")
    assert api.status_of(h)["record"]["status"] == "accepted"


def test_ho3_ho4_failed_return_keeps_handoff_accepted_for_new_claim(api: Api) -> None:
    h = _pending(api)
    _claim(api, h, "claim-1", 1).expect(200)
    api.fact("fact_fail", SESSION, "attempt failed", as_=RECEIVER)
    _ret(api, h, "claim-1", "fact_fail", 2, "failed").expect(200)
    record = api.status_of(h)["record"]
    assert record["status"] == "accepted"
    assert record["outcome"] == "failed"
    assert record["result_fact_id"] == "fact_fail"
    assert record["claim_expires_at_ms"] is None
    # the failed claim is spent: no heartbeat, no second return, no re-accept
    _beat(api, h, "claim-1", 3).expect(409, "handoff_conflict")
    _ret(api, h, "claim-1", "fact_fail", 3).expect(409, "handoff_conflict")
    _claim(api, h, "claim-1", 3).expect(409, "handoff_conflict")
    # it stays in the inbox (not completed)
    inbox = api.get(f"{P}/handoffs", RECEIVER, query="box=inbox").expect(200)
    assert [a["record"]["handoff_id"] for a in inbox["assignments"]] == [h]
    # a new claim, at once, without waiting for any lease
    _claim(api, h, "claim-2", 3).expect(200)
    retry = api.status_of(h)["record"]
    assert (retry["claim_id"], retry["attempt_count"], retry["outcome"]) == ("claim-2", 2, None)
    assert retry["result_fact_id"] is None
    api.fact("fact_ok", SESSION, "attempt succeeded", as_=RECEIVER)
    _ret(api, h, "claim-2", "fact_ok", 4).expect(200)
    final = api.status_of(h)["record"]
    assert (final["status"], final["outcome"], final["result_fact_id"]) == (
        "completed",
        "succeeded",
        "fact_ok",
    )


def test_ho3_ho5_completed_handoff_refuses_accept_and_heartbeat(api: Api) -> None:
    h = _pending(api)
    _claim(api, h, "claim-a", 1).expect(200)
    api.fact("fact_a", SESSION, "result", as_=RECEIVER)
    _ret(api, h, "claim-a", "fact_a", 2).expect(200)
    _claim(api, h, "claim-b", 3).expect(409, "handoff_conflict")
    _beat(api, h, "claim-a", 3).expect(409, "handoff_conflict")
    # the same return again with a new command id is idempotent at the domain level
    assert _ret(api, h, "claim-a", "fact_a", 3).status == 200
    api.fact("fact_b", SESSION, "other", as_=RECEIVER)
    _ret(api, h, "claim-a", "fact_b", 4).expect(409, "handoff_conflict")


def test_ho2_same_claim_accept_while_live_is_a_no_op_revision(api: Api) -> None:
    h = _pending(api)
    _claim(api, h, "claim-a", 1).expect(200)
    before = api.status_of(h)["record"]
    api.clock.advance(10)
    again = _claim(api, h, "claim-a", 2).expect(200)
    assert again["revision"] == 3
    status = api.status_of(h)
    assert status["revision"] == 3
    assert status["record"] == before  # same claim, same lease: nothing but the revision moved


def test_ho7_transition_fault_order(api: Api) -> None:
    h = _pending(api)
    receipt = api.transition(h, "accept", {"claim_id": "k1"}, 1, command_id="cmd_k1").expect(200)
    # 1. receipt replay beats everything (even a state that would now conflict)
    again = api.transition(h, "accept", {"claim_id": "k1"}, 1, command_id="cmd_k1")
    assert again.expect(200) == receipt
    # 1'. command_conflict beats not-found, actor mismatch and stale revision
    api.transition("handoff_none", "accept", {"claim_id": "k1"}, 1, command_id="cmd_k1").expect(
        409, "command_conflict"
    )
    api.transition(
        h, "accept", {"claim_id": "k1"}, 9, as_=WRITER, command_id=f"cmd_send_{h}"
    ).expect(409, "command_conflict")
    # 2. resource_not_found beats actor mismatch (missing handoff, or missing evidence fact)
    api.transition("handoff_none", "accept", {"claim_id": "k"}, 1, as_=WRITER).expect(
        404, "resource_not_found"
    )
    bad_return = {"claim_id": "k1", "result_fact_id": "fact_none", "outcome": "succeeded"}
    api.transition(h, "return", bad_return, 9, as_=WRITER).expect(404, "resource_not_found")
    # 3. handoff_actor_mismatch beats stale_revision and handoff_conflict
    api.transition(h, "heartbeat", {"claim_id": "zz"}, 9, as_=HERMES).expect(
        403, "handoff_actor_mismatch"
    )
    # 4. stale_revision beats handoff_conflict
    api.transition(h, "heartbeat", {"claim_id": "zz"}, 1).expect(409, "stale_revision")
    # 5. handoff_conflict
    api.transition(h, "heartbeat", {"claim_id": "zz"}, 2).expect(409, "handoff_conflict")


def test_typ1_expected_revision_is_required_and_positive(api: Api) -> None:
    h = _pending(api)
    for revision in (None, 0, -1, "1", 1.5, True):
        api.transition(h, "accept", {"claim_id": "k"}, revision).expect(400, "invalid_command")
    body = {"command_id": "c_missing", "payload": {"claim_id": "k"}}
    api.post(f"{P}/handoffs/{h}/accept", body, RECEIVER).expect(400, "invalid_command")
    bad_outcome = {"claim_id": "k", "result_fact_id": "f", "outcome": "done"}
    api.transition(h, "return", bad_outcome, 1).expect(400, "invalid_command")
    api.transition(h, "accept", {"claim_id": "k", "extra": 1}, 1).expect(400, "invalid_command")
    api.transition(h, "accept", {}, 1).expect(400, "invalid_command")
    api.transition(h, "accept", {"claim_id": "bad claim"}, 1).expect(400, "invalid_identifier")
    assert api.status_of(h)["revision"] == 1


def test_ho7_two_accepts_with_one_expected_revision_one_wins_other_stale(api: Api) -> None:
    h = _pending(api)
    _claim(api, h, "claim-a", 1).expect(200)
    _claim(api, h, "claim-b", 1).expect(409, "stale_revision")
    assert api.status_of(h)["record"]["claim_id"] == "claim-a"
