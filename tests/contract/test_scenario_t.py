"""Anchor 3.3 Scenario T, the server-side steps, over HTTP on every backend.

A = codex-p1, B = codex-p2, Hermes = hermes, outsider = reader_actor.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.contract.support import EPOCH, HERMES, READER, RECEIVER, WRITER, Api, P

SOURCE = "project:phase1-t"
SESSION = "session_phase1_t"


def _send(handoff_id: str, to_actor: str) -> dict[str, Any]:
    return {
        "command_id": f"cmd_send_{handoff_id}",
        "payload": {
            "handoff_id": handoff_id,
            "session_id": SESSION,
            "to_actor": to_actor,
            "focus": "phase1 gate",
        },
    }


def _outbox_count(api: Api, actor: str, box: str, handoff_id: str) -> int:
    page = api.get(
        f"{P}/handoffs", actor, query=f"box={box}&include_completed=true&limit=100"
    ).expect(200)
    return sum(1 for a in page["assignments"] if a["record"]["handoff_id"] == handoff_id)


def test_cmd3_scenario_t_server_steps(api: Api) -> None:
    # 1. A's session
    api.session(SESSION, source_id=SOURCE, as_=WRITER)
    # 2-3. the send commits, but its response is lost: the server state shows it
    lost = api.post(f"{P}/handoffs", _send("H1", RECEIVER), WRITER).expect(200)
    r1 = api.status_of("H1", WRITER)
    head_before = api.head()
    # 5-6. the outbox publishes the same command again: one mutation, the same receipt
    api.clock.advance(30_000)
    assert api.post(f"{P}/handoffs", _send("H1", RECEIVER), WRITER).expect(200) == lost
    assert api.status_of("H1", WRITER) == r1
    assert api.head() == head_before
    # 7. A's outbox holds H1 exactly once
    assert _outbox_count(api, WRITER, "outbox", "H1") == 1
    changes = api.get(f"{P}/changes", WRITER, query={"project_epoch": EPOCH, "after_seq": 0})
    h1 = [e for e in changes.expect(200)["entries"] if e["resource"]["id"] == "H1"]
    assert len(h1) == 1
    # 9-10. B accepts, adds evidence and returns
    accept = api.transition("H1", "accept", {"claim_id": "claim_b"}, r1["revision"])
    assert accept.expect(200)["actor_id"] == RECEIVER
    api.fact("F_B", SESSION, "codex-b finished H1", as_=RECEIVER)
    done = api.transition(
        "H1",
        "return",
        {"claim_id": "claim_b", "result_fact_id": "F_B", "outcome": "succeeded"},
        r1["revision"] + 1,
    ).expect(200)
    assert done["revision"] == r1["revision"] + 2
    assert api.status_of("H1", RECEIVER)["record"]["outcome"] == "succeeded"
    # 12-16. B hands off to Hermes; once in B's outbox and once in Hermes's inbox
    api.post(f"{P}/handoffs", _send("H2", HERMES), RECEIVER).expect(200)
    assert _outbox_count(api, RECEIVER, "outbox", "H2") == 1
    assert _outbox_count(api, HERMES, "inbox", "H2") == 1
    # 17. non-participants are refused
    api.get(f"{P}/handoffs/H2", WRITER).expect(403, "handoff_actor_mismatch")
    api.get(f"{P}/handoffs/H2", READER).expect(403, "handoff_actor_mismatch")
    # 18. Hermes accepts
    api.transition("H2", "accept", {"claim_id": "claim_h"}, 1, as_=HERMES).expect(200)
    status = api.status_of("H2", HERMES)
    assert status["revision"] > 1
    assert status["record"]["claim_id"] == "claim_h"
    # 19. a heartbeat with a stale revision
    api.transition(
        "H2", "heartbeat", {"claim_id": "claim_h"}, status["revision"] - 1, as_=HERMES
    ).expect(409, "stale_revision")
    # 20. evidence and return
    api.fact("F_H", SESSION, "phase1evidence Hermes completed the gate", as_=HERMES)
    final = api.transition(
        "H2",
        "return",
        {"claim_id": "claim_h", "result_fact_id": "F_H", "outcome": "succeeded"},
        status["revision"],
        as_=HERMES,
    ).expect(200)
    final_seq = final["project_seq"]
    assert final_seq == api.head()
    # 21. search pinned at the final sequence finds the Hermes fact
    found = api.get(
        f"{P}/search",
        HERMES,
        query={"q": "phase1evidence", "mode": "lexical", "at_least_seq": final_seq},
    ).expect(200)
    assert found["index_seq"] >= final_seq
    assert "F_H" in [r["fact_id"] for r in found["results"]]
    # 22. the fact's identity was derived server-side
    body = api.get(f"{P}/resources/fact/F_H", HERMES).expect(200)["state"]["body"]
    assert (body["session_id"], body["source_id"], body["actor_id"]) == (SESSION, SOURCE, HERMES)
    # 23. H2 is completed with its evidence
    record = api.status_of("H2", HERMES)["record"]
    assert (record["status"], record["result_fact_id"]) == ("completed", "F_H")
    # 24. B's snapshot has no duplicate coordinates; H1 and H2 exactly once
    snapshot = api.get(f"{P}/snapshot", RECEIVER).expect(200)
    assert snapshot["at_seq"] == final_seq
    coords = Counter((r["resource"]["kind"], r["resource"]["id"]) for r in snapshot["resources"])
    assert all(n == 1 for n in coords.values())
    assert coords[("handoff", "H1")] == 1
    assert coords[("handoff", "H2")] == 1


def test_cmd3_scenario_t_lost_create_response_retried_under_changed_state(api: Api) -> None:
    """A fact create whose response was lost is replayed even after its session moved on."""
    api.session(SESSION, source_id=SOURCE)
    first = api.fact("F_lost", SESSION, "lost response")
    api.fact("F_next", SESSION, "later work")
    body: dict[str, Any] = {
        "command_id": "cmd_F_lost",
        "payload": {"fact_id": "F_lost", "session_id": SESSION, "content": "lost response"},
    }
    assert api.post(f"{P}/facts", body).expect(200) == first
    changed = {**body, "payload": {**body["payload"], "content": "other"}}
    api.post(f"{P}/facts", changed).expect(409, "command_conflict")
