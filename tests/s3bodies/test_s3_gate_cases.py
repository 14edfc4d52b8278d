"""The gate's remaining cases with S3 bodies on SeaweedFS: an object replaced under its
generation between the grant upload and publish fails verification (GRANT-3, ART-4), and no
port operation or grant names a key outside the store's prefix (OBJ-2, GRANT-3), nor any edge
grant or signed request a key that is not a generation (GRANT-5)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aidememo.domain.errors import AidememoError, ErrorCode
from origin.s3_bodies import S3Bodies
from tests.contract.support import Api, P
from tests.s3 import S3Endpoint, s3_endpoint
from tests.s3bodies.test_upload_grants import DATA, PATH, _api, _bodies, grant, publish, reserve


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


@pytest.fixture
def bodies(s3: S3Endpoint) -> S3Bodies:
    return _bodies(s3)


@pytest.fixture
def api(tmp_path: Path, bodies: S3Bodies) -> Iterator[Api]:
    yield from _api(tmp_path, bodies)


def _code(fn: Callable[[str], Any], key: str) -> ErrorCode | None:
    try:
        fn(key)
    except AidememoError as exc:
        return exc.code
    return None


def test_grant3_art4_publish_refuses_an_object_replaced_after_the_grant_upload(
    api: Api, bodies: S3Bodies, s3: S3Endpoint
) -> None:
    r = reserve(api, "swap", sha256=hashlib.sha256(DATA).hexdigest())
    g = grant(api, r["reservation_id"]).expect(200)
    assert httpx.put(g["url"], content=DATA, headers=g["headers"]).status_code == 200
    # Out of band, not through the grant: another body of the same size replaces the object.
    other = bytes(reversed(DATA))
    assert len(other) == len(DATA) and other != DATA
    s3.client().put_object(
        Bucket=bodies.config.bucket, Key=bodies.config.prefix + r["generation"], Body=other
    )
    publish(api, r["reservation_id"], "swap.p").expect(409, "artifact_body_mismatch")
    api.get(f"{P}/artifacts/resolve", query={"path": PATH}).expect(404, "artifact_not_found")
    # The failed generation is queued for GC, after every grant of it has expired (GRANT-4).
    intent = api.store().read(lambda tx: tx.get_gc_intent(r["generation"]))
    assert intent is not None and intent.not_before_ms >= g["expires_at_ms"]


def test_obj2_grant3_no_operation_or_grant_leaves_the_prefix(
    bodies: S3Bodies, s3: S3Endpoint
) -> None:
    assert bodies.config.prefix  # a fresh prefix per test
    escapes = ("../gen_0001", "gen_0001/../../x", "/gen_0001", "a/b", "", "k", "gen 1", "gen%2F1")
    operations: dict[str, Callable[[str], Any]] = {
        "create": lambda k: bodies.create(k, iter([b"x"]), 1),
        "head": bodies.head,
        "stat": bodies.stat,
        "observe": bodies.observe,
        "read": lambda k: b"".join(bodies.read(k)),
        "delete": bodies.delete,
        "presign_put": lambda k: bodies.presign_put(k, 1, "text/plain", 60),
        "presign_get": lambda k: bodies.presign_get(k, '"etag"', 60),
    }
    for key in escapes:
        for name, op in operations.items():
            assert _code(op, key) == ErrorCode.ARTIFACT_NOT_FOUND, (name, key)
    # A generation's grant names exactly `<prefix><generation>` in the bucket.
    url, _ = bodies.presign_put("gen_0001", 1, "text/plain", 60)
    assert httpx.URL(url).path == f"/{bodies.config.bucket}/{bodies.config.prefix}gen_0001"
    listed = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=bodies.config.prefix)
    assert listed.get("KeyCount", 0) == 0  # nothing was written by any refused call


def test_grant5_edge_grants_and_signed_requests_name_only_generations() -> None:
    from aidememo.bodies.r2_grants import from_env

    grants = from_env({"R2_ACCESS_KEY_ID": "AKIDEXAMPLE", "R2_SECRET_ACCESS_KEY": "secret",
                       "R2_BUCKET": "bodies", "R2_ACCOUNT_ID": "0" * 32})  # fmt: skip
    assert grants is not None
    operations: dict[str, Callable[[str], Any]] = {
        "presign_put": lambda k: grants.presign_put(k, 1, "text/plain", 60),
        "presign_get": lambda k: grants.presign_get(k, '"etag"', 60),
        "signed": lambda k: grants.signed("HEAD", k),
    }
    for key in ("../gen_1", "gen_1/../x", "gen_1/x", "/gen_1", "", "other", "gen_a b", "gen_%2F"):
        for name, op in operations.items():
            assert _code(op, key) == ErrorCode.ARTIFACT_NOT_FOUND, (name, key)
    url, _ = grants.presign_put("gen_0001", 1, "text/plain", 60)
    assert httpx.URL(url).path == "/bodies/gen_0001"
