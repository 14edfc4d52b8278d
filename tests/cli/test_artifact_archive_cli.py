"""`aidememo admin export --include-bodies` and `admin import` move a tenant with its artifact
bodies between two SQLite databases (SPEC.md ART-12, ARC-5), and an export without bodies is
refused by a catalog pinned to another body store (ART-8)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from aidememo.bodies.local import LocalBodies
from aidememo.cli.main import main
from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from aidememo.http.app import HttpApp
from aidememo.stores.sqlite import SqliteStore
from tests.contract.support import TENANT, WRITER, Api, InProcessClient, P

DATA = bytes(range(256)) * 5000  # 1.28 MB: several body lines


def _api(db: Path) -> tuple[Api, SqliteStore]:
    store = SqliteStore.open_file(db)
    clock = FixedClock(1_700_000_000_000)
    bodies = LocalBodies(f"{db}.artifacts")
    store.transaction(lambda tx: tx.bind_body_store_identity(bodies.identity))
    app = HttpApp(store, clock=clock, bodies=bodies)
    return Api("cli", InProcessClient(app), app.services.identity, clock), store


def test_art12_arc5_a_tenant_moves_with_its_bodies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    api, store = _api(source)
    api.provision(WRITER, Role.WRITER)
    payload = {"path": "sessions/s1/artifacts/big.bin", "size_bytes": len(DATA),
               "sha256": hashlib.sha256(DATA).hexdigest()}  # fmt: skip
    r = api.post(f"{P}/artifact-reservations", {"command_id": "c1", "payload": payload})
    rid = r.expect(200)["reservation_id"]
    api.call("PUT", f"{P}/artifact-reservations/{rid}/body", as_=WRITER, body=DATA,
             headers={"content-type": "application/octet-stream"}).expect(200)  # fmt: skip
    ref = api.post(f"{P}/artifact-reservations/{rid}/publish", {"command_id": "c1.p"}).expect(200)
    store.close()
    out = tmp_path / "export.jsonl"
    args = ["--database", str(source), "--tenant-id", TENANT, "--out", str(out)]
    assert main(["admin", "export", *args, "--include-bodies", "--include-token-digests"]) == 0
    counts = json.loads(capsys.readouterr().out)["counts"]
    assert counts["artifact_body"] == 3
    assert main(["admin", "import", "--database", str(target), "--in", str(out)]) == 0
    capsys.readouterr()
    moved, again = _api(target)
    moved.tokens.update(api.tokens)
    got = moved.post(f"{P}/artifacts/{ref['artifact_id']}/downloads", {"revision": 1})
    assert got.expect(200) == DATA
    again.close()

    plain = tmp_path / "plain.jsonl"
    args = ["--database", str(source), "--tenant-id", TENANT, "--out", str(plain)]
    assert main(["admin", "export", *args]) == 0
    other = tmp_path / "c.sqlite"
    pinned = SqliteStore.open_file(other)
    pinned.transaction(lambda tx: tx.bind_body_store_identity("r2:v1:ARTIFACTS"))
    pinned.close()
    capsys.readouterr()
    assert main(["admin", "import", "--database", str(other), "--in", str(plain)]) == 1
    assert "identity_mismatch" in capsys.readouterr().err
    assert not Path(f"{other}.artifacts").exists()  # no bodies involved: never opened
