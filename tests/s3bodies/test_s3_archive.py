"""A tenant moves with its artifact bodies from local files into S3 bodies (OBJ-2, ART-12):
`admin export --include-bodies` on a local-body catalog, `admin import --artifact-backend s3`
into another database, then the origin serves the body from the bucket."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from aidememo.cli.main import main
from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from aidememo.http.app import HttpApp
from aidememo.stores.sqlite import SqliteStore
from origin.s3_bodies import S3Bodies, S3Config
from tests.cli.test_artifact_archive_cli import DATA, _api
from tests.contract.support import TENANT, WRITER, Api, InProcessClient, P
from tests.s3 import S3Endpoint, fresh_prefix, s3_endpoint


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> S3Endpoint:
    found = s3_endpoint()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", found.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", found.secret_access_key)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    return found


def test_obj2_art12_a_tenant_moves_into_s3_bodies(
    tmp_path: Path, s3: S3Endpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    api, store = _api(source)
    api.provision(WRITER, Role.WRITER)
    payload = {"path": "sessions/s1/artifacts/big.bin", "size_bytes": len(DATA),
               "sha256": hashlib.sha256(DATA).hexdigest()}  # fmt: skip
    rid = api.post(f"{P}/artifact-reservations", {"command_id": "c1", "payload": payload}).expect(
        200
    )["reservation_id"]
    api.call("PUT", f"{P}/artifact-reservations/{rid}/body", as_=WRITER, body=DATA,
             headers={"content-type": "application/octet-stream"}).expect(200)  # fmt: skip
    ref = api.post(f"{P}/artifact-reservations/{rid}/publish", {"command_id": "c1.p"}).expect(200)
    store.close()
    out = tmp_path / "export.jsonl"
    args = ["--database", str(source), "--tenant-id", TENANT, "--out", str(out)]
    assert main(["admin", "export", *args, "--include-bodies", "--include-token-digests"]) == 0
    capsys.readouterr()
    prefix = fresh_prefix()
    flags = ["--artifact-backend", "s3", "--s3-bucket", s3.bucket, "--s3-prefix", prefix,
             "--s3-endpoint", s3.endpoint, "--s3-region", s3.region]  # fmt: skip
    assert main(["admin", "import", "--database", str(target), "--in", str(out), *flags]) == 0
    capsys.readouterr()
    config = S3Config(bucket=s3.bucket, prefix=prefix, endpoint=s3.endpoint, region=s3.region)
    bodies = S3Bodies(config)
    assert bodies.head(str(ref["generation"])) == len(DATA)
    moved_store = SqliteStore.open_file(target)
    try:
        moved_store.transaction(lambda tx: tx.bind_body_store_identity(bodies.identity))
        bound = moved_store.read(lambda tx: tx.body_store_identity())
        assert bound == bodies.identity
        app = HttpApp(moved_store, clock=FixedClock(1_700_000_000_000), bodies=bodies)
        moved = Api("s3", InProcessClient(app), app.services.identity, api.clock)
        moved.tokens.update(api.tokens)
        got = moved.post(f"{P}/artifacts/{ref['artifact_id']}/downloads", {"revision": 1})
        assert got.expect(200) == DATA
    finally:
        moved_store.close()
    assert json.loads(out.read_text().splitlines()[0])["body_store"] == "local:v1"
