"""`aidememo admin export|import|delete-tenant` with `--database`, and the admin commands'
`--url URL --admin-token-file F` mode against a real `aidememo serve --admin-token-file`
subprocess (SPEC.md ARC-*)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aidememo.cli.main import main
from tests import pg
from tests.origin.test_serve_process import ServeProcess

TENANT, PROJECT = "t1", "p1"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """Exit status, stdout decoded as JSON when there is any, stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def new_token(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    assert main(["token", "new", "--out", str(path)]) == 0
    capsys.readouterr()
    return path.read_text().strip()


def boot(
    capsys: pytest.CaptureFixture[str],
    target: list[str],
    token: Path,
    *,
    tenant: str = TENANT,
    project: str = PROJECT,
    actor: str = "a1",
    extra: tuple[str, ...] = (),
) -> tuple[int, Any, str]:
    return run(capsys, "bootstrap", *target, "--tenant-id", tenant, "--project-id", project,
               "--actor-id", actor, "--token-file", str(token), *extra)  # fmt: skip


def dump(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def history(path: Path) -> list[dict[str, Any]]:
    """An export's records without the export time, the epochs and the manifest."""
    out = []
    for line in path.read_bytes().splitlines():
        record = json.loads(line)
        record.pop("exported_at_ms", None)
        record.pop("project_epoch", None)
        if record["type"] != "manifest":
            out.append(record)
    return out


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("aidememo: error: "), err
    return err


def provisioned(capsys: pytest.CaptureFixture[str], tmp_path: Path, db: Path) -> Path:
    """A SQLite database with tenant t1 (projects p1 and p2, two actors) and tenant keep."""
    tokens = [tmp_path / f"m{i}.token" for i in range(3)]
    for path in tokens:
        new_token(capsys, path)
    target = ["--database", str(db)]
    assert boot(capsys, target, tokens[0])[0] == 0
    assert boot(capsys, target, tokens[1], actor="a2", extra=("--role", "reader"))[0] == 0
    assert boot(capsys, target, tokens[1], actor="a2", project="p2")[0] == 0
    assert boot(capsys, target, tokens[2], tenant="keep", actor="keeper")[0] == 0
    return tokens[0]


# -- --database mode --------------------------------------------------------------------------


def test_adm6_arc1_export_writes_a_new_0600_file_atomically_and_prints_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "a.sqlite"
    provisioned(capsys, tmp_path, db)
    out = tmp_path / "exports" / "t1.jsonl"
    out.parent.mkdir()
    old = os.umask(0o000)
    try:
        code, summary, err = run(capsys, "admin", "export", "--database", str(db),
                                 "--tenant-id", TENANT, "--out", str(out))  # fmt: skip
    finally:
        os.umask(old)
    assert code == 0, err
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert os.listdir(out.parent) == ["t1.jsonl"]  # no temporary file left behind
    lines = out.read_bytes().splitlines(keepends=True)
    manifest = json.loads(lines[-1])
    assert manifest["lines_sha256"] == hashlib.sha256(b"".join(lines[:-1])).hexdigest()
    assert summary["counts"] == manifest["counts"]
    assert summary["counts"]["project"] == 2 and summary["counts"]["actor"] == 2
    assert "token" not in summary["counts"]
    assert (summary["tenant_id"], summary["project_id"], summary["out"]) == (
        TENANT,
        None,
        str(out),
    )
    assert summary["bytes"] == out.stat().st_size
    assert summary["lines_sha256"] == manifest["lines_sha256"]


def test_arc1_export_options_project_and_token_digests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "a.sqlite"
    token = provisioned(capsys, tmp_path, db)
    base = ["admin", "export", "--database", str(db), "--tenant-id", TENANT]
    code, summary, err = run(capsys, *base, "--include-token-digests", "--out",
                             str(tmp_path / "all.jsonl"))  # fmt: skip
    assert code == 0, err
    assert summary["counts"]["token"] == 2 and summary["include_token_digests"] is True
    digest = hashlib.sha256(token.read_text().strip().encode()).hexdigest()
    assert digest.encode() in (tmp_path / "all.jsonl").read_bytes()
    assert token.read_text().strip().encode() not in (tmp_path / "all.jsonl").read_bytes()
    code, summary, err = run(capsys, *base, "--project-id", "p2", "--out",
                             str(tmp_path / "p2.jsonl"))  # fmt: skip
    assert code == 0, err
    assert summary["project_id"] == "p2"
    assert summary["counts"]["project"] == 1 and summary["counts"]["actor"] == 1


def test_adm6_export_refuses_to_overwrite_and_unknown_tenants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "a.sqlite"
    provisioned(capsys, tmp_path, db)
    out = tmp_path / "t1.jsonl"
    out.write_text("keep me\n")
    base = ["admin", "export", "--database", str(db)]
    code, summary, err = run(capsys, *base, "--tenant-id", TENANT, "--out", str(out))
    assert (code, summary) == (1, None)
    assert "already exists" in one_line(err)
    assert out.read_text() == "keep me\n"
    missing = tmp_path / "none.jsonl"
    code, _, err = run(capsys, *base, "--tenant-id", "nobody", "--out", str(missing))
    assert code == 1 and "resource_not_found" in one_line(err)
    assert os.listdir(tmp_path).count("none.jsonl") == 0
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".part")]


def test_arc2_import_into_a_fresh_database_then_refuses_existing_scopes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, fresh = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    token = provisioned(capsys, tmp_path, db)
    out = tmp_path / "t1.jsonl"
    assert run(capsys, "admin", "export", "--database", str(db), "--tenant-id", TENANT,
               "--include-token-digests", "--out", str(out))[0] == 0  # fmt: skip
    code, summary, err = run(capsys, "admin", "import", "--database", str(fresh), "--in", str(out))
    assert code == 0, err
    assert summary["tenant_id"] == TENANT
    assert set(summary["project_epochs"]) == {"p1", "p2"}
    assert summary["counts"]["token"] == 2 and summary["counts"]["membership"] == 3
    # The imported digest authenticates the same member, with a new epoch.
    code, again, _ = boot(capsys, ["--database", str(fresh)], token)
    assert code == 0 and again["project_epoch"] == summary["project_epochs"]["p1"]
    before = dump(fresh)
    code, summary, err = run(capsys, "admin", "import", "--database", str(fresh), "--in", str(out))
    assert (code, summary) == (1, None)
    assert "resource_already_exists" in one_line(err) and "nothing was changed" in err
    assert dump(fresh) == before
    # And a second export of the import carries the same records.
    back = tmp_path / "back.jsonl"
    assert run(capsys, "admin", "export", "--database", str(fresh), "--tenant-id", TENANT,
               "--include-token-digests", "--out", str(back))[0] == 0  # fmt: skip
    assert history(back) == history(out)


def test_arc2_import_refuses_missing_and_tampered_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, fresh = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    provisioned(capsys, tmp_path, db)
    out = tmp_path / "t1.jsonl"
    assert run(capsys, "admin", "export", "--database", str(db), "--tenant-id", TENANT,
               "--out", str(out))[0] == 0  # fmt: skip
    code, _, err = run(capsys, "admin", "import", "--database", str(fresh),
                       "--in", str(tmp_path / "missing.jsonl"))  # fmt: skip
    assert code == 1 and "does not exist" in one_line(err)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(out.read_bytes().replace(b'"role":"reader"', b'"role":"owner"'))
    code, _, err = run(capsys, "admin", "import", "--database", str(fresh), "--in", str(bad))
    assert code == 1 and "invalid_command" in one_line(err)
    assert run(capsys, "health", "--database", str(fresh))[0] == 0
    store = sqlite3.connect(fresh)
    try:
        assert store.execute("SELECT count(*) FROM tenants").fetchone() == (0,)
    finally:
        store.close()


def test_arc4_delete_tenant_needs_confirmation_and_prints_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "a.sqlite"
    provisioned(capsys, tmp_path, db)
    keep = tmp_path / "keep.jsonl"
    assert run(capsys, "admin", "export", "--database", str(db), "--tenant-id", "keep",
               "--out", str(keep))[0] == 0  # fmt: skip
    before = dump(db)
    base = ["admin", "delete-tenant", "--database", str(db), "--tenant-id", TENANT]
    code, _, err = run(capsys, *base, "--confirm", "keep")
    assert code == 2 and "--confirm" in one_line(err)
    assert dump(db) == before
    code, summary, err = run(capsys, *base, "--confirm", TENANT)
    assert code == 0, err
    removed = summary["removed"]
    assert summary["tenant_id"] == TENANT
    assert (removed["tenants"], removed["projects"], removed["actors"]) == (1, 2, 2)
    assert (removed["memberships"], removed["token_bindings"]) == (3, 2)
    code, _, err = run(capsys, *base, "--confirm", TENANT)
    assert code == 1 and "resource_not_found" in one_line(err)
    again = tmp_path / "keep2.jsonl"
    assert run(capsys, "admin", "export", "--database", str(db), "--tenant-id", "keep",
               "--out", str(again))[0] == 0  # fmt: skip
    assert history(again) == history(keep)


def test_adm5_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["admin", "export", "--database", "x.sqlite", "--url", "https://example.invalid",
              "--tenant-id", TENANT, "--out", "x"])  # fmt: skip
    assert exit_.value.code == 2
    capsys.readouterr()
    code, _, err = run(capsys, "admin", "export", "--tenant-id", TENANT)
    assert code == 2 and "--out is required" in one_line(err)
    code, _, err = run(capsys, "admin", "delete-tenant", "--url", "https://example.invalid",
                       "--tenant-id", TENANT, "--confirm", TENANT)  # fmt: skip
    assert code == 2 and "--admin-token-file" in one_line(err)
    admin = tmp_path / "admin.token"
    new_token(capsys, admin)
    for url in ("http://192.0.2.1:3030", "ftp://example.invalid", "https://"):
        code, _, err = run(capsys, "admin", "delete-tenant", "--url", url, "--admin-token-file",
                           str(admin), "--tenant-id", TENANT, "--confirm", TENANT)  # fmt: skip
        assert code == 2, err
        one_line(err)
    remote = ["--url", "https://example.invalid", "--admin-token-file", str(admin)]
    code, _, err = run(capsys, "admin", "import", *remote, "--in", str(tmp_path / "none"))
    assert code == 1 and "does not exist" in one_line(err)


def test_adm4_import_over_the_request_limit_is_refused_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = tmp_path / "admin.token"
    new_token(capsys, admin)
    huge = tmp_path / "huge.jsonl"
    with open(huge, "wb") as handle:
        handle.truncate(256 * 1024 * 1024 + 1)  # sparse
    # A loopback port nobody listens on: had it tried, the error would be "cannot reach".
    code, _, err = run(capsys, "admin", "import", "--url", "http://127.0.0.1:9",
                       "--admin-token-file", str(admin), "--in", str(huge))  # fmt: skip
    assert code == 1 and "--database" in one_line(err) and "cannot reach" not in err


def test_deploy7_serve_takes_the_admin_token_file_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import origin.serve_command

    seen: dict[str, Any] = {}
    monkeypatch.setattr(origin.serve_command, "run_serve", lambda **kw: seen.update(kw) or 0)
    admin = tmp_path / "admin.token"
    text = new_token(capsys, admin)
    monkeypatch.setenv("AIDEMEMO_ADMIN_TOKEN_FILE", str(admin))
    assert main(["serve"]) == 0
    assert seen["admin_token_sha256"] == hashlib.sha256(text.encode()).digest()
    monkeypatch.delenv("AIDEMEMO_ADMIN_TOKEN_FILE")
    assert main(["serve"]) == 0
    assert seen["admin_token_sha256"] is None
    code, _, err = run(capsys, "serve", "--admin-token-file", str(tmp_path / "none"))
    assert code == 1 and "does not exist" in one_line(err)


@pytest.mark.postgres
def test_arc5_postgres_export_import_into_sqlite_and_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pg.fresh_database() as source, pg.fresh_database() as back:
        token = tmp_path / "a.token"
        new_token(capsys, token)
        assert boot(capsys, ["--database", source.url], token)[0] == 0
        first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
        common = ["--tenant-id", TENANT, "--include-token-digests"]
        assert run(capsys, "admin", "export", "--database", source.url, *common,
                   "--out", str(first))[0] == 0  # fmt: skip
        middle = str(tmp_path / "middle.sqlite")
        assert run(capsys, "admin", "import", "--database", middle, "--in", str(first))[0] == 0
        assert run(capsys, "admin", "export", "--database", middle, *common,
                   "--out", str(second))[0] == 0  # fmt: skip
        code, _, err = run(capsys, "admin", "import", "--database", back.url, "--in", str(second))
        assert code == 0, err
        assert history(second) == history(first)
        code, removed, err = run(capsys, "admin", "delete-tenant", "--database", back.url,
                                 "--tenant-id", TENANT, "--confirm", TENANT)  # fmt: skip
        assert code == 0 and removed["removed"]["token_bindings"] == 1, err


# -- --url mode against a real `aidememo serve` -----------------------------------------------


class Origin:
    """`aidememo serve --admin-token-file` on a SQLite file, and its admin token file."""

    def __init__(self, folder: Path, *, admin: bool = True) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.admin_file = folder / "admin.token"
        self.admin_file.write_text(os.urandom(32).hex() + "\n")
        self.admin_file.chmod(0o600)
        self.db = folder / "origin.sqlite"
        extra = ["--database", str(self.db)]
        if admin:
            extra += ["--admin-token-file", str(self.admin_file)]
        self.server = ServeProcess(folder / "home", folder / "serve.log", *extra)
        self.url = self.server.url

    def target(self, admin_file: Path | None = None) -> list[str]:
        return ["--url", self.url, "--admin-token-file", str(admin_file or self.admin_file)]

    def get(self, path: str, token: Path) -> int:
        headers = {"authorization": f"Bearer {token.read_text().strip()}"}
        return httpx.get(self.url + path, headers=headers, timeout=10).status_code

    def post(self, path: str, token: Path, body: dict[str, Any]) -> int:
        headers = {"authorization": f"Bearer {token.read_text().strip()}"}
        return httpx.post(self.url + path, headers=headers, json=body, timeout=30).status_code


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Origin]:
    running = Origin(tmp_path_factory.mktemp("origin"))
    try:
        yield running
    finally:
        running.server.kill()


def test_adm2_url_bootstrap_sends_the_digest_and_is_idempotent(
    origin: Origin, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "m.token"
    text = new_token(capsys, token)
    code, first, err = boot(capsys, origin.target(), token, tenant="url_boot")
    assert code == 0, err
    assert first["tenant_id"] == "url_boot" and first["role"] == "writer"
    assert text not in json.dumps(first)
    assert origin.get(f"/v1/projects/{PROJECT}/identity", token) == 200
    assert boot(capsys, origin.target(), token, tenant="url_boot") == (0, first, "")
    code, out, err = boot(capsys, origin.target(), token, tenant="url_boot",
                          extra=("--role", "reader"))  # fmt: skip
    assert (code, out) == (1, None)
    assert "identity_mismatch" in one_line(err) and text not in err
    # The server keeps the digest only (AUTH-1): the token text is nowhere in its database.
    assert text.encode() not in origin.db.read_bytes()


def test_adm2_url_member_changes_and_revocation_take_effect(
    origin: Origin, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "m.token"
    new_token(capsys, token)
    assert boot(capsys, origin.target(), token, tenant="url_member")[0] == 0
    identity = f"/v1/projects/{PROJECT}/identity"
    member = ["admin", "member", *origin.target(), "--tenant-id", "url_member",
              "--project-id", PROJECT, "--actor-id", "a1"]  # fmt: skip
    code, out, err = run(capsys, *member, "--status", "suspended")
    assert code == 0, err
    assert out["status"] == "suspended"
    assert origin.get(identity, token) == 403
    assert run(capsys, *member, "--status", "active")[0] == 0
    assert origin.get(identity, token) == 200
    nobody = [*member[:-1], "nobody", "--role", "reader"]
    code, _, err = run(capsys, *nobody)
    assert code == 1 and "resource_not_found" in one_line(err)
    revoke = ["admin", "token", "revoke", *origin.target(), "--token-file", str(token)]
    assert run(capsys, *revoke) == (0, {"revoked": True}, "")
    assert origin.get(identity, token) == 401
    other = tmp_path / "other.token"
    new_token(capsys, other)
    code, _, err = run(capsys, "admin", "token", "revoke", *origin.target(),
                       "--token-file", str(other))  # fmt: skip
    assert code == 1 and "resource_not_found" in one_line(err)


def test_adm1_url_admin_token_rules(
    origin: Origin, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    member = tmp_path / "m.token"
    new_token(capsys, member)
    assert boot(capsys, origin.target(), member, tenant="url_rules")[0] == 0
    wrong = tmp_path / "wrong.token"
    new_token(capsys, wrong)
    out = tmp_path / "x.jsonl"
    export = ["admin", "export", "--tenant-id", "url_rules", "--out", str(out)]
    code, _, err = run(capsys, *export, *origin.target(wrong))
    assert code == 1 and "authentication_failed" in one_line(err)
    code, _, err = run(capsys, *export, *origin.target(member))
    assert code == 1 and "admin_required" in one_line(err)
    assert not out.exists()
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".part")]
    # A loopback URL without a scheme is refused with the http:// URL to give instead; an
    # explicit https:// to the plain local server fails its TLS handshake with the same hint.
    host = origin.url.removeprefix("http://")
    token_file = ["--admin-token-file", str(origin.admin_file)]
    code, _, err = run(capsys, *export, "--url", host, *token_file)
    assert code == 2 and f"give http://{host} " in one_line(err), err
    code, _, err = run(capsys, *export, "--url", "https://" + host, *token_file)
    assert code == 1 and "TLS" in one_line(err) and f"try http://{host}" in one_line(err), err
    assert not out.exists()


def test_adm3_url_export_import_and_delete_tenant(
    origin: Origin, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = "url_archive"
    token = tmp_path / "m.token"
    new_token(capsys, token)
    assert boot(capsys, origin.target(), token, tenant=tenant)[0] == 0
    p = f"/v1/projects/{PROJECT}"
    session = {"command_id": "c_s", "payload": {"session_id": "s1", "topic": "t"}}
    assert origin.post(f"{p}/sessions", token, session) == 200
    chunk = "lorem ipsum dolor sit amet " * 2_000  # about 54 KB per fact
    for i in range(24):
        payload = {"fact_id": f"f{i}", "session_id": "s1", "content": f"{chunk} {i}"}
        fact = {"command_id": f"c_f{i}", "payload": payload}
        assert origin.post(f"{p}/facts", token, fact) == 200
    out = tmp_path / "archive.jsonl"
    code, summary, err = run(capsys, "admin", "export", *origin.target(), "--tenant-id", tenant,
                             "--include-token-digests", "--out", str(out))  # fmt: skip
    assert code == 0, err
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert summary["bytes"] == out.stat().st_size > 1024 * 1024
    assert summary["counts"]["resource"] == 25 and summary["counts"]["token"] == 1
    # The same export through the database reads the same records.
    local = tmp_path / "local.jsonl"
    assert run(capsys, "admin", "export", "--database", str(origin.db), "--tenant-id", tenant,
               "--include-token-digests", "--out", str(local))[0] == 0  # fmt: skip
    assert history(local) == history(out)
    code, _, err = run(capsys, "admin", "import", *origin.target(), "--in", str(out))
    assert code == 1 and "resource_already_exists" in one_line(err)
    delete = ["admin", "delete-tenant", *origin.target(), "--tenant-id", tenant]
    code, _, err = run(capsys, *delete, "--confirm", "other")
    assert code == 2 and "--confirm" in one_line(err)
    assert origin.get(f"{p}/identity", token) == 200
    code, answer, err = run(capsys, *delete, "--confirm", tenant)
    assert code == 0, err
    assert answer["removed"]["resources"] == 25 and answer["removed"]["tenants"] == 1
    assert origin.get(f"{p}/identity", token) == 401
    code, _, err = run(capsys, *delete, "--confirm", tenant)
    assert code == 1 and "resource_not_found" in one_line(err)
    # The >1 MiB file goes back as one streamed ndjson body; the digest works again.
    code, imported, err = run(capsys, "admin", "import", *origin.target(), "--in", str(out))
    assert code == 0, err
    assert imported["counts"]["resource"] == 25 and set(imported["project_epochs"]) == {PROJECT}
    assert origin.get(f"{p}/identity", token) == 200
    again = tmp_path / "again.jsonl"
    assert run(capsys, "admin", "export", *origin.target(), "--tenant-id", tenant,
               "--include-token-digests", "--out", str(again))[0] == 0  # fmt: skip
    assert history(again) == history(out)


def test_adm1_url_admin_routes_are_disabled_without_an_admin_token_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    closed = Origin(tmp_path / "closed", admin=False)
    try:
        token = tmp_path / "m.token"
        new_token(capsys, token)
        code, _, err = boot(capsys, closed.target(), token)
        assert code == 1 and "admin_disabled" in one_line(err)
        assert "--admin-token-file" in one_line(err)
    finally:
        closed.server.kill()
