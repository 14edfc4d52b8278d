"""The command line and `aidememo serve` on PostgreSQL: `admin migrate`, `bootstrap` and
`health` with `--database` or `AIDEMEMO_DATABASE_URL`, and a real server process whose
/health reports `mode: "postgres"`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aidememo.cli.errors import CliError
from aidememo.cli.main import main
from aidememo.cli.stores import open_store
from aidememo.stores.postgres import SCHEMA_VERSION
from tests import pg
from tests.origin.test_serve_process import ServeProcess

pytestmark = pytest.mark.postgres


@pytest.fixture
def empty_db() -> Iterator[pg.Database]:
    with pg.fresh_database(migrated=False) as database:
        yield database


def _json(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    out = capsys.readouterr().out.strip().splitlines()[-1]
    result: dict[str, object] = json.loads(out)
    return result


def test_store8_adm5_admin_migrate_bootstrap_and_health_from_the_environment(
    empty_db: pg.Database,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AIDEMEMO_HOME", str(tmp_path / "home"))
    assert main(["admin", "migrate", "--database", empty_db.url]) == 0
    first = _json(capsys)
    assert (first["schema_version_before"], first["schema_version"]) == (0, SCHEMA_VERSION)
    assert main(["admin", "migrate", "--database", empty_db.url]) == 0
    assert _json(capsys)["schema_version_before"] == SCHEMA_VERSION
    monkeypatch.setenv("AIDEMEMO_DATABASE_URL", empty_db.url)
    token = tmp_path / "t.token"
    assert main(["token", "new", "--out", str(token)]) == 0
    boot = ["bootstrap", "--tenant-id", "t1", "--project-id", "p1", "--actor-id", "a1"]
    assert main([*boot, "--token-file", str(token)]) == 0
    assert _json(capsys)["project_id"] == "p1"
    assert main([*boot, "--token-file", str(token)]) == 0  # idempotent
    assert main(["health"]) == 0
    health = _json(capsys)
    assert (health["mode"], health["schema_version"]) == ("postgres", SCHEMA_VERSION)


def test_adm5_open_store_names_the_extra_when_psycopg_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(CliError) as err:
        open_store("postgresql://nobody@127.0.0.1:1/none")
    assert "pip install 'aidememo[origin]'" in err.value.message


@pytest.mark.timeout(120)
def test_store8_serve_on_postgres_migrates_at_start_and_reports_postgres(
    empty_db: pg.Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "t.token"
    assert main(["token", "new", "--out", str(token)]) == 0
    server = ServeProcess(tmp_path / "home", tmp_path / "serve.log", "--database", empty_db.url)
    try:
        health = httpx.get(f"{server.url}/health", timeout=5).json()
        assert (health["mode"], health["schema_version"]) == ("postgres", SCHEMA_VERSION)
        boot = ["bootstrap", "--database", empty_db.url, "--tenant-id", "t1"]
        boot += ["--project-id", "p1", "--actor-id", "a1", "--token-file", str(token)]
        assert main(boot) == 0
        auth = {"authorization": f"Bearer {token.read_text().strip()}"}
        base = f"{server.url}/v1/projects/p1"
        body = {"command_id": "cmd_s", "payload": {"session_id": "s1", "topic": "pg"}}
        assert httpx.post(f"{base}/sessions", json=body, headers=auth, timeout=5).is_success
        fact = {
            "command_id": "cmd_f",
            "payload": {"fact_id": "f1", "session_id": "s1", "content": "postgres 서버"},
        }
        reply = httpx.post(f"{base}/facts", json=fact, headers=auth, timeout=5)
        assert reply.status_code == 200 and reply.json()["project_seq"] == 2
        query = {"q": "서버", "mode": "lexical"}  # the lexical index is the head (SRCH-1)
        found = httpx.get(f"{base}/search", params=query, headers=auth, timeout=5)
        assert [r["fact_id"] for r in found.json()["results"]] == ["f1"]
        assert found.json()["index_seq"] == 2
        code, _ = server.terminate()
        assert code == 0
    finally:
        server.kill()
