"""Upload grants at the origin with S3 bodies on SeaweedFS (GRANT-3): a presigned single PUT
bound to the generation, its exact length and type and `If-None-Match: *`, that never outlives
its reservation; publication observes the stored object."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from aidememo.bodies.memory import MemoryBodies
from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from aidememo.service.artifact_grants import UPLOAD_GRANT_MAX_MS
from aidememo.stores.sqlite import SqliteStore
from origin.s3_bodies import S3Bodies, S3Config, make_client
from tests.contract.support import READER, WRITER, Api, P, _in_process
from tests.s3 import S3Endpoint, fresh_prefix, s3_endpoint

PATH = "sessions/s1/artifacts/report.bin"
DATA = b"\x00granted body\xff" * 500
START_MS = 1_700_000_000_000


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


def _bodies(s3: S3Endpoint) -> S3Bodies:
    import boto3

    config = S3Config(bucket=s3.bucket, prefix=fresh_prefix(), endpoint=s3.endpoint,
                      region=s3.region)  # fmt: skip
    session = boto3.session.Session(
        aws_access_key_id=s3.access_key_id, aws_secret_access_key=s3.secret_access_key
    )
    return S3Bodies(config, client=make_client(config, session))


def _api(tmp_path: Path, bodies: Any) -> Iterator[Api]:
    clock = FixedClock(START_MS)
    backend = _in_process(SqliteStore.open_file(tmp_path / "db.sqlite"), clock, bodies)
    api = Api("s3", backend.client, backend.identity, clock, admin_token=backend.admin_token,
              store=backend.store)  # fmt: skip
    api.provision(WRITER, Role.WRITER)
    api.provision(READER, Role.READER)
    try:
        yield api
    finally:
        backend.close()


@pytest.fixture
def bodies(s3: S3Endpoint) -> S3Bodies:
    return _bodies(s3)


@pytest.fixture
def api(tmp_path: Path, bodies: S3Bodies) -> Iterator[Api]:
    yield from _api(tmp_path, bodies)


def reserve(
    api: Api, command_id: str, data: bytes = DATA, path: str = PATH, **extra: Any
) -> dict[str, Any]:
    payload = {"path": path, "size_bytes": len(data), "content_type": "text/plain", **extra}
    body: dict[str, Any] = api.post(
        f"{P}/artifact-reservations", {"command_id": command_id, "payload": payload}
    ).expect(200)
    return body


def grant(api: Api, rid: str) -> Any:
    return api.call("POST", f"{P}/artifact-reservations/{rid}/upload-grants", as_=WRITER)


def publish(api: Api, rid: str, command_id: str) -> Any:
    return api.post(f"{P}/artifact-reservations/{rid}/publish", {"command_id": command_id})


def test_grant3_upload_through_a_grant_then_publish_and_download(
    api: Api, bodies: S3Bodies
) -> None:
    r = reserve(api, "c1")
    assert r["transfer"]["mode"] == "grant"
    g = grant(api, r["reservation_id"]).expect(200)
    assert g["method"] == "PUT"
    assert g["headers"] == {
        "Content-Length": str(len(DATA)),
        "Content-Type": "text/plain",
        "If-None-Match": "*",
    }
    assert g["expires_at_ms"] == START_MS + UPLOAD_GRANT_MAX_MS  # before the 15 min TTL ends
    # Bound to the generation's key under the body store's prefix.
    path = urlsplit(g["url"]).path
    assert path == f"/{bodies.config.bucket}/{bodies.config.prefix}{r['generation']}"
    assert httpx.put(g["url"], content=DATA, headers=g["headers"]).status_code == 200
    # A replay of the grant is 412 and keeps the body; so is a second grant's PUT.
    assert httpx.put(g["url"], content=DATA, headers=g["headers"]).status_code == 412
    again = grant(api, r["reservation_id"]).expect(200)
    assert httpx.put(again["url"], content=DATA, headers=again["headers"]).status_code == 412
    ref = publish(api, r["reservation_id"], "c1.p").expect(200)
    assert ref["sha256"] == hashlib.sha256(DATA).hexdigest() and ref["revision"] == 1
    got = api.post(f"{P}/artifacts/{ref['artifact_id']}/downloads", {"revision": 1}, READER).expect(
        200
    )
    assert got == DATA
    grant(api, r["reservation_id"]).expect(409, "artifact_conflict")  # published already


def test_grant3_grant_never_outlives_the_reservation(api: Api) -> None:
    r = reserve(api, "short", ttl_ms=90_500)
    g = grant(api, r["reservation_id"]).expect(200)
    assert g["expires_at_ms"] == START_MS + 90_000 <= r["expires_at_ms"]
    api.clock.advance(90_000)
    grant(api, r["reservation_id"]).expect(409, "artifact_reservation_expired")
    api.clock.advance(1_000)
    grant(api, r["reservation_id"]).expect(409, "artifact_reservation_expired")
    grant(api, "rsv_missing").expect(404, "artifact_not_found")
    api.call(
        "POST", f"{P}/artifact-reservations/{r['reservation_id']}/upload-grants", as_=READER
    ).expect(403, "project_unauthorized")


def test_grant3_late_put_after_abort_never_publishes(api: Api, bodies: S3Bodies) -> None:
    v1 = reserve(api, "v1")
    g1 = grant(api, v1["reservation_id"]).expect(200)
    assert httpx.put(g1["url"], content=DATA, headers=g1["headers"]).status_code == 200
    ref = publish(api, v1["reservation_id"], "v1.p").expect(200)
    v2 = reserve(api, "v2", b"second", mutation_token=ref["mutation_token"])
    g2 = grant(api, v2["reservation_id"]).expect(200)
    api.call("DELETE", f"{P}/artifact-reservations/{v2['reservation_id']}", as_=WRITER).expect(200)
    # The grant is still a valid signature, so the store takes the late PUT ...
    assert httpx.put(g2["url"], content=b"second", headers=g2["headers"]).status_code == 200
    # ... but it never becomes published, and the path keeps its first body.
    publish(api, v2["reservation_id"], "v2.p").expect(409, "artifact_conflict")
    meta = api.get(f"{P}/artifacts/resolve", query={"path": PATH}).expect(200)
    assert meta["generation"] == ref["generation"]
    intent = api.store().read(lambda tx: tx.get_gc_intent(v2["generation"]))
    assert intent is not None and intent.not_before_ms >= g2["expires_at_ms"]
    assert bodies.head(v2["generation"]) == len(b"second")  # until GC collects it


def test_grant3_publish_refuses_an_object_of_another_size(
    api: Api, bodies: S3Bodies, s3: S3Endpoint
) -> None:
    r = reserve(api, "odd")
    # Something else wrote under the generation (not through the grant): the HEAD decides.
    s3.client().put_object(
        Bucket=bodies.config.bucket,
        Key=bodies.config.prefix + r["generation"],
        Body=b"not the reserved bytes",
    )
    publish(api, r["reservation_id"], "odd.p").expect(409, "artifact_body_mismatch")
    api.get(f"{P}/artifacts/resolve", query={"path": PATH}).expect(404, "artifact_not_found")


def test_grant3_no_grants_without_a_signing_body_store(tmp_path: Path) -> None:
    for api in _api(tmp_path, MemoryBodies()):
        r = reserve(api, "m1")
        assert r["transfer"]["mode"] == "direct"
        grant(api, r["reservation_id"]).expect(409, "artifact_transfer_mode_mismatch")


def test_grant3_reservations_of_s3_bodies_go_up_to_5_gib(api: Api) -> None:
    big = {"path": PATH, "size_bytes": 5 * 1024**3, "content_type": "application/x-big"}
    r = api.post(f"{P}/artifact-reservations", {"command_id": "big", "payload": big}).expect(200)
    g = grant(api, r["reservation_id"]).expect(200)
    assert g["headers"]["Content-Length"] == str(5 * 1024**3)
    over = dict(big, size_bytes=5 * 1024**3 + 1, path="sessions/s1/artifacts/over.bin")
    api.post(f"{P}/artifact-reservations", {"command_id": "over", "payload": over}).expect(
        413, "artifact_upload_too_large"
    )


class _CountingReads(S3Bodies):
    def __init__(self, base: S3Bodies) -> None:
        super().__init__(base.config, client=base.client)
        self.reads = 0

    def read(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        self.reads += 1
        return super().read(key, start, end)


def test_grant3_declared_sha256_is_verified_by_the_store(s3: S3Endpoint, tmp_path: Path) -> None:
    bodies = _CountingReads(_bodies(s3))
    for api in _api(tmp_path, bodies):
        sha = hashlib.sha256(DATA).hexdigest()
        r = reserve(api, "ck", sha256=sha)
        g = grant(api, r["reservation_id"]).expect(200)
        assert "x-amz-checksum-sha256" in g["headers"]
        forged = DATA[:-1] + b"!"  # same length, other bytes: the store refuses them
        assert httpx.put(g["url"], content=forged, headers=g["headers"]).status_code == 400
        assert bodies.head(r["generation"]) is None
        assert httpx.put(g["url"], content=DATA, headers=g["headers"]).status_code == 200
        ref = publish(api, r["reservation_id"], "ck.p").expect(200)
        # Publication took the store's own checksum from its HEAD: no byte was read back.
        assert ref["sha256"] == sha and bodies.reads == 0
        # Without a declared sha256 the observation reads the object back.
        plain = reserve(api, "plain", b"plain body", path="sessions/s1/artifacts/p.bin")
        pg = grant(api, plain["reservation_id"]).expect(200)
        assert "x-amz-checksum-sha256" not in pg["headers"]
        assert httpx.put(pg["url"], content=b"plain body", headers=pg["headers"]).status_code == 200
        done = publish(api, plain["reservation_id"], "plain.p").expect(200)
        assert done["sha256"] == hashlib.sha256(b"plain body").hexdigest() and bodies.reads == 1


def test_grant3_late_put_after_expiry_never_publishes(api: Api) -> None:
    r = reserve(api, "late", ttl_ms=60_000)
    g = grant(api, r["reservation_id"]).expect(200)
    api.clock.advance(61_000)  # the service's clock: the reservation has expired
    # The store's own clock still accepts the URL; the body lands but is never published.
    assert httpx.put(g["url"], content=DATA, headers=g["headers"]).status_code == 200
    publish(api, r["reservation_id"], "late.p").expect(409, "artifact_reservation_expired")
    api.get(f"{P}/artifacts/resolve", query={"path": PATH}).expect(404, "artifact_not_found")
