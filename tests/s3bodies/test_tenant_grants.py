"""Tenant deletion with S3 bodies at the origin (SPEC.md GRANT-7): the deleted tenant's bodies
become GC intents that wait out every download grant issued before, as replacement does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aidememo.domain.artifacts import SETTLEMENT_GRACE_MS
from aidememo.service.artifact_gc import ArtifactGc
from aidememo.service.artifact_grants import GRANT_MAX_MS
from origin.s3_bodies import S3Bodies
from tests.contract.support import TENANT, Api
from tests.contract.test_admin import admin
from tests.s3 import S3Endpoint, s3_endpoint
from tests.s3bodies.test_download_grants import download_grant, put
from tests.s3bodies.test_upload_grants import _api, _bodies


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


@pytest.fixture
def bodies(s3: S3Endpoint) -> S3Bodies:
    return _bodies(s3)


@pytest.fixture
def api(tmp_path: Path, bodies: S3Bodies) -> Iterator[Api]:
    yield from _api(tmp_path, bodies)


def test_grant7_tenant_deletion_never_outruns_a_download_grant(api: Api, bodies: S3Bodies) -> None:
    data = b"tenant body" * 20
    ref = put(api, "t1", data)
    g = download_grant(api, ref, 1).expect(200)
    store = api.store()  # the same store after the tenant's rows are gone
    admin(api, "DELETE", f"/v1/admin/tenants/{TENANT}", query={"confirm": TENANT}).expect(200)
    intent = store.read(lambda tx: tx.get_gc_intent(ref["generation"]))
    assert intent is not None and intent.reason == "tenant_deleted"
    assert intent.not_before_ms == api.clock.now_ms() + SETTLEMENT_GRACE_MS + GRANT_MAX_MS
    assert g["expires_at_ms"] < intent.not_before_ms
    gc = ArtifactGc(store, bodies, api.clock)
    api.clock.advance(SETTLEMENT_GRACE_MS + 1)  # the plain grace is over, the grant is not
    assert gc.run_once().deleted == 0
    assert httpx.get(g["url"], headers=g["headers"]).content == data
    api.clock.advance(GRANT_MAX_MS)
    assert gc.run_once().deleted == 1
    assert bodies.head(ref["generation"]) is None
