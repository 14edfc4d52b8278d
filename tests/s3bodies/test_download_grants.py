"""Download grants at the origin with S3 bodies on SeaweedFS (GRANT-4): a presigned GET of the
exact revision's generation bound to its ETag, which GC never outruns."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aidememo.bodies.memory import MemoryBodies
from aidememo.domain.artifacts import SETTLEMENT_GRACE_MS
from aidememo.service.artifact_gc import ArtifactGc
from aidememo.service.artifact_grants import DOWNLOAD_GRANT_MAX_MS, GRANT_MAX_MS, READ_RETENTION_MS
from origin.s3_bodies import S3Bodies
from tests.contract.support import READER, WRITER, Api, P
from tests.s3 import S3Endpoint, s3_endpoint
from tests.s3bodies.test_upload_grants import (
    START_MS,
    _api,
    _bodies,
    grant,
    publish,
    reserve,
)


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


@pytest.fixture
def bodies(s3: S3Endpoint) -> S3Bodies:
    return _bodies(s3)


@pytest.fixture
def api(tmp_path: Path, bodies: S3Bodies) -> Iterator[Api]:
    yield from _api(tmp_path, bodies)


def put(api: Api, tag: str, data: bytes, **extra: Any) -> dict[str, Any]:
    r = reserve(api, tag, data, sha256=hashlib.sha256(data).hexdigest(), **extra)
    g = grant(api, r["reservation_id"]).expect(200)
    assert httpx.put(g["url"], content=data, headers=g["headers"]).status_code == 200
    ref: dict[str, Any] = publish(api, r["reservation_id"], f"{tag}.p").expect(200)
    return ref


def download_grant(api: Api, ref: dict[str, Any], revision: int, as_: str = READER) -> Any:
    return api.call("POST", f"{P}/artifacts/{ref['artifact_id']}/download-grants", as_=as_,
                    json={"revision": revision})  # fmt: skip


def test_grant4_download_grant_reads_the_exact_revision(api: Api) -> None:
    data = b"first body" * 100
    ref = put(api, "v1", data)
    g = download_grant(api, ref, 1).expect(200)
    assert g["method"] == "GET" and set(g["headers"]) == {"If-Match"}
    assert g["expires_at_ms"] == START_MS + DOWNLOAD_GRANT_MAX_MS
    assert (g["size_bytes"], g["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    got = httpx.get(g["url"], headers=g["headers"])
    assert got.status_code == 200 and got.content == data
    # The URL is bound to its ETag: another If-Match is refused by the store.
    other = httpx.get(g["url"], headers={"If-Match": '"0000"'})
    assert other.status_code in (403, 412)
    download_grant(api, ref, 2).expect(404, "artifact_not_found")


def test_grant4_gc_never_deletes_under_a_download_grant(api: Api, bodies: S3Bodies) -> None:
    v1 = put(api, "v1", b"one" * 50)
    early = download_grant(api, v1, 1).expect(200)
    v2 = put(api, "v2", b"two" * 50, mutation_token=v1["mutation_token"])
    assert v2["revision"] == 2
    intent = api.store().read(lambda tx: tx.get_gc_intent(v1["generation"]))
    assert intent.not_before_ms == START_MS + SETTLEMENT_GRACE_MS + GRANT_MAX_MS
    assert early["expires_at_ms"] + READ_RETENTION_MS <= intent.not_before_ms
    # A grant of the replaced revision expires a read retention before its GC intent is due.
    late = download_grant(api, v1, 1).expect(200)
    assert late["expires_at_ms"] == intent.not_before_ms - READ_RETENTION_MS
    gc = ArtifactGc(api.store(), bodies, api.clock)
    api.clock.advance(SETTLEMENT_GRACE_MS + 1)  # the plain grace is over, the grants are not
    assert gc.run_once().deleted == 0
    assert httpx.get(late["url"], headers=late["headers"]).content == b"one" * 50
    api.clock.advance(intent.not_before_ms - api.clock.now_ms() - READ_RETENTION_MS + 1)
    download_grant(api, v1, 1).expect(404, "artifact_not_found")  # too close to collection
    api.clock.advance(READ_RETENTION_MS)
    assert gc.run_once().deleted == 1
    assert bodies.head(v1["generation"]) is None
    download_grant(api, v1, 1).expect(404, "artifact_not_found")
    got = download_grant(api, v2, 2).expect(200)
    assert httpx.get(got["url"], headers=got["headers"]).content == b"two" * 50


def test_grant4_no_download_grants_without_a_signing_body_store(tmp_path: Path) -> None:
    for api in _api(tmp_path, MemoryBodies()):
        r = reserve(api, "m1", b"abc")
        api.call("PUT", f"{P}/artifact-reservations/{r['reservation_id']}/body", as_=WRITER,
                 body=b"abc", headers={"content-type": "application/octet-stream"})  # fmt: skip
        ref = publish(api, r["reservation_id"], "m1.p").expect(200)
        download_grant(api, ref, 1).expect(409, "artifact_transfer_mode_mismatch")
