"""Read routes for agents: the member list (READS-1) and the lease state beside a handoff's
record on status and mailbox reads (READS-2), on every backend."""

from __future__ import annotations

from typing import Any

from aidememo.domain.model import MemberStatus
from tests.contract.support import (
    EPOCH,
    HERMES,
    LEASE_MS,
    OUTSIDER,
    READER,
    RECEIVER,
    WRITER,
    Api,
    P,
)

SESSION = "session_read_routes"


def test_reads1_members_lists_every_member_with_kind_role_and_status(api: Api) -> None:
    api.set_status(HERMES, MemberStatus.SUSPENDED)
    expected = [
        {"actor_id": actor, "kind": "agent", "role": role, "status": status}
        for actor, role, status in sorted(
            [
                (WRITER, "writer", "active"),
                (RECEIVER, "writer", "active"),
                (HERMES, "writer", "suspended"),
                (READER, "reader", "active"),
            ]
        )
    ]
    for actor in (WRITER, READER):  # a reader may read it too
        assert api.get(f"{P}/members", actor).expect(200) == {"members": expected}


def test_reads1_members_is_refused_to_outsiders_suspended_members_and_query_params(
    api: Api,
) -> None:
    api.get(f"{P}/members", OUTSIDER).expect(403, "project_unauthorized")
    api.get(f"{P}/members", None).expect(401, "authentication_failed")
    api.set_status(READER, MemberStatus.SUSPENDED)
    api.get(f"{P}/members", READER).expect(403, "project_unauthorized")
    api.get(f"{P}/members", WRITER, query="limit=1").expect(400, "invalid_command")
    api.get(f"{P}/members", WRITER, query="actor_id=x").expect(400, "invalid_command")


def _lease_states(api: Api, handoff_id: str) -> tuple[Any, Any, Any]:
    """The lease state on status (sender's view) and in the receiver's inbox and the sender's
    outbox; the missing key reads as `absent`."""
    status = api.status_of(handoff_id, as_=WRITER)
    inbox = api.get(f"{P}/handoffs", RECEIVER, query="box=inbox&include_completed=true")
    outbox = api.get(f"{P}/handoffs", WRITER, query="box=outbox")

    def state(page: dict[str, Any]) -> Any:
        (item,) = [a for a in page["assignments"] if a["record"]["handoff_id"] == handoff_id]
        return item.get("lease_state", "absent")

    return status.get("lease_state", "absent"), state(inbox.expect(200)), state(outbox.expect(200))


def test_reads2_ho6_lease_state_is_derived_at_read_time_and_never_stored(api: Api) -> None:
    api.session(SESSION, source_id="project:reads")
    api.send("h_lease", SESSION, RECEIVER).expect(200)
    assert _lease_states(api, "h_lease") == ("absent",) * 3  # pending: unclaimed
    api.transition("h_lease", "accept", {"claim_id": "k1"}, 1).expect(200)
    assert _lease_states(api, "h_lease") == ("live",) * 3
    feed_before = api.get(
        f"{P}/changes/materialized", WRITER, query={"project_epoch": EPOCH, "after_seq": 0}
    ).expect(200)
    api.clock.advance(LEASE_MS - 1)
    assert _lease_states(api, "h_lease") == ("live",) * 3
    api.clock.advance(1)  # live while now < expires: exactly at expiry it is over
    assert _lease_states(api, "h_lease") == ("expired",) * 3
    status = api.status_of("h_lease", as_=RECEIVER)
    assert status["lease_state"] == "expired"
    assert status["record"]["status"] == "accepted"  # the record itself is unchanged
    assert "lease_state" not in status["record"]
    feed_after = api.get(
        f"{P}/changes/materialized", WRITER, query={"project_epoch": EPOCH, "after_seq": 0}
    ).expect(200)
    assert feed_after == feed_before  # nothing was written
    # a new claim is live again; a completed handoff reports no lease
    api.transition("h_lease", "accept", {"claim_id": "k2"}, 2).expect(200)
    assert _lease_states(api, "h_lease") == ("live",) * 3
    api.fact("f_lease", SESSION, "done", as_=RECEIVER)
    done = {"claim_id": "k2", "result_fact_id": "f_lease", "outcome": "succeeded"}
    api.transition("h_lease", "return", done, 3).expect(200)
    assert _lease_states(api, "h_lease") == ("absent",) * 3


def test_reads2_ho4_a_failed_attempt_reports_no_lease(api: Api) -> None:
    api.session(SESSION, source_id="project:reads")
    api.send("h_fail", SESSION, RECEIVER).expect(200)
    api.transition("h_fail", "accept", {"claim_id": "k1"}, 1).expect(200)
    api.fact("f_fail", SESSION, "could not", as_=RECEIVER)
    failed = {"claim_id": "k1", "result_fact_id": "f_fail", "outcome": "failed"}
    api.transition("h_fail", "return", failed, 2).expect(200)
    assert _lease_states(api, "h_fail") == ("absent",) * 3


def test_reads3_sessions_newest_first_paged_by_before_seq(api: Api) -> None:
    made = [f"s{i:02d}" for i in range(25)]
    for i, session_id in enumerate(made):
        api.session(session_id, source_id="project:a" if i % 2 else "project:b")
        api.fact(f"f{i:02d}", session_id, "between sessions")  # sessions are not every seq
    default = api.get(f"{P}/sessions", READER).expect(200)
    assert len(default["sessions"]) == 20  # default limit, any member may read
    seen: list[str] = []
    before: int | None = None
    while True:
        query = "limit=7" + ("" if before is None else f"&before_seq={before}")
        page = api.get(f"{P}/sessions", WRITER, query=query).expect(200)
        seqs = [e["project_seq"] for e in page["sessions"]]
        assert seqs == sorted(seqs, reverse=True)
        assert all(e["revision"] == 1 for e in page["sessions"])
        if before is not None:
            assert all(s < before for s in seqs)
        seen += [e["record"]["session_id"] for e in page["sessions"]]
        before = page["next_before_seq"]
        if before is None:
            break
        assert before == seqs[-1]
    assert seen == list(reversed(made))
    first = api.get(f"{P}/sessions", WRITER, query="limit=100").expect(200)["sessions"][-1]
    assert first["record"] == {
        "session_id": "s00",
        "source_id": "project:b",
        "topic": "topic s00",
        "created_by": WRITER,
    }


def test_reads3_sessions_filter_by_source_fills_every_page(api: Api) -> None:
    for i in range(9):
        api.session(f"s{i}", source_id="project:a" if i in (0, 1, 8) else "project:b")
    page = api.get(f"{P}/sessions", WRITER, query="source_id=project:a&limit=2").expect(200)
    assert [e["record"]["session_id"] for e in page["sessions"]] == ["s8", "s1"]
    assert page["next_before_seq"] == page["sessions"][-1]["project_seq"]
    query = f"source_id=project:a&limit=2&before_seq={page['next_before_seq']}"
    last = api.get(f"{P}/sessions", WRITER, query=query).expect(200)
    assert [e["record"]["session_id"] for e in last["sessions"]] == ["s0"]
    assert last["next_before_seq"] is None
    none = api.get(f"{P}/sessions", WRITER, query="source_id=project:none").expect(200)
    assert none == {"sessions": [], "next_before_seq": None}


def test_reads3_http3_sessions_query_is_strict_and_members_only(api: Api) -> None:
    api.session("s_only")
    for bad in ("limit=0", "limit=101", "before_seq=0", "limit=x", "box=inbox",
                "limit=1&limit=2", "actor_id=x"):  # fmt: skip
        api.get(f"{P}/sessions", WRITER, query=bad).expect(400, "invalid_command")
    api.get(f"{P}/sessions", WRITER, query="source_id=bad%20id").expect(400, "invalid_identifier")
    api.get(f"{P}/sessions", OUTSIDER).expect(403, "project_unauthorized")
    api.get(f"{P}/sessions", None).expect(401, "authentication_failed")
    one = api.get(f"{P}/sessions", WRITER, query="limit=100&before_seq=1").expect(200)
    assert one == {"sessions": [], "next_before_seq": None}
