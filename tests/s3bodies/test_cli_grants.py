"""`aidememo artifact put|get` as real processes against `aidememo serve --artifact-backend s3`
on SeaweedFS (SPEC.md GRANT-8): the CLI uploads straight to the bucket through an upload grant
and reads back through a download grant."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.cli.agent_support import Cli, Server, login, provision, write_secret
from tests.origin.test_serve_process import ServeProcess
from tests.s3 import S3Endpoint, fresh_prefix, s3_endpoint
from tests.s3bodies.test_s3_serve import _aws, _flags

PATH = "sessions/s1/artifacts/cli.bin"


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


def test_grant8_cli_put_and_get_through_grants(tmp_path: Path, s3: S3Endpoint) -> None:
    home = tmp_path / "server-home"
    home.mkdir()
    admin = write_secret(tmp_path / "admin.token", "cli-admin-" + os.urandom(16).hex())
    database = str(home / "ssot.sqlite")
    served = ServeProcess(home, tmp_path / "serve.log", "--database", database,
                          "--admin-token-file", str(admin), *_flags(s3, fresh_prefix()),
                          environ=_aws(s3))  # fmt: skip
    try:
        server = Server("s3", served.url, admin, served.kill)
        cli = Cli(tmp_path / "agent-home")
        for actor, role in (("alice", "writer"), ("rita", "reader")):
            assert login(cli, server, actor, provision(cli, server, actor, role)).code == 0
        data = os.urandom(400_000)
        source = tmp_path / "body.bin"
        source.write_bytes(data)
        ref = cli.as_("alice", "artifact", "put", PATH, str(source))
        assert ref["sha256"] == hashlib.sha256(data).hexdigest()
        out = tmp_path / "copy.bin"
        got = cli.as_("rita", "artifact", "get", PATH, "--out", str(out))
        assert got["sha256"] == ref["sha256"] and out.read_bytes() == data
    finally:
        served.kill()
    log = served.stderr()
    assert "X-Amz-Signature" not in log and s3.secret_access_key not in log
