"""The failure gate with S3 bodies and upload grants (GRANT-3, ART-9): a real `aidememo serve
--artifact-backend s3` killed at each crash point of the grant flow, then the exact retry on a
fresh process converges on one publication and one object under the prefix."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.origin.test_serve_process import ServeProcess
from tests.s3 import S3Endpoint, fresh_prefix, s3_endpoint
from tests.s3bodies.test_s3_serve import PROJECT, _aws, _flags, home, token

DATA = b"\x01gated grant body\xfe" * 2000
PATH = "sessions/s1/artifacts/gated.bin"
__all__ = ["home", "token"]  # the fixtures this module uses


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


def _flow(url: str, bearer: str) -> dict[str, Any]:
    """reserve, grant, PUT, publish with fixed command ids (so a retry is exact)."""
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {bearer}"},
                      timeout=30) as http:  # fmt: skip
        payload = {"path": PATH, "size_bytes": len(DATA), "content_type": "text/plain",
                   "sha256": hashlib.sha256(DATA).hexdigest()}  # fmt: skip
        r = http.post(f"{PROJECT}/artifact-reservations",
                      json={"command_id": "gate.r", "payload": payload})  # fmt: skip
        assert r.status_code == 200, r.text
        rid = r.json()["reservation_id"]
        g = http.post(f"{PROJECT}/artifact-reservations/{rid}/upload-grants")
        if g.status_code == 409:  # published before the crash: the publish replays
            assert g.json()["error"]["code"] == "artifact_conflict", g.text
        else:
            assert g.status_code == 200, g.text
            grant = g.json()
            put = httpx.put(grant["url"], content=DATA, headers=grant["headers"])
            assert put.status_code in (200, 412), put.text  # 412: stored before the crash
        p = http.post(f"{PROJECT}/artifact-reservations/{rid}/publish",
                      json={"command_id": "gate.p"})  # fmt: skip
        assert p.status_code == 200, p.text
        ref: dict[str, Any] = p.json()
        got = http.post(f"{PROJECT}/artifacts/{ref['artifact_id']}/downloads",
                        json={"revision": ref["revision"]})  # fmt: skip
        assert got.status_code == 200 and got.content == DATA
        return ref


@pytest.mark.parametrize("point", ["after_reservation", "during_verification",
                                   "after_metadata_commit"])  # fmt: skip
def test_grant3_art9_crash_then_exact_retry_converges_on_s3(
    tmp_path: Path, home: Path, token: str, s3: S3Endpoint, point: str
) -> None:
    prefix = fresh_prefix()
    log = tmp_path / "serve.log"
    crashing = ServeProcess(home, log, *_flags(s3, prefix),
                            environ={**_aws(s3), "AIDEMEMO_TEST_CRASH_AT": point})  # fmt: skip
    try:
        with pytest.raises(httpx.TransportError):
            _flow(crashing.url, token)
        assert crashing.proc.wait(timeout=10) == 137
        assert f"crash point {point} reached" in crashing.stderr()
    finally:
        crashing.kill()
    again = ServeProcess(home, log, *_flags(s3, prefix), environ=_aws(s3))
    try:
        ref = _flow(again.url, token)
    finally:
        again.kill()
    assert ref["revision"] == 1 and ref["sha256"] == hashlib.sha256(DATA).hexdigest()
    listed = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=prefix)
    assert [o["Key"] for o in listed.get("Contents", [])] == [prefix + ref["generation"]]
