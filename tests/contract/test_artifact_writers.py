"""Who may write an artifact path and a reservation (ART-13, ART-14) on every backend,
the S3-bodied ones included, and through MCP `artifact_write`."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from aidememo.domain.artifacts import artifact_id_of
from tests.contract.conftest import open_api
from tests.contract.support import HERMES, RECEIVER, WRITER, Api, P
from tests.contract.test_artifacts import (
    ALL_BACKENDS,
    DATA,
    download,
    publish,
    put,
    reserve,
    upload,
)
from tests.contract.test_mcp import call

RESULT = "handoffs/h1/result.json"
DAY_MS = 86_400_000


@pytest.fixture(params=sorted(ALL_BACKENDS))
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    yield from open_api(request.param, ALL_BACKENDS[request.param], tmp_path)


def _sent(api: Api) -> None:
    api.session("s1")
    api.send("h1", "s1", RECEIVER).expect(200)


def _error(reply: object) -> tuple[int, str, str]:
    status, body = reply.status, reply.body  # type: ignore[attr-defined]
    return status, body["error"]["code"], body["error"]["message"]


def test_art13_a_non_party_cannot_reserve_a_handoffs_path(api: Api) -> None:
    _sent(api)
    theirs = reserve(api, "c1", path=RESULT, as_=HERMES, ttl_ms=DAY_MS)
    missing = reserve(api, "c2", path="handoffs/h_none/result.json", as_=HERMES)
    # "not yours" and "no such handoff" are one answer: nothing tells a hidden handoff exists
    assert _error(theirs) == _error(missing)
    assert _error(theirs)[:2] == (400, "invalid_artifact_path")
    # both parties may write it
    reserve(api, "s1r", path="handoffs/h1/request.json").expect(200)
    reserve(api, "r1r", path=RESULT, as_=RECEIVER).expect(200)


def test_art13_a_branch_is_its_actors_only(api: Api) -> None:
    other = reserve(api, "b1", path=f"branches/{WRITER}/seg.jsonl", as_=HERMES)
    assert _error(other)[:2] == (400, "invalid_artifact_path")
    reserve(api, "b2", path=f"branches/{HERMES}/seg.jsonl", as_=HERMES).expect(200)


def test_art13_a_reservation_is_written_only_by_its_maker(api: Api) -> None:
    r = reserve(api, "m1").expect(200)
    rid = r["reservation_id"]
    upload(api, rid, as_=HERMES).expect(404, "artifact_not_found")
    publish(api, rid, "m1.h", as_=HERMES).expect(404, "artifact_not_found")
    path = f"{P}/artifact-reservations/{rid}"
    api.call("DELETE", path, as_=HERMES).expect(404, "artifact_not_found")
    upload(api, rid).expect(200)
    publish(api, rid, "m1.h2", as_=HERMES).expect(404, "artifact_not_found")
    assert publish(api, rid, "m1.p").expect(200)["revision"] == 1


def test_art14_the_receivers_reservation_ends_with_its_lease(api: Api) -> None:
    _sent(api)
    api.transition("h1", "accept", {"claim_id": "claim_1"}, 1).expect(200)
    lease_end = api.status_of("h1")["record"]["claim_expires_at_ms"]
    r = reserve(api, "l1", path=RESULT, as_=RECEIVER, ttl_ms=DAY_MS).expect(200)
    assert r["expires_at_ms"] == lease_end
    # the sender has no lease to bound it: its own TTL holds
    s = reserve(api, "l2", path="handoffs/h1/request.json", ttl_ms=DAY_MS).expect(200)
    assert s["expires_at_ms"] == api.clock.now_ms() + DAY_MS


def test_art14_the_receiver_takes_over_the_senders_reservation(api: Api) -> None:
    _sent(api)
    held = reserve(api, "t1", path=RESULT, ttl_ms=DAY_MS).expect(200)
    # the sender cannot take the receiver's path back: its second try is the conflict
    mine = reserve(api, "t2", path=RESULT, as_=RECEIVER).expect(200)
    reserve(api, "t3", path=RESULT).expect(409, "artifact_conflict")
    upload(api, held["reservation_id"]).expect(409, "artifact_conflict")
    upload(api, mine["reservation_id"], as_=RECEIVER).expect(200)
    ref = publish(api, mine["reservation_id"], "t2.p", as_=RECEIVER).expect(200)
    assert ref["sha256"] == hashlib.sha256(DATA).hexdigest()


def test_art13_mcp_artifact_write_follows_the_path_rules(api: Api) -> None:
    _sent(api)
    content = base64.b64encode(b"x").decode()
    answers = []
    for path in (RESULT, "handoffs/h_none/result.json", f"branches/{WRITER}/seg.jsonl"):
        out = call(api, "artifact_write", {"path": path, "content_base64": content}, as_=HERMES)
        assert out["isError"] is True, out
        answers.append(out["structuredContent"]["error"]["code"])
    assert answers == ["invalid_artifact_path"] * 3
    own = call(api, "artifact_write", {"path": RESULT, "content_base64": content}, as_=RECEIVER)
    assert own["isError"] is False, own


def test_vis2_older_revisions_of_a_handoff_artifact_stay_the_parties(api: Api) -> None:
    """The artifact id is the path's hash, so anyone can name it: every revision of a handoff
    path, not only the current one, answers a non-party as missing."""
    _sent(api)
    path = "handoffs/h1/request.json"
    v1 = put(api, "v1", b"first", path=path)
    v2 = put(api, "v2", b"second", path=path, mutation_token=v1["mutation_token"])
    assert (v1["artifact_id"], v2["revision"]) == (artifact_id_of(path), 2)
    for revision in (1, 2):
        ref = {"artifact_id": artifact_id_of(path), "revision": revision}
        download(api, ref, HERMES).expect(404, "artifact_not_found")
        assert download(api, ref, RECEIVER).expect(200) == (b"first", b"second")[revision - 1]
