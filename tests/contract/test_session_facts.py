"""A session's facts in commit order (READS-4), on every backend."""

from __future__ import annotations

from tests.contract.support import OUTSIDER, READER, RECEIVER, WRITER, Api, P

SESSION = "s_facts"


def _facts(api: Api, session_id: str, query: str = "", as_: str = READER) -> dict[str, object]:
    page: dict[str, object] = api.get(f"{P}/sessions/{session_id}/facts", as_, query=query).expect(
        200
    )
    return page


def test_reads4_facts_in_commit_order_paged_by_after_seq(api: Api) -> None:
    api.session(SESSION)
    api.session("s_other")
    made: list[str] = []
    for i in range(25):
        fact_id = f"f{24 - i:02d}"  # ids against commit order: the order is the commit's
        api.fact(fact_id, SESSION, f"fact {i}", as_=WRITER if i % 2 else RECEIVER)
        api.fact(f"g{i:02d}", "s_other", "another session's")
        made.append(fact_id)
    default = _facts(api, SESSION)
    assert len(default["facts"]) == 20 and default["next_after_seq"] is not None  # type: ignore[arg-type]
    seen: list[str] = []
    after: int | None = None
    while True:
        page = _facts(api, SESSION, "limit=7" + ("" if after is None else f"&after_seq={after}"))
        entries = page["facts"]
        assert isinstance(entries, list)
        seqs = [e["project_seq"] for e in entries]
        assert seqs == sorted(seqs) and all(e["revision"] == 1 for e in entries)
        if after is not None:
            assert all(s > after for s in seqs)
        seen += [e["record"]["fact_id"] for e in entries]
        after = page["next_after_seq"]  # type: ignore[assignment]
        if after is None:
            break
        assert after == seqs[-1]
    assert seen == made
    first = _facts(api, SESSION, "limit=1")
    assert first["facts"] == [
        {
            "project_seq": 3,
            "revision": 1,
            "record": {
                "fact_id": "f24",
                "session_id": SESSION,
                "source_id": "project:aidememo",
                "actor_id": RECEIVER,
                "content": "fact 0",
            },
        }
    ]
    assert first["next_after_seq"] == 3
    last = _facts(api, SESSION, "limit=100&after_seq=1000")
    assert last == {"facts": [], "next_after_seq": None}


def test_reads4_a_session_without_facts_and_an_unknown_session(api: Api) -> None:
    api.session(SESSION)
    assert _facts(api, SESSION, as_=WRITER) == {"facts": [], "next_after_seq": None}
    reply = api.get(f"{P}/sessions/s_missing/facts", READER)
    reply.expect(404, "resource_not_found")
    api.get(f"{P}/sessions/bad%20id/facts", READER).expect(400, "invalid_identifier")


def test_reads4_http3_query_is_strict_and_members_only(api: Api) -> None:
    api.session(SESSION)
    path = f"{P}/sessions/{SESSION}/facts"
    for bad in ("limit=0", "limit=101", "after_seq=-1", "limit=x", "before_seq=1",
                "limit=1&limit=2", "actor_id=x"):  # fmt: skip
        api.get(path, WRITER, query=bad).expect(400, "invalid_command")
    api.get(path, OUTSIDER).expect(403, "project_unauthorized")
    api.get(path, None).expect(401, "authentication_failed")
    api.call("POST", path, as_=WRITER, json={}).expect(405, "method_not_allowed")
