"""The degraded-operation scenario end to end: real `aidememo` CLI processes (their own
`HOME` and `AIDEMEMO_HOME`), four profiles (codex-a, codex-b and hermes writers, outsider a
reader), one real server per backend behind `FaultProxy` (outage and lost-success
switches): an `aidememo serve` process on SQLite and on PostgreSQL, and the edge runtime
double on a loopback port (SPEC.md SCEN-1).

Two steps are adapted from an embedded-store CLI, which this one is not: the session of step
1 is created through codex-a's profile on the server (`session new`), and step 10's
`session resume` plus an actor override are not needed, because every command acts as its
profile's pinned actor (CLI-3); the test checks the same outcome (the fact's session, source
and actor, the handoff's outcome). Step 25 is the pure handoff state machine, in-process.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.handoff import Event, Evidence, HandoffRecord, Outcome, transition
from tests.offline.support import P, Team, team

SESSION = "session_phase1_t"
SOURCE = "project:phase1-t"
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "edge"]


@pytest.fixture(params=BACKENDS)
def crew(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Team]:
    with team(request.param, tmp_path) as crew:
        yield crew


def _queued(answer: dict[str, object]) -> str:
    assert answer["queued"] is True and answer["dispatched"] is False, answer
    handoff_id = answer["handoff_id"]
    assert isinstance(handoff_id, str) and answer["command_id"]
    return handoff_id


def test_scen1_outbox1_outbox3_replica1_degraded_remote_scenario(
    crew: Team, tmp_path: Path
) -> None:
    replica = str(tmp_path / "B.replica.sqlite")
    # 1. codex-a's session (adapted: created on the server through the profile)
    made = crew.json("codex-a", "session", "new", "phase1 gate", "--id", SESSION,
                     "--source", SOURCE)  # fmt: skip
    assert made["receipt"]["resource"]["id"] == SESSION
    # 2. the send commits, its answer is lost (502): queued, not dispatched
    crew.proxy.lose_next_handoff = True
    h1 = _queued(crew.json("codex-a", "handoff", "send", "--session", SESSION,
                           "--to", "codex-b", "--focus", "phase1 gate"))  # fmt: skip
    assert crew.proxy.lost == 1
    # 3. the server committed it anyway
    r1 = crew.get(f"{P}/handoffs/{h1}", "codex-a")
    # 4. codex-a's local outbox holds it once
    assert crew.json("codex-a", "outbox", "list")["count"] == 1
    # 5. publishing it replays the original command: recovered, counted as published
    published = crew.ok("codex-a", "outbox", "publish").out
    assert "published 1, failed 0, conflicts 0" in published
    assert "recovered" in published
    assert crew.proxy.posts[f"{P}/handoffs"] == 2  # the lost send and its one publish
    # 6. no new mutation
    assert crew.get(f"{P}/handoffs/{h1}", "codex-a") == r1
    # 7. exactly once in codex-a's server outbox, and once in the change log
    assert crew.box("codex-a", "outbox", h1) == 1
    epoch = crew.get(f"{P}/identity", "codex-a")["project_epoch"]
    log = crew.get(f"{P}/changes", "codex-a", project_epoch=epoch, after_seq=0)["entries"]
    assert [e["resource"]["id"] for e in log].count(h1) == 1
    assert crew.json("codex-a", "outbox", "list")["count"] == 0
    # 8. codex-b's replica bootstraps
    pulled = crew.json("codex-b", "replica", "pull", "--path", replica)
    assert pulled["bootstrapped"] is True and pulled["after_seq"] > 0
    # 9. codex-b accepts
    accepted = crew.json("codex-b", "handoff", "accept", h1)
    assert accepted["receipt"]["actor_id"] == "codex-b"
    # 10. evidence and return (adapted: the profile is the actor; no session resume)
    crew.ok("codex-b", "fact", "add", "--session", SESSION, "--id", "F_B", "codex-b finished")
    crew.ok("codex-b", "handoff", "return", h1, "--result-fact", "F_B")
    assert crew.get(f"{P}/handoffs/{h1}", "codex-b")["record"]["outcome"] == "succeeded"
    # 11. offline: the replica answers from the file
    crew.proxy.set_outage(True)
    cached = crew.json("codex-b", "replica", "get", "session", SESSION, "--path", replica)
    assert cached["state"]["body"]["session_id"] == SESSION
    assert cached["cursor"]["after_seq"] == pulled["after_seq"]
    # 12. offline: the send to hermes is queued
    h2 = _queued(crew.json("codex-b", "handoff", "send", "--session", SESSION,
                           "--to", "hermes", "--focus", "finish the gate"))  # fmt: skip
    # 13. the outbox is durable: two processes list the same single item
    first = crew.ok("codex-b", "outbox", "list", "--json").out
    second = crew.ok("codex-b", "outbox", "list", "--json").out
    assert first == second and json.loads(first)["count"] == 1
    # 14. online again: nothing was published implicitly
    crew.proxy.set_outage(False)
    assert crew.box("codex-b", "outbox", h2) == 0
    # 15. the explicit publish
    assert "published 1, failed 0, conflicts 0" in crew.ok("codex-b", "outbox", "publish").out
    # 16. once in codex-b's outbox and once in hermes's inbox
    assert crew.box("codex-b", "outbox", h2) == 1
    assert crew.box("hermes", "inbox", h2) == 1
    # 17. a non-participant writer and the reader are refused
    for outsider in ("codex-a", "outsider"):
        refused = crew.http("GET", f"{P}/handoffs/{h2}", outsider)
        assert refused.status_code == 403, refused.text
    # 18. hermes accepts
    assert crew.json("hermes", "handoff", "accept", h2)["receipt"]["actor_id"] == "hermes"
    status = crew.get(f"{P}/handoffs/{h2}", "hermes")
    assert status["revision"] > 1 and status["record"]["claim_id"]
    # 19. a heartbeat with a stale revision
    stale = crew.http("POST", f"{P}/handoffs/{h2}/heartbeat", "hermes", json={
        "command_id": "cmd_stale_heartbeat", "expected_revision": status["revision"] - 1,
        "payload": {"claim_id": status["record"]["claim_id"]},
    })  # fmt: skip
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_revision"
    # 20. hermes's evidence and return
    crew.ok("hermes", "fact", "add", "--session", SESSION, "--id", "F_H",
            "phase1evidence Hermes completed the gate")  # fmt: skip
    final = crew.json("hermes", "handoff", "return", h2, "--result-fact", "F_H")
    final_seq = final["receipt"]["project_seq"]
    # 21. search at the final sequence finds it
    found = crew.get(f"{P}/search", "hermes", q="phase1evidence", mode="lexical",
                     at_least_seq=final_seq)  # fmt: skip
    assert found["index_seq"] >= final_seq
    assert "F_H" in [r["fact_id"] for r in found["results"]]
    # 22. the fact's identity was derived server-side
    body = crew.get(f"{P}/resources/fact/F_H", "hermes")["state"]["body"]
    assert (body["session_id"], body["source_id"], body["actor_id"]) == (SESSION, SOURCE, "hermes")
    # 23. completed with its evidence
    record = crew.get(f"{P}/handoffs/{h2}", "hermes")["record"]
    assert (record["status"], record["result_fact_id"]) == ("completed", "F_H")
    # 24. codex-b's snapshot: no duplicate coordinates, each handoff once
    snapshot = crew.get(f"{P}/snapshot", "codex-b")
    assert snapshot["at_seq"] == final_seq
    coords = Counter((r["resource"]["kind"], r["resource"]["id"]) for r in snapshot["resources"])
    assert all(n == 1 for n in coords.values())
    assert coords[("handoff", h1)] == 1 and coords[("handoff", h2)] == 1
    # and codex-b's replica catches up to the same state
    again = crew.json("codex-b", "replica", "pull", "--path", replica)
    assert again["bootstrapped"] is False and again["after_seq"] == final_seq


def test_scen1_ho3_stale_claim_cannot_return_after_a_new_claim() -> None:
    """Step 25: an expired claim replaced by a new one can no longer return."""
    record = HandoffRecord("H", "S", "src", "a", "b", None, None, None)
    old = transition(record, Event("accept", "claim_old", now_ms=1000, lease_ms=10))
    new = transition(old, Event("accept", "claim_new", now_ms=1011, lease_ms=10))
    assert new.claim_id == "claim_new" and new.attempt_count == 2
    evidence = Evidence("F", "S", "src", "b")
    with pytest.raises(AidememoError) as refused:
        transition(new, Event("return", "claim_old", 1012, 10, evidence, Outcome.SUCCEEDED))
    assert refused.value.code is ErrorCode.HANDOFF_CONFLICT
    done = transition(new, Event("return", "claim_new", 1012, 10, evidence, Outcome.SUCCEEDED))
    assert done.status == "completed" and done.result_fact_id == "F"
