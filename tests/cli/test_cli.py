"""The `aidememo` command line, run in-process against SQLite files under tmp_path.

Every test gets its own `AIDEMEMO_HOME` in tmp_path and no other `AIDEMEMO_*` variable, so the
real home directory is never touched.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from aidememo.cli.admin.commands import read_token_file
from aidememo.cli.main import main
from aidememo.cli.stores import describe_database
from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import MemberStatus, Role, Scope
from aidememo.service.identity import IdentityService, token_digest
from aidememo.stores.sqlite import SqliteStore
from origin.serve_command import MISSING_EXTRA, is_loopback


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("AIDEMEMO_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    monkeypatch.setenv("AIDEMEMO_HOME", str(home))
    return home


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def new_token(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    code, _, err = run(capsys, "token", "new", "--out", str(path))
    assert code == 0, err
    return path.read_text().strip()


def dump(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def bootstrap(
    capsys: pytest.CaptureFixture[str], db: Path, token: Path, *extra: str, actor: str = "a1"
) -> tuple[int, str, str]:
    return run(
        capsys,
        "bootstrap",
        "--database",
        str(db),
        "--tenant-id",
        "t1",
        "--project-id",
        "p1",
        "--actor-id",
        actor,
        "--token-file",
        str(token),
        *extra,
    )


def authenticate(db: Path, token_text: str) -> str | None:
    store = SqliteStore.open_file(db)
    try:
        caller = IdentityService(store, SystemClock(), RandomIds()).authenticate(
            token_digest(token_text)
        )
        return caller.actor_id
    except AidememoError as error:
        assert error.code is ErrorCode.AUTHENTICATION_FAILED
        return None
    finally:
        store.close()


# -- token new --------------------------------------------------------------------------------


def test_adm6_token_new_writes_64_hex_and_newline_mode_0600(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.token"
    code, out, _ = run(capsys, "token", "new", "--out", str(path))
    assert code == 0
    raw = path.read_bytes()
    assert len(raw) == 65 and raw.endswith(b"\n")
    int(raw[:64], 16)
    assert raw[:64].decode() == raw[:64].decode().lower()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(out) == {"token_file": str(path)}
    assert raw[:64].decode() not in out


def test_adm6_token_new_is_0600_whatever_the_umask(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = os.umask(0o000)
    try:
        new_token(capsys, tmp_path / "t.token")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "t.token").stat().st_mode) == 0o600


def test_adm6_token_new_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.token"
    path.write_text("keep me\n")
    code, out, err = run(capsys, "token", "new", "--out", str(path))
    assert code == 1
    assert out == ""
    assert "already exists" in err and err.count("\n") == 1
    assert path.read_text() == "keep me\n"


def test_adm6_token_new_two_tokens_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert new_token(capsys, tmp_path / "a") != new_token(capsys, tmp_path / "b")


def test_auth1_token_file_is_read_stripped_and_digest_is_sha256_of_text(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_text("  \n abc123 \n\n")
    assert read_token_file(str(path)) == "abc123"


# -- bootstrap --------------------------------------------------------------------------------


def test_boot1_bootstrap_prints_identity_and_is_idempotent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db.sqlite"
    token = tmp_path / "a1.token"
    text = new_token(capsys, token)
    code, out, err = bootstrap(capsys, db, token)
    assert code == 0, err
    first = json.loads(out)
    assert first["tenant_id"] == "t1" and first["project_id"] == "p1"
    assert first["actor_id"] == "a1" and first["role"] == "writer"
    assert first["project_epoch"]
    before = dump(db)
    code, out, err = bootstrap(capsys, db, token)
    assert code == 0, err
    assert json.loads(out) == first
    assert dump(db) == before
    assert authenticate(db, text) == "a1"


def test_adm6_bootstrap_token_text_and_digest_never_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "a1.token"
    text = new_token(capsys, token)
    _, out, err = bootstrap(capsys, tmp_path / "db.sqlite", token)
    assert text not in out + err
    assert token_digest(text).hex() not in out + err


def test_boot1_bootstrap_with_another_actor_adds_a_member(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db.sqlite"
    t1, t2 = tmp_path / "a1.token", tmp_path / "a2.token"
    text1, text2 = new_token(capsys, t1), new_token(capsys, t2)
    epoch = json.loads(bootstrap(capsys, db, t1)[1])["project_epoch"]
    code, out, err = bootstrap(capsys, db, t2, "--role", "reader", actor="a2")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["project_epoch"] == epoch and doc["actor_id"] == "a2" and doc["role"] == "reader"
    assert authenticate(db, text1) == "a1"
    assert authenticate(db, text2) == "a2"


def test_auth6_bootstrap_rotation_adds_token_then_revoke_old(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db.sqlite"
    old, new = tmp_path / "old.token", tmp_path / "new.token"
    old_text, new_text = new_token(capsys, old), new_token(capsys, new)
    assert bootstrap(capsys, db, old)[0] == 0
    assert bootstrap(capsys, db, new)[0] == 0
    assert authenticate(db, old_text) == "a1"
    assert authenticate(db, new_text) == "a1"
    code, out, err = run(
        capsys, "admin", "token", "revoke", "--database", str(db), "--token-file", str(old)
    )
    assert code == 0, err
    assert json.loads(out) == {"revoked": True}
    assert authenticate(db, old_text) is None
    assert authenticate(db, new_text) == "a1"
    # A revoked token is not reactivated by a bootstrap retry (AUTH-6).
    before = dump(db)
    code, _, err = bootstrap(capsys, db, old)
    assert code == 1 and "identity_mismatch" in err
    assert dump(db) == before


@pytest.mark.parametrize(
    ("extra", "actor", "token_name"),
    [
        (("--actor-kind", "human"), "a1", "a1.token"),  # kind differs
        (("--role", "owner"), "a1", "a1.token"),  # role differs
        (("--project-epoch", "epoch_other"), "a1", "a1.token"),  # epoch differs
        ((), "a2", "a1.token"),  # token belongs to another actor
    ],
    ids=["kind", "role", "epoch", "token_owner"],
)
def test_boot1_bootstrap_conflict_fails_with_no_change(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: tuple[str, ...],
    actor: str,
    token_name: str,
) -> None:
    db = tmp_path / "db.sqlite"
    new_token(capsys, tmp_path / "a1.token")
    assert bootstrap(capsys, db, tmp_path / "a1.token")[0] == 0
    before = dump(db)
    code, out, err = bootstrap(capsys, db, tmp_path / token_name, *extra, actor=actor)
    assert code == 1
    assert out == ""
    assert err.startswith("aidememo: error: bootstrap refused")
    assert "identity_mismatch" in err and "nothing was changed" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert dump(db) == before


def test_adm5_bootstrap_missing_token_file_is_an_error_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_env: Path
) -> None:
    missing = tmp_path / "nope.token"
    code, out, err = run(
        capsys,
        "bootstrap",
        "--tenant-id",
        "t1",
        "--project-id",
        "p1",
        "--actor-id",
        "a1",
        "--token-file",
        str(missing),
    )
    assert code == 1 and out == ""
    assert "does not exist" in err and "token new" in err
    assert not (isolated_env / "ssot.sqlite").exists()


def test_adm5_bootstrap_empty_token_file_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "empty.token"
    token.write_text(" \n")
    code, _, err = bootstrap(capsys, tmp_path / "db.sqlite", token)
    assert code == 1 and "is empty" in err


def test_id1_adm5_bootstrap_invalid_identifier_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new_token(capsys, tmp_path / "a1.token")
    code, _, err = bootstrap(capsys, tmp_path / "db.sqlite", tmp_path / "a1.token", actor="a b")
    assert code == 1
    assert "invalid_identifier" in err and err.count("\n") == 1


def test_store7_bootstrap_default_database_is_in_home_with_0700_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_env: Path
) -> None:
    new_token(capsys, tmp_path / "a1.token")
    isolated_env.mkdir(mode=0o755)
    os.chmod(isolated_env, 0o755)
    code, _, err = run(
        capsys,
        "bootstrap",
        "--tenant-id",
        "t1",
        "--project-id",
        "p1",
        "--actor-id",
        "a1",
        "--token-file",
        str(tmp_path / "a1.token"),
    )
    assert code == 0, err
    assert stat.S_IMODE(isolated_env.stat().st_mode) == 0o700
    assert stat.S_IMODE((isolated_env / "ssot.sqlite").stat().st_mode) == 0o600


def test_adm5_flags_come_from_environment_and_flags_win(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "env.sqlite"
    new_token(capsys, tmp_path / "a1.token")
    monkeypatch.setenv("AIDEMEMO_DATABASE_URL", str(db))
    monkeypatch.setenv("AIDEMEMO_TENANT_ID", "t1")
    monkeypatch.setenv("AIDEMEMO_PROJECT_ID", "p1")
    monkeypatch.setenv("AIDEMEMO_ACTOR_ID", "from-env")
    monkeypatch.setenv("AIDEMEMO_ROLE", "owner")
    monkeypatch.setenv("AIDEMEMO_TOKEN_FILE", str(tmp_path / "a1.token"))
    code, out, err = run(capsys, "bootstrap", "--actor-id", "from-flag")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["actor_id"] == "from-flag" and doc["role"] == "owner"
    assert db.exists()


def test_adm5_bad_environment_value_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIDEMEMO_PORT", "eighty")
    code, _, err = run(capsys, "serve")
    assert code == 2 and "AIDEMEMO_PORT" in err


def test_adm5_missing_required_flag_names_flag_and_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "bootstrap", "--tenant-id", "t1")
    assert code == 2
    assert "--project-id is required (or set AIDEMEMO_PROJECT_ID)" in err


def test_adm5_unreachable_postgres_url_is_one_line_without_the_password(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run(capsys, "health", "--database", "postgresql://u@127.0.0.1:1/db")
    assert code == 1 and "cannot open database postgresql://u@127.0.0.1:1/db" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    monkeypatch.setenv("AIDEMEMO_DATABASE_URL", "postgres://u:secret@127.0.0.1:1/db")
    code, _, err = run(capsys, "health")
    assert code == 1 and "secret" not in err and "Traceback" not in err


def test_adm5_describe_database_hides_password() -> None:
    shown = describe_database("postgresql://app:hunter2@db.internal:5433/aidememo")
    assert "hunter2" not in shown and "app:***@db.internal:5433" in shown


# -- admin ------------------------------------------------------------------------------------


def _member(db: Path, actor: str) -> tuple[Role, MemberStatus]:
    store = SqliteStore.open_file(db)
    try:
        m = store.read(lambda tx: tx.get_membership(Scope("t1", "p1"), actor))
    finally:
        store.close()
    assert m is not None
    return m.role, m.status


def test_auth5_admin_member_suspend_and_reactivate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db.sqlite"
    text = new_token(capsys, tmp_path / "a1.token")
    bootstrap(capsys, db, tmp_path / "a1.token")
    base = ["admin", "member", "--database", str(db), "--tenant-id", "t1", "--project-id", "p1"]
    code, out, err = run(capsys, *base, "--actor-id", "a1", "--status", "suspended")
    assert code == 0, err
    assert json.loads(out)["status"] == "suspended"
    assert _member(db, "a1") == (Role.WRITER, MemberStatus.SUSPENDED)
    assert authenticate(db, text) == "a1"  # authentication holds; authorization refuses
    code, out, _ = run(capsys, *base, "--actor-id", "a1", "--status", "active")
    assert code == 0 and _member(db, "a1") == (Role.WRITER, MemberStatus.ACTIVE)


def test_adm2_admin_member_role_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "db.sqlite"
    new_token(capsys, tmp_path / "a1.token")
    bootstrap(capsys, db, tmp_path / "a1.token")
    code, out, err = run(
        capsys,
        *("admin", "member", "--database", str(db), "--tenant-id", "t1", "--project-id", "p1"),
        *("--actor-id", "a1", "--role", "reader"),
    )
    assert code == 0, err
    assert json.loads(out) == {
        "tenant_id": "t1",
        "project_id": "p1",
        "actor_id": "a1",
        "role": "reader",
        "status": "active",
    }
    assert _member(db, "a1") == (Role.READER, MemberStatus.ACTIVE)


def test_adm5_admin_member_needs_exactly_one_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["admin", "member", "--database", str(tmp_path / "db.sqlite")]
    base += ["--tenant-id", "t1", "--project-id", "p1", "--actor-id", "a1"]
    code, _, err = run(capsys, *base)
    assert code == 2 and "exactly one of --role and --status" in err
    with pytest.raises(SystemExit) as exc:
        main([*base, "--role", "reader", "--status", "active"])
    assert exc.value.code == 2


def test_adm2_admin_member_unknown_member_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db.sqlite"
    new_token(capsys, tmp_path / "a1.token")
    bootstrap(capsys, db, tmp_path / "a1.token")
    code, _, err = run(
        capsys,
        *("admin", "member", "--database", str(db), "--tenant-id", "t1", "--project-id", "p1"),
        *("--actor-id", "ghost", "--status", "suspended"),
    )
    assert code == 1 and "resource_not_found" in err


def test_adm2_admin_token_revoke_unknown_token_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new_token(capsys, tmp_path / "a1.token")
    bootstrap(capsys, tmp_path / "db.sqlite", tmp_path / "a1.token")
    new_token(capsys, tmp_path / "stray.token")
    code, _, err = run(
        capsys,
        *("admin", "token", "revoke", "--database", str(tmp_path / "db.sqlite")),
        *("--token-file", str(tmp_path / "stray.token")),
    )
    assert code == 1 and "not bound" in err


# -- health, version, serve refusals ----------------------------------------------------------


def test_adm5_health_reports_mode_schema_and_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db.sqlite"
    code, out, err = run(capsys, "health", "--database", str(db))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "ok" and doc["mode"] == "single_node"
    assert isinstance(doc["schema_version"], int) and doc["schema_version"] >= 1
    assert doc["database"] == str(db)


def test_adm5_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("aidememo ")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_deploy7_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_deploy7_serve_refuses_non_loopback_host(
    capsys: pytest.CaptureFixture[str], isolated_env: Path
) -> None:
    code, _, err = run(capsys, "serve", "--host", "0.0.0.0")
    assert code == 2
    assert "--allow-insecure-http" in err and err.count("\n") == 1
    assert not isolated_env.exists()  # refused before anything was created


def test_adm5_serve_without_origin_extra_says_how_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> object:
        return None if name == "uvicorn" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    code, _, err = run(capsys, "serve")
    assert code == 2 and MISSING_EXTRA in err
