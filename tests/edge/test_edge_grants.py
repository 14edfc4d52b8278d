"""Grants at the edge in the CPython runtime double, with SeaweedFS as R2's S3 endpoint
(`R2_S3_ENDPOINT`, SPEC.md GRANT-5, GRANT-6, GRANT-7): the project object signs upload grants,
the Worker HEADs through the S3 API before publication, download grants are bound to the ETag,
and the object's alarm collects through signed DELETEs."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from aidememo.bodies.r2_grants import from_env
from aidememo.domain.artifacts import SETTLEMENT_GRACE_MS
from aidememo.domain.clock import FixedClock
from aidememo.domain.errors import AidememoError
from aidememo.domain.model import Role
from aidememo.service.artifact_grants import GRANT_MAX_MS, UPLOAD_GRANT_MAX_MS
from tests.contract.support import LEASE_MS, READER, START_MS, TENANT, WRITER, Api, P
from tests.edge.backend import EdgeIdentity, postgres_runtime, project_store
from tests.edge.runtime import EdgeClient, Runtime
from tests.s3 import S3Endpoint, s3_endpoint

PATH = "sessions/s1/artifacts/edge.bin"
DATA = b"\x00edge granted\xff" * 300


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


def r2_vars(s3: S3Endpoint) -> dict[str, str]:
    """The deployment's R2 S3 secrets and vars, pointed at the test S3 server."""
    return {
        "R2_ACCESS_KEY_ID": s3.access_key_id,
        "R2_SECRET_ACCESS_KEY": s3.secret_access_key,
        "R2_BUCKET": s3.bucket,
        "R2_ACCOUNT_ID": "0" * 32,
        "R2_S3_ENDPOINT": s3.endpoint,
        "R2_S3_REGION": s3.region,
    }


@pytest.fixture(params=["sqlite", "postgres"])
def edge(
    request: pytest.FixtureRequest, tmp_path: Path, s3: S3Endpoint
) -> Iterator[tuple[Api, Runtime]]:
    """The edge double with R2 grants on SeaweedFS, in SQLite and in PostgreSQL mode."""
    clock = FixedClock(START_MS)
    variables = {"HANDOFF_LEASE_MS": str(LEASE_MS), **r2_vars(s3)}
    db: Any = None
    if request.param == "postgres":
        from tests import pg

        db = pg.create_database(pooled=True)
        runtime = postgres_runtime(tmp_path / "edge", clock, db, vars=variables)
    else:
        runtime = Runtime(tmp_path / "edge", clock, vars=variables)
    api = Api("edge-grants", EdgeClient(runtime), EdgeIdentity(runtime), clock,  # type: ignore[arg-type]
              store=lambda: project_store(runtime))  # fmt: skip
    try:
        api.provision(WRITER, Role.WRITER)
        api.provision(READER, Role.READER)
        yield api, runtime
    finally:
        runtime.close()
        if db is not None:
            db.drop()


def reserve(api: Api, tag: str, data: bytes = DATA, **extra: Any) -> dict[str, Any]:
    payload = {"path": PATH, "size_bytes": len(data), "content_type": "text/plain", **extra}
    body: dict[str, Any] = api.post(
        f"{P}/artifact-reservations", {"command_id": tag, "payload": payload}
    ).expect(200)
    return body


def grant(api: Api, rid: str) -> Any:
    return api.call("POST", f"{P}/artifact-reservations/{rid}/upload-grants", as_=WRITER)


def publish(api: Api, rid: str, command_id: str) -> Any:
    return api.post(f"{P}/artifact-reservations/{rid}/publish", {"command_id": command_id})


def download_grant(api: Api, ref: dict[str, Any], revision: int) -> Any:
    return api.call("POST", f"{P}/artifacts/{ref['artifact_id']}/download-grants", as_=READER,
                    json={"revision": revision})  # fmt: skip


def put(api: Api, tag: str, data: bytes, **extra: Any) -> dict[str, Any]:
    r = reserve(api, tag, data, **extra)
    g = grant(api, r["reservation_id"]).expect(200)
    assert httpx.put(g["url"], content=data, headers=g["headers"]).status_code == 200
    ref: dict[str, Any] = publish(api, r["reservation_id"], f"{tag}.p").expect(200)
    return ref


def _exists(s3: S3Endpoint, key: str) -> bool:
    listed = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=key)
    return any(o["Key"] == key for o in listed.get("Contents", []))


def test_grant5_obj3_edge_upload_grant_publish_and_download(
    edge: tuple[Api, Runtime], s3: S3Endpoint
) -> None:
    api, runtime = edge
    r = reserve(api, "c1")
    assert r["transfer"] == {
        "mode": "grant",
        "method": "POST",
        "path": f"{P}/artifact-reservations/{r['reservation_id']}/upload-grants",
    }
    # The direct route is refused before the body is read (OBJ-3).
    api.call("PUT", f"{P}/artifact-reservations/{r['reservation_id']}/body", as_=WRITER,
             body=DATA, headers={"content-type": "application/octet-stream"},
             ).expect(409, "artifact_transfer_mode_mismatch")  # fmt: skip
    g = grant(api, r["reservation_id"]).expect(200)
    assert g["headers"] == {
        "Content-Length": str(len(DATA)),
        "Content-Type": "text/plain",
        "If-None-Match": "*",
    }
    assert g["expires_at_ms"] == START_MS + UPLOAD_GRANT_MAX_MS
    assert urlsplit(g["url"]).path == f"/{s3.bucket}/{r['generation']}"
    publish(api, r["reservation_id"], "c1.early").expect(409, "artifact_body_mismatch")
    assert httpx.put(g["url"], content=DATA, headers=g["headers"]).status_code == 200
    assert httpx.put(g["url"], content=DATA, headers=g["headers"]).status_code == 412
    ref = publish(api, r["reservation_id"], "c2.p").expect(200)
    assert ref["sha256"] == hashlib.sha256(DATA).hexdigest() and ref["revision"] == 1
    assert publish(api, r["reservation_id"], "c2.p").expect(200) == ref  # a replay
    # The download route streams the body from the S3 API; a grant reads it straight.
    got = api.post(f"{P}/artifacts/{ref['artifact_id']}/downloads", {"revision": 1}, READER)
    assert got.expect(200) == DATA
    dg = download_grant(api, ref, 1).expect(200)
    assert dg["method"] == "GET" and set(dg["headers"]) == {"If-Match"}
    assert (dg["size_bytes"], dg["sha256"]) == (len(DATA), ref["sha256"])
    fetched = httpx.get(dg["url"], headers=dg["headers"])
    assert fetched.status_code == 200 and fetched.content == DATA
    assert httpx.get(dg["url"], headers={"If-Match": '"0000"'}).status_code in (403, 412)
    download_grant(api, ref, 2).expect(404, "artifact_not_found")
    assert runtime.env.ARTIFACTS.keys() == []  # nothing went through the binding


def test_grant5_edge_checksum_and_size_are_the_stores(
    edge: tuple[Api, Runtime], s3: S3Endpoint
) -> None:
    api, _ = edge
    sha = hashlib.sha256(DATA).hexdigest()
    r = reserve(api, "ck", sha256=sha)
    g = grant(api, r["reservation_id"]).expect(200)
    forged = DATA[:-1] + b"!"
    assert httpx.put(g["url"], content=forged, headers=g["headers"]).status_code == 400
    assert httpx.put(g["url"], content=DATA, headers=g["headers"]).status_code == 200
    assert publish(api, r["reservation_id"], "ck.p").expect(200)["sha256"] == sha
    # Something else wrote another size under a generation: the signed HEAD decides.
    odd = reserve(api, "odd", path="sessions/s1/artifacts/odd.bin")
    s3.client().put_object(Bucket=s3.bucket, Key=odd["generation"], Body=b"other bytes")
    publish(api, odd["reservation_id"], "odd.p").expect(409, "artifact_body_mismatch")


def test_grant6_edge_alarm_collects_replaced_bodies_through_s3(
    edge: tuple[Api, Runtime], s3: S3Endpoint
) -> None:
    api, runtime = edge
    v1 = put(api, "v1", b"one" * 40)
    v2 = put(api, "v2", b"two" * 40, mutation_token=v1["mutation_token"])
    api.clock.advance(SETTLEMENT_GRACE_MS)  # the plain grace: a grant may still be out
    runtime.fire_alarms()
    assert _exists(s3, v1["generation"])
    api.clock.advance(GRANT_MAX_MS)
    runtime.fire_alarms()
    assert not _exists(s3, v1["generation"]) and _exists(s3, v2["generation"])


def test_grant7_edge_tenant_deletion_outwaits_download_grants(
    edge: tuple[Api, Runtime], s3: S3Endpoint
) -> None:
    api, runtime = edge
    ref = put(api, "t1", b"tenant body")
    dg = download_grant(api, ref, 1).expect(200)
    status, _, answer = runtime.admin("DELETE", f"/v1/admin/tenants/{TENANT}?confirm={TENANT}")
    assert status == 200, answer
    api.clock.advance(SETTLEMENT_GRACE_MS)
    runtime.fire_alarms()
    assert httpx.get(dg["url"], headers=dg["headers"]).content == b"tenant body"
    api.clock.advance(GRANT_MAX_MS)
    runtime.fire_alarms()
    assert not _exists(s3, ref["generation"])


def test_grant5_half_a_configuration_is_refused() -> None:
    assert from_env({}) is None
    with pytest.raises(AidememoError):
        from_env({"R2_ACCESS_KEY_ID": "k", "R2_SECRET_ACCESS_KEY": "s"})
    with pytest.raises(AidememoError):
        from_env({"R2_ACCESS_KEY_ID": "k", "R2_SECRET_ACCESS_KEY": "s", "R2_BUCKET": "b",
                  "R2_ACCOUNT_ID": "not-an-account"})  # fmt: skip
    g = from_env({"R2_ACCESS_KEY_ID": "k", "R2_SECRET_ACCESS_KEY": "s3cr3tval", "R2_BUCKET": "b1",
                  "R2_ACCOUNT_ID": "a" * 32})  # fmt: skip
    assert g is not None and g.location.endpoint == f"https://{'a' * 32}.r2.cloudflarestorage.com"
    assert g.location.region == "auto" and "s3cr3tval" not in repr(g) + repr(g.creds)


def test_grant5_without_r2_secrets_the_edge_has_no_download_grants(tmp_path: Path) -> None:
    from tests.edge.backend import edge_backend

    backend = edge_backend(tmp_path, FixedClock(START_MS))
    try:
        api = Api("edge", backend.client, backend.identity, backend.client.runtime.clock,
                  store=backend.store)  # fmt: skip
        api.provision(WRITER, Role.WRITER)
        r = reserve(api, "d1", b"abc")
        assert r["transfer"]["mode"] == "direct"
        grant(api, r["reservation_id"]).expect(409, "artifact_transfer_mode_mismatch")
        api.call("PUT", f"{P}/artifact-reservations/{r['reservation_id']}/body", as_=WRITER,
                 body=b"abc", headers={"content-type": "application/octet-stream"})  # fmt: skip
        ref = publish(api, r["reservation_id"], "d1.p").expect(200)
        api.call("POST", f"{P}/artifacts/{ref['artifact_id']}/download-grants", as_=WRITER,
                 json={"revision": 1}).expect(409, "artifact_transfer_mode_mismatch")  # fmt: skip
    finally:
        backend.close()


def test_grant5_half_a_configuration_refuses_body_routes_only(tmp_path: Path) -> None:
    clock = FixedClock(START_MS)
    half = {"R2_ACCESS_KEY_ID": "k", "R2_SECRET_ACCESS_KEY": "s"}  # no bucket, no account
    runtime = Runtime(tmp_path / "edge", clock, vars=half)
    try:
        api = Api("edge-half", EdgeClient(runtime), EdgeIdentity(runtime), clock,  # type: ignore[arg-type]
                  store=lambda: project_store(runtime))  # fmt: skip
        api.provision(WRITER, Role.WRITER)
        r = reserve(api, "h1", b"abc")
        api.call("PUT", f"{P}/artifact-reservations/{r['reservation_id']}/body", as_=WRITER,
                 body=b"abc", headers={"content-type": "application/octet-stream"},
                 ).expect(503, "artifact_store_unavailable")  # fmt: skip
        grant(api, r["reservation_id"]).expect(503, "artifact_store_unavailable")
        assert runtime.env.ARTIFACTS.keys() == []
        api.get(f"{P}/artifacts/resolve", query={"path": PATH}).expect(404, "artifact_not_found")
    finally:
        runtime.close()


def test_grant5_grant3_edge_grants_keep_the_reservation_rules(
    edge: tuple[Api, Runtime], s3: S3Endpoint
) -> None:
    api, _ = edge
    r = reserve(api, "short", ttl_ms=90_500)
    g = grant(api, r["reservation_id"]).expect(200)
    assert g["expires_at_ms"] == START_MS + 90_000 <= r["expires_at_ms"]
    api.call("POST", f"{P}/artifact-reservations/{r['reservation_id']}/upload-grants",
             as_=READER).expect(403, "project_unauthorized")  # fmt: skip
    grant(api, "rsv_missing").expect(404, "artifact_not_found")
    api.clock.advance(90_000)
    grant(api, r["reservation_id"]).expect(409, "artifact_reservation_expired")
    # A late PUT after an abort lands in the store but never becomes published.
    v = reserve(api, "late", path="sessions/s1/artifacts/late.bin")
    gv = grant(api, v["reservation_id"]).expect(200)
    api.call("DELETE", f"{P}/artifact-reservations/{v['reservation_id']}", as_=WRITER).expect(200)
    assert httpx.put(gv["url"], content=DATA, headers=gv["headers"]).status_code == 200
    publish(api, v["reservation_id"], "late.p").expect(409, "artifact_conflict")
    intent = api.store().read(lambda tx: tx.get_gc_intent(v["generation"]))
    assert intent is not None and intent.not_before_ms >= gv["expires_at_ms"]
    assert _exists(s3, v["generation"])
