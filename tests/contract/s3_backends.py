"""Contract backends whose artifact bodies live in S3 (SeaweedFS, OBJ-1): the origin on SQLite
and on PostgreSQL with `origin.s3_bodies` under a fresh prefix (OBJ-2), and the edge double
with R2 grants whose S3 endpoint is the test server (GRANT-5). Bodies move through grants
(OBJ-3), so only suites whose helpers take the grant path use them (`tests/contract/
test_artifacts.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aidememo.domain.clock import FixedClock
from aidememo.stores.sqlite import SqliteStore
from tests.contract.support import LEASE_MS, MCP_ORIGIN, Backend, BackendFactory, _in_process
from tests.s3 import S3Endpoint, fresh_prefix, s3_endpoint


def _s3_bodies(s3: S3Endpoint) -> Any:
    import boto3

    from origin.s3_bodies import S3Bodies, S3Config, make_client

    config = S3Config(bucket=s3.bucket, prefix=fresh_prefix(), endpoint=s3.endpoint,
                      region=s3.region)  # fmt: skip
    session = boto3.session.Session(
        aws_access_key_id=s3.access_key_id, aws_secret_access_key=s3.secret_access_key
    )
    return S3Bodies(config, client=make_client(config, session))


def _sqlite_s3(tmp: Path, clock: FixedClock) -> Backend:
    bodies = _s3_bodies(s3_endpoint())
    return _in_process(SqliteStore.open_file(tmp / "ssot.sqlite"), clock, bodies)


def _postgres_s3(tmp: Path, clock: FixedClock) -> Backend:
    from tests import pg

    bodies = _s3_bodies(s3_endpoint())
    db = pg.create_database()
    try:
        store = db.open("psycopg")
    except BaseException:
        db.drop()
        raise
    backend = _in_process(store, clock, bodies)

    def close() -> None:
        store.close()
        db.drop()

    backend.close = close
    return backend


def _edge_grants(tmp: Path, clock: FixedClock) -> Backend:
    from tests.edge.backend import EdgeIdentity, project_store
    from tests.edge.runtime import EdgeClient, Runtime

    s3 = s3_endpoint()
    variables = {
        "HANDOFF_LEASE_MS": str(LEASE_MS),
        "MCP_ALLOWED_ORIGINS": MCP_ORIGIN,
        "R2_ACCESS_KEY_ID": s3.access_key_id,
        "R2_SECRET_ACCESS_KEY": s3.secret_access_key,
        "R2_BUCKET": s3.bucket,
        "R2_ACCOUNT_ID": "0" * 32,
        "R2_S3_ENDPOINT": s3.endpoint,
        "R2_S3_REGION": s3.region,
    }
    runtime = Runtime(tmp / "edge", clock, vars=variables)
    backend = Backend(EdgeClient(runtime), EdgeIdentity(runtime), runtime.close)  # type: ignore[arg-type]
    backend.store = lambda: project_store(runtime)
    return backend


S3_BACKENDS: dict[str, BackendFactory] = {
    "sqlite_s3": _sqlite_s3,
    "postgres_s3": _postgres_s3,
    "edge_grants": _edge_grants,
}
