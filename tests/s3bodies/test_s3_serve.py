"""`aidememo serve` and `admin gc` with `--artifact-backend s3` against SeaweedFS (OBJ-2,
OBJ-3): credentials from the environment's provider chain only, the catalog pinned to the
bucket's credential-free identity, direct uploads refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from aidememo.cli.main import main
from tests.origin.test_serve_process import ServeProcess
from tests.s3 import S3Endpoint, fresh_prefix, s3_endpoint

PROJECT = "/v1/projects/demo"


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith(("AIDEMEMO_", "AWS_")) and not name.startswith("AIDEMEMO_TEST_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    monkeypatch.setenv("AIDEMEMO_HOME", str(home))
    return home


@pytest.fixture
def token(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> str:
    path = tmp_path / "demo.token"
    assert main(["token", "new", "--out", str(path)]) == 0
    args = ["--tenant-id", "local", "--project-id", "demo", "--actor-id", "demo-agent"]
    assert main(["bootstrap", *args, "--token-file", str(path)]) == 0
    capsys.readouterr()
    return path.read_text().strip()


def _flags(s3: S3Endpoint, prefix: str) -> list[str]:
    return [
        "--artifact-backend", "s3", "--s3-bucket", s3.bucket, "--s3-prefix", prefix,
        "--s3-endpoint", s3.endpoint, "--s3-region", s3.region,
    ]  # fmt: skip


def _aws(s3: S3Endpoint) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": s3.access_key_id,
        "AWS_SECRET_ACCESS_KEY": s3.secret_access_key,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


def test_obj3_obj2_grant3_serve_with_s3_bodies(
    tmp_path: Path, home: Path, token: str, s3: S3Endpoint
) -> None:
    prefix = fresh_prefix()
    server = ServeProcess(home, tmp_path / "serve.log", *_flags(s3, prefix), environ=_aws(s3))
    try:
        with httpx.Client(
            base_url=server.url, headers={"authorization": f"Bearer {token}"}, timeout=30
        ) as http:
            payload = {"path": "sessions/s1/artifacts/a.bin", "size_bytes": 3}
            r = http.post(
                f"{PROJECT}/artifact-reservations", json={"command_id": "c1", "payload": payload}
            )
            assert r.status_code == 200, r.text
            answer = r.json()
            assert answer["transfer"]["mode"] == "grant"
            put = http.put(
                f"{PROJECT}/artifact-reservations/{answer['reservation_id']}/body",
                content=b"abc",
                headers={"content-type": "application/octet-stream"},
            )
            assert put.status_code == 409
            assert put.json()["error"]["code"] == "artifact_transfer_mode_mismatch"
            # GRANT-3 through the real process: the body goes straight to the store.
            rid = answer["reservation_id"]
            g = http.post(f"{PROJECT}/artifact-reservations/{rid}/upload-grants")
            assert g.status_code == 200, g.text
            grant = g.json()
            stored = httpx.put(grant["url"], content=b"abc", headers=grant["headers"])
            assert stored.status_code == 200
            ref = http.post(
                f"{PROJECT}/artifact-reservations/{rid}/publish", json={"command_id": "c1.p"}
            )
            assert ref.status_code == 200, ref.text
            got = http.post(
                f"{PROJECT}/artifacts/{ref.json()['artifact_id']}/downloads",
                json={"revision": 1},
            )
            assert got.status_code == 200 and got.content == b"abc"
    finally:
        server.kill()
    log = server.stderr()
    assert s3.secret_access_key not in log and "X-Amz-Signature" not in log
    # The catalog is pinned to this bucket and prefix: another prefix is refused at start-up.
    with pytest.raises(AssertionError, match="pinned to body store"):
        ServeProcess(home, tmp_path / "serve2.log", *_flags(s3, fresh_prefix()), environ=_aws(s3))


def test_obj2_admin_gc_on_s3_needs_credentials_and_the_pinned_bucket(
    home: Path, token: str, s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    prefix = fresh_prefix()
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert main(["admin", "gc", *_flags(s3, prefix)]) == 2
    assert "no AWS credentials" in capsys.readouterr().err
    for name, value in _aws(s3).items():
        monkeypatch.setenv(name, value)
    assert main(["admin", "gc", *_flags(s3, prefix)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["deleted"] == 0
    assert main(["admin", "gc", *_flags(s3, fresh_prefix())]) == 1
    assert "pinned to body store" in capsys.readouterr().err
    assert main(["admin", "gc", "--artifact-backend", "s3"]) == 2
    assert "--s3-bucket" in capsys.readouterr().err
    assert main(["admin", "gc", *_flags(s3, "bad-prefix")]) == 2
