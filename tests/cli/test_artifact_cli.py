"""`aidememo artifact put|get|resolve|abort` as real processes against a SQLite origin and the
edge double (SPEC.md ART-2..ART-6, CLI-2), through `aidememo.client`'s `Client.artifacts`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.agent_support import Cli, Server, login, provision, start_server

PATH = "sessions/s1/artifacts/report.bin"


@pytest.fixture(params=["sqlite", "edge"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    with start_server(request.param, tmp_path) as served:
        yield served


@pytest.fixture
def cli(tmp_path: Path, server: Server) -> Cli:
    cli = Cli(tmp_path / "agent-home")
    for actor, role in (("alice", "writer"), ("rita", "reader")):
        assert login(cli, server, actor, provision(cli, server, actor, role)).code == 0
    return cli


def test_art4_art6_put_a_file_and_stdin_then_get_and_resolve(cli: Cli, tmp_path: Path) -> None:
    data = os.urandom(300_000)
    source = tmp_path / "report.bin"
    source.write_bytes(data)
    first = cli.as_("alice", "artifact", "put", PATH, str(source))
    assert first["revision"] == 1 and first["size_bytes"] == len(data)
    out = tmp_path / "copy.bin"
    got = cli.as_("rita", "artifact", "get", PATH, "--out", str(out))
    assert got["sha256"] == first["sha256"] and out.read_bytes() == data
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    second = cli.as_("alice", "artifact", "put", PATH, "-", "--content-type", "text/plain",
                     stdin="replaced\n")  # fmt: skip
    assert second["revision"] == 2 and second["artifact_id"] == first["artifact_id"]
    meta = cli.as_("rita", "artifact", "resolve", PATH)
    assert (meta["revision"], meta["content_type"]) == (2, "text/plain")
    plain = cli.run("artifact", "get", PATH, "--profile", "rita")
    assert plain.code == 0 and plain.out == "replaced\n"
    older = cli.run("artifact", "get", PATH, "--revision", "1", "--out", str(tmp_path / "v1"),
                    "--profile", "rita")  # fmt: skip
    assert older.code == 0 and (tmp_path / "v1").read_bytes() == data


def test_art2_art5_refusals_are_exit_1_with_the_servers_code(cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "x"
    source.write_bytes(b"x")
    denied = cli.run("artifact", "put", PATH, str(source), "--profile", "rita")
    assert denied.code == 1 and "project_unauthorized" in denied.err
    bad = cli.run("artifact", "put", "../etc/passwd", str(source), "--profile", "alice")
    assert bad.code == 1 and "invalid_artifact_path" in bad.err
    missing = cli.run("artifact", "resolve", PATH, "--profile", "rita")
    assert missing.code == 1 and "artifact_not_found" in missing.err
    gone = cli.run("artifact", "abort", "res_missing", "--profile", "alice")
    assert gone.code == 1 and "artifact_not_found" in gone.err


def test_ho9_handoff_return_names_the_result_artifact(
    cli: Cli, server: Server, tmp_path: Path
) -> None:
    assert login(cli, server, "bob", provision(cli, server, "bob", "writer")).code == 0
    cli.as_("alice", "session", "new", "one", "--id", "s1")
    cli.as_("alice", "handoff", "send", "--session", "s1", "--to", "bob", "--id", "h1")
    cli.as_("bob", "handoff", "accept", "h1")
    cli.as_("bob", "fact", "add", "--session", "s1", "--id", "f-done", "done")
    source = tmp_path / "result.json"
    source.write_bytes(b'{"ok": true}\n')
    ref = cli.as_("bob", "artifact", "put", "handoffs/h1/result.json", str(source))
    assert cli.as_("bob", "handoff", "status", "h1")["record"]["status"] == "accepted"
    returned = cli.as_("bob", "handoff", "return", "h1", "--result-fact", "f-done",
                       "--result-artifact", ref["artifact_id"])  # fmt: skip
    assert returned["recovered"] is False
    record = cli.as_("alice", "handoff", "status", "h1")["record"]
    assert (record["status"], record["result_artifact_id"]) == ("completed", ref["artifact_id"])
    text = cli.ok("handoff", "status", "h1", "--profile", "alice").out
    assert ref["artifact_id"] in text
    missing = cli.run("handoff", "return", "h1", "--result-fact", "f-done",
                      "--result-artifact", "art_" + "0" * 32, "--profile", "bob")  # fmt: skip
    assert missing.code == 1 and "artifact_not_found" in missing.err


def test_art6_get_revision_out_reports_the_bytes_written(cli: Cli, tmp_path: Path) -> None:
    """`get --revision 1 --out F` reports revision 1's size and digest, not the current one's
    (text and --json); `--out -` writes to stdout and creates no file named `-`."""
    import hashlib

    first, second = b"first body, longer than the second\n", b"second\n"
    (tmp_path / "a").write_bytes(first)
    (tmp_path / "b").write_bytes(second)
    cli.as_("alice", "artifact", "put", PATH, str(tmp_path / "a"))
    cli.as_("alice", "artifact", "put", PATH, str(tmp_path / "b"))
    older = cli.as_("rita", "artifact", "get", PATH, "--revision", "1",
                    "--out", str(tmp_path / "v1"))  # fmt: skip
    assert (older["revision"], older["size_bytes"]) == (1, len(first))
    assert older["sha256"] == hashlib.sha256(first).hexdigest()
    assert "content_type" not in older  # the current revision's type is not revision 1's
    text = cli.run("artifact", "get", PATH, "--revision", "1", "--out", str(tmp_path / "v1b"),
                   "--profile", "rita")  # fmt: skip
    assert text.code == 0 and f"wrote {len(first)} bytes of revision 1" in text.out
    assert hashlib.sha256(first).hexdigest() in text.out
    current = cli.as_("rita", "artifact", "get", PATH, "--out", str(tmp_path / "v2"))
    assert (current["revision"], current["size_bytes"]) == (2, len(second))
    dash = cli.run("artifact", "get", PATH, "--out", "-", "--profile", "rita")
    assert dash.code == 0 and dash.out == second.decode()
    assert not (cli.home.parent / "-").exists()
