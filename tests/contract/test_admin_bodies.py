"""`GET /v1/admin/tenants/{t}/export?include_bodies=true` streams the artifact bodies as
chunked lines, and `POST /v1/admin/import` writes them into the importing body store
(ART-12, ARC-5), on every backend and between profiles."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from tests.contract.support import BACKENDS, START_MS, TENANT, WRITER, Api
from tests.contract.test_admin import admin, import_
from tests.contract.test_artifacts import download, put

BIG = os.urandom(1_300_000)  # three body lines of at most 512 KiB


def _export_bodies(api: Api) -> Any:
    return admin(
        api,
        "GET",
        f"/v1/admin/tenants/{TENANT}/export",
        query={"include_bodies": "true", "include_token_digests": "true"},
    )


def _types(data: bytes) -> list[str]:
    return [json.loads(line)["type"] for line in data.splitlines()]


def _fresh(name: str, tmp: Path, clock: FixedClock, tokens: dict[str, str]) -> tuple[Any, Api]:
    backend = BACKENDS[name](tmp, clock)
    api = Api(name, backend.client, backend.identity, clock, dict(tokens), backend.admin_token)
    return backend, api


def test_art12_arc5_http_export_with_bodies_restores_them(api: Api, tmp_path: Path) -> None:
    api.session("s1")
    ref = put(api, "big", BIG, path="sessions/s1/artifacts/big.bin")
    reply = _export_bodies(api)
    if api.backend_name == "edge_postgres":  # its Worker serves no bodies in this mode
        reply.expect(503, "artifact_store_unavailable")
        return
    data = reply.expect(200)
    kinds = _types(data)
    assert kinds.count("artifact_body") == 3 and kinds[-1] == "manifest"
    assert json.loads(data.splitlines()[0])["bodies"] is True
    fresh, target = _fresh(api.backend_name, tmp_path / "fresh", api.clock, api.tokens)
    try:
        import_(target, data).expect(200)
        assert download(target, ref).expect(200) == BIG
    finally:
        fresh.close()


PAIRS = [
    ("sqlite_file", "postgres_psycopg"),
    ("postgres_pg8000", "sqlite_file"),
    ("uvicorn_sqlite", "memory"),
    ("sqlite_file", "edge"),
    ("edge", "sqlite_file"),
    ("edge", "postgres_psycopg"),
]


@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_art12_arc5_a_tenant_moves_with_its_bodies_between_profiles(
    source: str, target: str, tmp_path: Path
) -> None:
    clock = FixedClock(START_MS)
    backend, src = _fresh(source, tmp_path / "a", clock, {})
    try:
        src.provision(WRITER, Role.WRITER)
        src.session("s1")
        ref = put(src, "big", BIG, path="sessions/s1/artifacts/big.bin")
        data = _export_bodies(src).expect(200)
        plain = admin(src, "GET", f"/v1/admin/tenants/{TENANT}/export").expect(200)
        tokens = dict(src.tokens)
    finally:
        backend.close()
    other, dst = _fresh(target, tmp_path / "b", clock, tokens)
    try:
        import_(dst, data).expect(200)
        assert download(dst, ref).expect(200) == BIG
        assert "artifact_body" not in _types(plain)
    finally:
        other.close()


@pytest.mark.parametrize(("source", "target"), [("sqlite_file", "edge"), ("edge", "sqlite_file")])
def test_art8_art12_bodies_left_behind_are_refused_by_another_body_store(
    source: str, target: str, tmp_path: Path
) -> None:
    clock = FixedClock(START_MS)
    backend, src = _fresh(source, tmp_path / "a", clock, {})
    try:
        src.provision(WRITER, Role.WRITER)
        src.session("s1")
        put(src, "small", b"stays behind", path="sessions/s1/artifacts/small.bin")
        query = {"include_token_digests": "true"}
        plain = admin(src, "GET", f"/v1/admin/tenants/{TENANT}/export", query=query)
        data = plain.expect(200)
        with_bodies = _export_bodies(src).expect(200)
    finally:
        backend.close()
    other, dst = _fresh(target, tmp_path / "b", clock, {})
    try:
        if target != "edge":  # an origin pins its catalog at start-up (ART-8)
            other.store().transaction(lambda tx: tx.bind_body_store_identity("local:v1"))
        import_(dst, data).expect(403, "identity_mismatch")
        import_(dst, with_bodies).expect(200)  # with its bodies it is accepted anywhere
    finally:
        other.close()
