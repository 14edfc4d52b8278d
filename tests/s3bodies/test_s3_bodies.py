"""S3 bodies at the origin (`origin.s3_bodies`, OBJ-2, OBJ-3) against SeaweedFS: the body-store
port, the artifact catalog's conformance checks with S3 bodies on SQLite and PostgreSQL, a
permanently failing S3 delete with backoff, and the HTTP routes' transfer mode."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aidememo.conformance.artifact_checks import ARTIFACT_CHECKS, ArtifactFixture, _Ids
from aidememo.conformance.harness import Fixture
from aidememo.domain.clock import FixedClock
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.service.artifact_gc import ArtifactGc
from aidememo.service.artifacts import Artifacts
from aidememo.stores.sqlite import SqliteStore
from origin.s3_bodies import S3Bodies, S3Config, make_client
from tests.conformance.conftest import BACKENDS
from tests.contract.support import P, _in_process
from tests.s3 import S3Endpoint, fresh_prefix, s3_endpoint


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


def _session(s3: S3Endpoint, secret: str | None = None) -> Any:
    import boto3

    return boto3.session.Session(
        aws_access_key_id=s3.access_key_id,
        aws_secret_access_key=secret or s3.secret_access_key,
    )


def _config(s3: S3Endpoint) -> S3Config:
    return S3Config(bucket=s3.bucket, prefix=fresh_prefix(), endpoint=s3.endpoint, region=s3.region)


def _bodies(s3: S3Endpoint, secret: str | None = None) -> S3Bodies:
    config = _config(s3)
    return S3Bodies(config, client=make_client(config, _session(s3, secret)))


def test_obj2_credentials_from_the_provider_chain(
    s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_access_key)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    bodies = S3Bodies(_config(s3))
    assert bodies.create("gen_0001", iter([b"abc"]), 3)[0] == 3
    assert bodies.head("gen_0001") == 3


def _code(fn: Any) -> ErrorCode:
    with pytest.raises(AidememoError) as caught:
        fn()
    return caught.value.code


def test_obj2_grant3_body_store_port_on_s3(s3: S3Endpoint) -> None:
    bodies = _bodies(s3)
    data = b"\x00body\xff" * 3000
    want = (len(data), hashlib.sha256(data).hexdigest())
    chunks = [data[i : i + 1000] for i in range(0, len(data), 1000)]
    assert bodies.create("gen_0001", iter(chunks), len(data)) == want
    assert bodies.head("gen_0001") == len(data)
    assert b"".join(bodies.read("gen_0001")) == data
    assert b"".join(bodies.read("gen_0001", 5, 17)) == data[5:17]
    assert b"".join(bodies.read("gen_0001", 100)) == data[100:]
    assert b"".join(bodies.read("gen_0001", 7, 7)) == b""
    # A conditional create: the stored body is kept and observed, so the caller compares.
    assert bodies.create("gen_0001", iter([b"x" * len(data)]), len(data)) == want
    assert b"".join(bodies.read("gen_0001")) == data
    # Wrong sizes refuse and store nothing.
    for sent in (b"short", b"far too long for it"):
        assert _code(lambda s=sent: bodies.create("gen_0002", iter([s]), 8)) == (
            ErrorCode.ARTIFACT_BODY_MISMATCH
        )
        assert bodies.head("gen_0002") is None
    assert bodies.create("gen_0003", iter([]), 0) == (0, hashlib.sha256(b"").hexdigest())
    assert b"".join(bodies.read("gen_0003")) == b""
    info = bodies.stat("gen_0001")
    assert info is not None and info.etag.strip('"') == hashlib.md5(data).hexdigest()
    # Absent keys, and keys that are not generations (nothing outside the prefix).
    assert bodies.head("gen_9999") is None
    assert _code(lambda: bodies.read("gen_9999")) == ErrorCode.ARTIFACT_NOT_FOUND
    for bad in ("../x", "a/b", "", "k"):
        assert _code(lambda b=bad: bodies.head(b)) == ErrorCode.ARTIFACT_NOT_FOUND
        # A grant can only name a generation under the prefix (GRANT-3).
        refused = _code(lambda b=bad: bodies.presign_put(b, 1, "a/b", 60))
        assert refused == ErrorCode.ARTIFACT_NOT_FOUND
    bodies.delete("gen_0001")
    bodies.delete("gen_0001")  # idempotent
    assert bodies.head("gen_0001") is None
    listed = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=bodies.config.prefix)
    keys = sorted(o["Key"] for o in listed.get("Contents", []))
    assert keys == [bodies.config.prefix + "gen_0003"]


def test_obj2_unreachable_store_is_artifact_store_unavailable(s3: S3Endpoint) -> None:
    wrong = _bodies(s3, secret="wrong")
    assert _code(lambda: wrong.head("gen_0001")) == ErrorCode.ARTIFACT_STORE_UNAVAILABLE
    assert _code(lambda: wrong.delete("gen_0001")) == ErrorCode.ARTIFACT_STORE_UNAVAILABLE
    assert _code(lambda: wrong.create("gen_0001", iter([b"a"]), 1)) == (
        ErrorCode.ARTIFACT_STORE_UNAVAILABLE
    )


def test_obj2_identity_pins_layout_without_credentials(s3: S3Endpoint) -> None:
    base = S3Config(bucket="bodies", prefix="a/", endpoint="HTTPS://S3.Example.com:8443/")
    ident = base.identity()
    assert ident == (
        "s3:v1?endpoint=https://s3.example.com:8443&region=us-east-1&bucket=bodies"
        "&prefix=a/&addressing=path"
    )
    others = [
        S3Config(bucket="other", prefix="a/", endpoint=base.endpoint),
        S3Config(bucket="bodies", prefix="b/", endpoint=base.endpoint),
        S3Config(bucket="bodies", prefix="a/", endpoint="https://s3.example.com"),
        S3Config(bucket="bodies", prefix="a/", endpoint=base.endpoint, region="eu-west-1"),
        S3Config(bucket="bodies", prefix="a/", endpoint=base.endpoint, addressing="virtual"),
    ]
    assert len({ident, *(o.identity() for o in others)}) == 6
    bodies = _bodies(s3)
    assert s3.secret_access_key not in bodies.identity + repr(bodies)
    assert s3.access_key_id not in bodies.identity
    for bad in (
        {"prefix": "/abs/"},
        {"prefix": "a/../"},
        {"prefix": "no-slash"},
        {"addressing": "dns"},
        {"endpoint": "https://key:secret@s3.example.com"},
        {"endpoint": "ftp://s3.example.com"},
        {"bucket": "a"},
    ):
        with pytest.raises(ValueError):
            S3Config(**{"bucket": "bodies", **bad})


class _FailingDeletes(S3Bodies):
    """S3 bodies whose deletes go out with a wrong secret while `fail_deletes` is set: a real
    refusal by the store (403), not a stub. Its GC waits the plain settlement grace (no grant
    window): ART's checks time GC by it, and the grant window is GRANT-4's to test."""

    grant_window_ms = 0

    def __init__(self, s3: S3Endpoint) -> None:
        base = _bodies(s3)
        super().__init__(base.config, client=base.client)
        self.fail_deletes = False
        self._refused = make_client(base.config, _session(s3, "wrong-secret"))

    def delete(self, key: str) -> None:
        if not self.fail_deletes:
            super().delete(key)
            return
        good, self.client = self.client, self._refused
        try:
            super().delete(key)
        finally:
            self.client = good


CATALOG_BACKENDS = ["sqlite_file", "postgres_psycopg"]


@pytest.fixture(params=CATALOG_BACKENDS)
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    backend = BACKENDS[request.param](tmp_path)
    try:
        yield backend
    finally:
        for cleanup in reversed(backend.cleanups):
            cleanup()


@pytest.mark.parametrize("check", [name for name, _ in ARTIFACT_CHECKS])
def test_obj2_art7_artifact_checks_with_s3_bodies(catalog: Any, check: str, s3: S3Endpoint) -> None:
    """Part of ART's conformance suite, with the catalog's bodies in S3: publication re-hashes
    the stored object, GC deletes objects, a refused S3 delete backs off."""
    fn = dict(ARTIFACT_CHECKS)[check]
    fx = Fixture.create(catalog.open)
    try:
        bodies = _FailingDeletes(s3)
        art = Artifacts(fx.store, fx.clock, _Ids(), fx.ledger, bodies)
        fn(ArtifactFixture(fx, bodies, art, ArtifactGc(fx.store, bodies, fx.clock)))  # type: ignore[arg-type]
    finally:
        fx.store.close()


def test_obj3_direct_upload_route_refused_with_s3_bodies(s3: S3Endpoint, tmp_path: Path) -> None:
    from tests.contract.support import WRITER, Api

    clock = FixedClock(1_700_000_000_000)
    backend = _in_process(SqliteStore.open_file(tmp_path / "db.sqlite"), clock, _bodies(s3))
    api = Api("s3", backend.client, backend.identity, clock, admin_token=backend.admin_token,
              store=backend.store)  # fmt: skip
    try:
        from aidememo.domain.model import Role

        api.provision(WRITER, Role.WRITER)
        payload = {"path": "sessions/s1/artifacts/x.bin", "size_bytes": 3, "content_type": "a/b"}
        r = api.post(f"{P}/artifact-reservations", {"command_id": "c1", "payload": payload}, WRITER)
        answer = r.expect(200)
        assert answer["transfer"]["mode"] == "grant"
        assert answer["transfer"]["path"].endswith(f"/{answer['reservation_id']}/upload-grants")
        put = api.call(
            "PUT",
            f"{P}/artifact-reservations/{answer['reservation_id']}/body",
            as_=WRITER,
            body=b"abc",
            headers={"content-type": "application/octet-stream"},
        )
        put.expect(409, "artifact_transfer_mode_mismatch")
    finally:
        backend.close()
