"""The artifact routes (ART-*, VIS-2) over every contract backend with a body store.

At the edge the bodies stream between the Worker and R2 (the runtime double's bucket). The S3
backends (`tests.contract.s3_backends`: origin SQLite and PostgreSQL with S3 bodies, the edge
with R2 grants, all on SeaweedFS) run the same tests, bodies going up through upload grants
(OBJ-3, GRANT-3, GRANT-5): `upload` takes the grant path there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.contract.conftest import open_api
from tests.contract.s3_backends import S3_BACKENDS
from tests.contract.support import (
    BACKENDS,
    HERMES,
    OUTSIDER,
    READER,
    RECEIVER,
    WRITER,
    Api,
    P,
    Reply,
)

PATH = "sessions/s1/artifacts/report.bin"
DATA = b"\x00artifact body\xff" * 10
OCTET = {"content-type": "application/octet-stream"}
ALL_BACKENDS = {**BACKENDS, **S3_BACKENDS}


@pytest.fixture(params=sorted(ALL_BACKENDS))
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    """The contract fixture on every backend and on the S3-bodied ones."""
    yield from open_api(request.param, ALL_BACKENDS[request.param], tmp_path)


def granted(api: Api) -> bool:
    """Whether bodies go up through upload grants on this backend (OBJ-3)."""
    return api.backend_name in S3_BACKENDS


def reserve(
    api: Api,
    command_id: str,
    data: bytes = DATA,
    *,
    path: str = PATH,
    as_: str = WRITER,
    **extra: Any,
) -> Reply:
    payload = {"path": path, "size_bytes": len(data), "content_type": "text/plain", **extra}
    return api.post(
        f"{P}/artifact-reservations", {"command_id": command_id, "payload": payload}, as_
    )


def upload(api: Api, rid: str, data: bytes = DATA, as_: str = WRITER, **headers: str) -> Reply:
    """The body's upload: the direct route, or on S3 backends an upload grant (its refusals
    are the service's) and its PUT to the store (the store's answer; the length is the one
    of `data`, so another length is the store's 403)."""
    if granted(api):
        g = api.call("POST", f"{P}/artifact-reservations/{rid}/upload-grants", as_=as_)
        if g.status != 200:
            return g
        sent = {k: v for k, v in g.body["headers"].items() if k.lower() != "content-length"}
        answer = httpx.put(g.body["url"], content=data, headers=sent, timeout=30)
        return Reply(answer.status_code, dict(answer.headers), answer.content)
    return api.call(
        "PUT",
        f"{P}/artifact-reservations/{rid}/body",
        as_=as_,
        body=data,
        headers={**OCTET, **headers},
    )


def publish(api: Api, rid: str, command_id: str, as_: str = WRITER) -> Reply:
    return api.post(f"{P}/artifact-reservations/{rid}/publish", {"command_id": command_id}, as_)


def download(api: Api, ref: dict[str, Any], as_: str = WRITER) -> Reply:
    return api.post(
        f"{P}/artifacts/{ref['artifact_id']}/downloads", {"revision": ref["revision"]}, as_
    )


def put(api: Api, tag: str, data: bytes = DATA, as_: str = WRITER, **extra: Any) -> dict[str, Any]:
    r = reserve(api, f"{tag}.r", data, as_=as_, **extra).expect(200)
    upload(api, r["reservation_id"], data, as_=as_).expect(200)
    ref: dict[str, Any] = publish(api, r["reservation_id"], f"{tag}.p", as_=as_).expect(200)
    return ref


def test_art2_art3_art4_art6_reserve_upload_publish_resolve_download(api: Api) -> None:
    r = reserve(api, "c1").expect(200)
    route = "upload-grants" if granted(api) else "body"
    assert r["transfer"]["path"].endswith(f"/{r['reservation_id']}/{route}")
    again = reserve(api, "c1")
    assert again.expect(200) == r and again.headers.get("aidememo-replayed") == "true"
    sha = hashlib.sha256(DATA).hexdigest()
    up = upload(api, r["reservation_id"]).expect(200)
    if granted(api):  # a replayed grant PUT is the store's 412 and keeps the body (GRANT-3)
        upload(api, r["reservation_id"]).expect(412)
    else:
        assert up["sha256"] == sha
        assert upload(api, r["reservation_id"]).expect(200) == up  # an exact retry
    ref = publish(api, r["reservation_id"], "c1.p").expect(200)
    assert ref["revision"] == 1 and ref["size_bytes"] == len(DATA) and ref["project_seq"] >= 1
    replay = publish(api, r["reservation_id"], "c1.p")
    assert replay.expect(200) == ref and replay.headers.get("aidememo-replayed") == "true"
    meta = api.get(f"{P}/artifacts/resolve", READER, query={"path": PATH}).expect(200)
    assert meta["generation"] == ref["generation"] and "project_seq" not in meta
    got = download(api, ref, READER)
    assert got.expect(200) == DATA
    assert got.headers["x-aidememo-artifact-sha256"] == sha
    assert got.headers["x-aidememo-content-type"] == "text/plain"


def test_art4_art7_replacement_needs_the_token_and_keeps_the_artifact(api: Api) -> None:
    v1 = put(api, "v1")
    reserve(api, "v2.bad", b"two").expect(409, "artifact_conflict")
    v2 = put(api, "v2", b"two", mutation_token=v1["mutation_token"])
    assert (v2["artifact_id"], v2["revision"]) == (v1["artifact_id"], 2)
    assert download(api, v2).expect(200) == b"two"
    assert download(api, v1).expect(200) == DATA  # before GC the old body still reads


def test_art2_exclusive_live_reservation_and_changed_reuse(api: Api) -> None:
    reserve(api, "x1").expect(200)
    reserve(api, "x2").expect(409, "artifact_conflict")
    reserve(api, "x1", b"other").expect(409, "command_conflict")


def test_art1_paths_are_validated_never_file_paths(api: Api) -> None:
    for bad in ("../etc/passwd", "sessions/s1/artifacts/../x", "/abs", "sessions/s1/x", ""):
        reserve(api, "bad", path=bad).expect(400, "invalid_artifact_path")
    api.get(f"{P}/artifacts/resolve", query={"path": "x/../y"}).expect(400, "invalid_artifact_path")
    reserve(api, "big", b"").expect(200)
    limit = 5 << 30 if granted(api) else 64 << 20  # one S3 PUT, else the direct route's
    too_big = {"path": "snapshots/1/manifest.json", "size_bytes": limit + 1}
    api.post(f"{P}/artifact-reservations", {"command_id": "b2", "payload": too_big}).expect(
        413, "artifact_upload_too_large"
    )


def test_art3_size_digest_and_length_mismatches(api: Api) -> None:
    r = reserve(api, "m1").expect(200)
    wrong = hashlib.sha256(b"not it").hexdigest()
    r2 = reserve(api, "m2", path="sessions/s1/canvas.md", sha256=wrong).expect(200)
    if granted(api):  # the store refuses them and stores nothing; publication observes that
        upload(api, r["reservation_id"], DATA[:-1]).expect(403)
        upload(api, r2["reservation_id"]).expect(400)  # x-amz-checksum-sha256 (GRANT-3)
        publish(api, r["reservation_id"], "m1.p").expect(409, "artifact_body_mismatch")
        publish(api, r2["reservation_id"], "m2.p").expect(409, "artifact_body_mismatch")
    else:
        upload(api, r["reservation_id"], DATA[:-1]).expect(409, "artifact_body_mismatch")
        upload(api, r2["reservation_id"]).expect(409, "artifact_body_mismatch")
        publish(api, r2["reservation_id"], "m2.p").expect(409, "artifact_conflict")
    r3 = reserve(api, "m3", path="branches/codex-p1/seg1.jsonl").expect(200)
    publish(api, r3["reservation_id"], "m3.p").expect(409, "artifact_body_mismatch")


def test_art6_roles_and_scope(api: Api) -> None:
    reserve(api, "ro", as_=READER).expect(403, "project_unauthorized")
    r = reserve(api, "w1").expect(200)
    upload(api, r["reservation_id"], as_=READER).expect(403, "project_unauthorized")
    upload(api, r["reservation_id"], as_=OUTSIDER).expect(403, "project_unauthorized")
    upload(api, r["reservation_id"]).expect(200)
    publish(api, r["reservation_id"], "w1.p", as_=READER).expect(403, "project_unauthorized")
    publish(api, r["reservation_id"], "w1.p", as_=HERMES).expect(404, "artifact_not_found")
    ref = publish(api, r["reservation_id"], "w1.p").expect(200)
    download(api, ref, OUTSIDER).expect(403, "project_unauthorized")
    api.get(f"{P}/artifacts/resolve", OUTSIDER, query={"path": PATH}).expect(
        403, "project_unauthorized"
    )
    api.get(f"{P}/artifacts/resolve", query={"path": "sessions/s9/canvas.md"}).expect(
        404, "artifact_not_found"
    )
    download(api, {**ref, "revision": 7}).expect(404, "artifact_not_found")


def test_art5_abort_keeps_the_published_version(api: Api) -> None:
    v1 = put(api, "a1")
    r = reserve(api, "a2", b"two", mutation_token=v1["mutation_token"]).expect(200)
    path = f"{P}/artifact-reservations/{r['reservation_id']}"
    assert api.call("DELETE", path, as_=WRITER).expect(200)["state"] == "aborted"
    assert api.call("DELETE", path, as_=WRITER).expect(200)["state"] == "aborted"
    upload(api, r["reservation_id"], b"two").expect(409, "artifact_conflict")
    publish(api, r["reservation_id"], "a2.p").expect(409, "artifact_conflict")
    meta = api.get(f"{P}/artifacts/resolve", query={"path": PATH}).expect(200)
    assert meta["revision"] == 1


def test_art3_expired_reservation_refuses_late_upload(api: Api) -> None:
    r = reserve(api, "e1", ttl_ms=1000).expect(200)
    api.clock.advance(1000)
    upload(api, r["reservation_id"]).expect(409, "artifact_reservation_expired")
    publish(api, r["reservation_id"], "e1.p").expect(409, "artifact_reservation_expired")
    reserve(api, "e2").expect(200)  # the path is free again


def test_art3_upload_needs_content_length_on_the_wire(api: Api) -> None:
    r = reserve(api, "l1").expect(200)
    path = f"{P}/artifact-reservations/{r['reservation_id']}/body"
    api.call("PUT", path, as_=WRITER, body=DATA, headers={"content-type": "text/plain"}).expect(
        415, "unsupported_media_type"
    )
    if granted(api):  # the direct route refuses before reading the body (OBJ-3, GRANT-5)
        upload_direct = api.call("PUT", path, as_=WRITER, body=DATA, headers=OCTET)
        upload_direct.expect(409, "artifact_transfer_mode_mismatch")


def test_vis2_handoff_artifacts_are_the_participants_only(api: Api) -> None:
    api.session("s1")
    api.send("h1", "s1", RECEIVER).expect(200)
    ref = put(api, "h", path="handoffs/h1/request.json")
    assert download(api, ref, RECEIVER).expect(200) == DATA
    download(api, ref, HERMES).expect(404, "artifact_not_found")
    query = {"path": "handoffs/h1/request.json"}
    api.get(f"{P}/artifacts/resolve", HERMES, query=query).expect(404, "artifact_not_found")
    api.get(f"{P}/artifacts/resolve", RECEIVER, query=query).expect(200)
    reserve(api, "h9", path="handoffs/h_missing/result.json").expect(400, "invalid_artifact_path")


def _kind(entry: dict[str, Any]) -> str:
    kind: str = entry["resource"]["kind"]
    return kind


def test_vis2_handoff_artifacts_leave_the_feeds_of_others(api: Api) -> None:
    api.session("s1")
    api.send("h1", "s1", RECEIVER).expect(200)
    put(api, "h", path="handoffs/h1/result.json")
    plain = put(api, "p")
    epoch = api.get(f"{P}/identity").expect(200)["project_epoch"]
    query = {"project_epoch": epoch, "after_seq": 0}
    for actor, expected in ((RECEIVER, 2), (HERMES, 1)):
        changes = api.get(f"{P}/changes/materialized", actor, query=query).expect(200)
        seen = [e for e in changes["entries"] if e["resource"]["resource"]["kind"] == "artifact"]
        assert len(seen) == expected, (actor, seen)
        heads = api.get(f"{P}/changes", actor, query=query).expect(200)
        kinds = [e for e in heads["entries"] if _kind(e) == "artifact"]
        assert len(kinds) == expected, (actor, kinds)
    snapshot = api.get(f"{P}/snapshot", HERMES).expect(200)["resources"]
    ids = [r["resource"]["id"] for r in snapshot if r["resource"]["kind"] == "artifact"]
    assert ids == [plain["artifact_id"]]


def test_art3_retry_with_different_bytes_is_a_conflict_everywhere(api: Api) -> None:
    r = reserve(api, "d1").expect(200)
    first = upload(api, r["reservation_id"]).expect(200)
    other = bytes(reversed(DATA))  # the same length, other bytes
    if granted(api):  # through a grant the store's If-None-Match refuses both (GRANT-3)
        upload(api, r["reservation_id"], other).expect(412)
        upload(api, r["reservation_id"]).expect(412)
    else:
        upload(api, r["reservation_id"], other).expect(409, "artifact_conflict")
        assert upload(api, r["reservation_id"]).expect(200) == first  # the exact retry still is
    ref = publish(api, r["reservation_id"], "d1.p").expect(200)
    assert download(api, ref).expect(200) == DATA
