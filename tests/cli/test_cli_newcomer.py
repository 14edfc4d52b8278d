"""The errors a newcomer meets first: an admin command pointed at a SQLite file that does not
exist is refused and creates nothing (only bootstrap, admin migrate and admin import create a
database), and a loopback `--url` without a scheme names the http:// URL to give instead of
failing in a TLS handshake."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from aidememo.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def token(capsys: pytest.CaptureFixture[str], path: Path) -> Path:
    assert main(["token", "new", "--out", str(path)]) == 0
    capsys.readouterr()
    return path


def _admin_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    member_token = token(capsys, tmp_path / "m.token")
    return [
        ["admin", "member", "--tenant-id", "t1", "--project-id", "p1", "--actor-id", "a1",
         "--status", "suspended"],
        ["admin", "token", "revoke", "--token-file", str(member_token)],
        ["admin", "export", "--tenant-id", "t1", "--out", str(tmp_path / "x.jsonl")],
        ["admin", "delete-tenant", "--tenant-id", "t1", "--confirm", "t1"],
    ]  # fmt: skip


def test_cli1_admin_commands_refuse_a_missing_sqlite_file_and_create_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo" / "db.sqlite"
    for argv in _admin_commands(tmp_path, capsys):
        code, out, err = run(capsys, *argv, "--database", str(missing))
        assert code == 2, (argv, err)
        assert f"database {missing} does not exist (nothing was created)" in err, err
        assert "aidememo bootstrap" in err and not out
        assert len(err.strip().splitlines()) == 1
    assert not missing.parent.exists()
    assert not (tmp_path / "x.jsonl").exists()


def test_cli1_admin_commands_refuse_a_missing_default_database_without_making_the_home(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_env: Path
) -> None:
    for argv in _admin_commands(tmp_path, capsys):
        code, _, err = run(capsys, *argv)
        assert code == 2 and "does not exist" in err, (argv, err)
    assert not isolated_env.exists()


def test_cli1_bootstrap_migrate_and_import_still_create_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "new" / "db.sqlite"
    member = token(capsys, tmp_path / "a1.token")
    code, _, err = run(capsys, "bootstrap", "--database", str(db), "--tenant-id", "t1",
                       "--project-id", "p1", "--actor-id", "a1",
                       "--token-file", str(member))  # fmt: skip
    assert code == 0 and db.exists(), err
    export = tmp_path / "t1.jsonl"
    code, _, err = run(capsys, "admin", "export", "--database", str(db), "--tenant-id", "t1",
                       "--out", str(export))  # fmt: skip
    assert code == 0, err
    migrated = tmp_path / "migrated.sqlite"
    assert run(capsys, "admin", "migrate", "--database", str(migrated))[0] == 0
    assert migrated.exists()
    imported = tmp_path / "imported.sqlite"
    code, _, err = run(capsys, "admin", "import", "--database", str(imported), "--in", str(export))
    assert code == 0 and imported.exists(), err
    # The refused commands work once the file exists.
    code, _, err = run(capsys, "admin", "delete-tenant", "--database", str(imported),
                       "--tenant-id", "t1", "--confirm", "t1")  # fmt: skip
    assert code == 0, err


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "127.1.2.3"])
def test_cli1_loopback_url_without_a_scheme_suggests_http(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str
) -> None:
    admin_token = token(capsys, tmp_path / "admin.token")
    with socket.socket() as probe:  # a port nobody listens on: no request may be attempted
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"{host}:{port}"
    code, out, err = run(capsys, "admin", "delete-tenant", "--tenant-id", "t1", "--confirm",
                         "t1", "--url", url, "--admin-token-file", str(admin_token))  # fmt: skip
    assert code == 2 and not out
    assert f"--url {url} has no scheme" in err and f"give http://{url} " in err, err
    assert "TLS failure" not in err and "cannot reach" not in err


def test_cli1_non_loopback_url_without_a_scheme_is_still_https(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aidememo.cli.admin.remote import AdminClient

    client = AdminClient("admin.example.test", "t")
    assert client.secure and client.url == "https://admin.example.test"


def test_mcp8_mcp_install_host_is_not_serves_listen_host(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    isolated_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`AIDEMEMO_HOST=0.0.0.0` (serve's listen address) leaves `mcp install` alone; its agent
    host comes from `--host` or `AIDEMEMO_MCP_HOST`."""
    from aidememo.cli.agent import profiles

    token_file = token(capsys, tmp_path / "w.token")
    digest = profiles.token_sha256(token_file.read_text().strip())
    profile = profiles.Profile("w", "http://127.0.0.1:9", "t", "p", "a", "writer",
                               str(token_file), digest)  # fmt: skip
    profiles.save({"w": profile})
    monkeypatch.setenv("AIDEMEMO_HOST", "0.0.0.0")
    code, out, err = run(capsys, "mcp", "install", "--host", "codex", "--profile", "w")
    assert code == 0 and "[mcp_servers.aidememo]" in out, err
    monkeypatch.setenv("AIDEMEMO_MCP_HOST", "claude-code")
    code, out, err = run(capsys, "mcp", "install", "--profile", "w")
    assert code == 0 and '"mcpServers"' in out, err
    from aidememo.cli.main import build_parser

    serve = build_parser().parse_args(["serve"])
    assert any(o.env == "AIDEMEMO_HOST" for o in serve._opts)
