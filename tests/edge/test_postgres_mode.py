"""The edge with `STORAGE_MODE=postgres`: Worker and Durable Objects on one PostgreSQL database.

The runtime double gives the Worker an `env.HYPERDRIVE` binding whose parameters name the
PgBouncer of `scripts/test` (transaction pool mode, as Hyperdrive pools), so every connection
here is a real pg8000 connection through a real transaction-mode pool to the real PostgreSQL.
Under `CI=true` these tests fail rather than skip without PostgreSQL and PgBouncer (`tests.pg`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from aidememo.domain.clock import FixedClock, RandomIds
from aidememo.service.identity import IdentityService
from aidememo.stores.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION
from tests import pg
from tests.edge.backend import postgres_runtime
from tests.edge.conftest import START_MS, Edge
from tests.edge.runtime import EdgeClient

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
P = "/v1/projects/p1"


def _session(n: int) -> dict[str, object]:
    return {"command_id": f"c{n}", "payload": {"session_id": f"s{n}", "topic": "t"}}


def _pg_edge(tmp_path: Path, db: pg.Database, **kw: object) -> Iterator[Edge]:
    clock = FixedClock(START_MS)
    runtime = postgres_runtime(tmp_path / "rt", clock, db, **kw)
    try:
        yield Edge(runtime, EdgeClient(runtime), clock)
    finally:
        runtime.close()


@pytest.fixture
def db() -> Iterator[pg.Database]:
    """A fresh migrated schema reached through PgBouncer (transaction pool mode)."""
    with pg.fresh_database(pooled=True) as database:
        yield database


@pytest.fixture
def edge(tmp_path: Path, db: pg.Database) -> Iterator[Edge]:
    yield from _pg_edge(tmp_path, db)


def _tables(db: pg.Database) -> set[str]:
    conn = pg.admin(db.server)
    try:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (db.name,),
        ).fetchall()
    finally:
        conn.close()
    return {row[0] for row in rows}


def _set_version(db: pg.Database, version: int) -> None:
    conn = pg.admin(db.server)
    try:
        conn.execute(f'UPDATE "{db.name}".aidememo_schema SET version = %s', (version,))
    finally:
        conn.close()


def _changes(edge: Edge, token: str) -> list[dict[str, Any]]:
    status, _, snapshot = edge.get(P + "/snapshot", token)
    assert status == 200, snapshot
    query = {"project_epoch": snapshot["project_epoch"], "after_seq": 0}
    status, _, page = edge.get(P + "/changes", token, query=query)
    assert status == 200, page
    entries: list[dict[str, Any]] = page["entries"]
    return entries


# -- the binding --------------------------------------------------------------------------


def test_edge6_hyperdrive_binding_names_the_transaction_mode_pooler(
    edge: Edge, db: pg.Database
) -> None:
    """The double's binding points at PgBouncer, never straight at the cluster."""
    hd = edge.runtime.env.HYPERDRIVE
    bouncer = urlsplit(pg.pgbouncer_url())
    assert (hd.host, hd.port) == (bouncer.hostname, bouncer.port)
    assert hd.port != urlsplit(pg.server_url()).port
    assert hd.user == db.name and hd.connectionString.startswith("postgresql://")


def test_edge6_health_reports_the_postgres_schema_version_without_touching_the_database(
    tmp_path: Path,
) -> None:
    with pg.fresh_database(migrated=False, pooled=True) as bare:
        for e in _pg_edge(tmp_path, bare):
            status, _, body = e.get("/health", None)
            assert (status, body) == (
                200,
                {
                    "status": "ok",
                    "mode": "edge",
                    "schema_version": PG_SCHEMA_VERSION,
                    "state": "ok",
                },
            )


# -- the edge never migrates ----------------------------------------------------------------


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "aidememo.edge")
    caplog.clear()
    return text


def test_edge6_unmigrated_schema_is_a_clear_storage_failure_and_stays_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="aidememo.edge")
    with pg.fresh_database(migrated=False, pooled=True) as bare:
        for e in _pg_edge(tmp_path, bare):
            # The Worker's own lookups (admin bootstrap, a member's token) meet the schema
            # first: 503 storage_failure with Retry-After (its wire message never leaks
            # internals, ERR-2), and the log names the command that fixes it.
            status, body = e.bootstrap("t1", "p1", "a1")
            assert (status, body["error"]["code"]) == (503, "storage_failure"), body
            assert "aidememo admin migrate" in _logged(caplog)
            status, headers, body = e.get(P + "/identity", "some-member-token")
            assert (status, body["error"]["code"]) == (503, "storage_failure")
            assert "retry-after" in headers
            assert "aidememo admin migrate" in _logged(caplog)
            # The project object answers the same through RPC, not a crash.
            stub = e.runtime.env.PROJECTS.getByName("t1/p1")
            request = {"method": "GET", "path": P + "/identity", "query": "", "route": "identity",
                       "params": {"project_id": "p1"}}  # fmt: skip
            answer = e.runtime.run(stub.handle(request, {"tenant_id": "t1", "actor_id": "a1"}))
            assert answer["status"] == 503 and '"storage_failure"' in answer["body"]
            assert "aidememo admin migrate" in _logged(caplog)
        # Nothing was created: not the version table, not one of the store's tables.
        assert _tables(bare) == set()


def test_edge6_older_schema_is_refused_until_migrated_then_served(
    tmp_path: Path, db: pg.Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="aidememo.edge")
    _set_version(db, PG_SCHEMA_VERSION - 1)
    for e in _pg_edge(tmp_path, db):
        status, body = e.bootstrap("t1", "p1", "a1")
        assert (status, body["error"]["code"]) == (503, "storage_failure")
        message = _logged(caplog)
        assert f"schema {PG_SCHEMA_VERSION - 1} is older" in message
        assert "aidememo admin migrate" in message
        # `aidememo admin migrate` (here: the version it records) fixes it without a restart.
        _set_version(db, PG_SCHEMA_VERSION)
        assert e.bootstrap("t1", "p1", "a1")[0] == 200
        assert e.get(P + "/identity", e.token("t1", "a1"))[0] == 200


def test_edge6_store6_newer_schema_is_refused(tmp_path: Path, db: pg.Database) -> None:
    _set_version(db, PG_SCHEMA_VERSION + 1)
    for e in _pg_edge(tmp_path, db):
        status, body = e.bootstrap("t1", "p1", "a1")
        assert (status, body["error"]["code"]) == (503, "storage_failure"), body


def test_edge6_unknown_storage_mode_is_refused(tmp_path: Path, db: pg.Database) -> None:
    for e in _pg_edge(tmp_path, db, vars={"STORAGE_MODE": "mysql"}):
        status, body = e.bootstrap("t1", "p1", "a1")
        assert (status, body["error"]["code"]) == (503, "storage_failure")


# -- tokens and admin go to PostgreSQL ------------------------------------------------------


def test_edge6_tokens_and_admin_live_in_postgres_not_in_the_directory_objects(
    edge: Edge, db: pg.Database
) -> None:
    assert edge.bootstrap("t1", "p1", "a1")[0] == 200
    token = edge.token("t1", "a1")
    assert edge.post(P + "/sessions", token, _session(1))[0] == 200
    assert edge.get(P + "/identity", token)[0] == 200
    # The registry and the token directory were never called and hold nothing.
    for binding in ("TENANTS", "TOKENS"):
        ns = edge.runtime.namespaces[binding]
        assert (ns.calls, ns.names()) == ([], []), binding
    # The project object ran the request on PostgreSQL; its own SQLite stayed empty.
    projects = edge.runtime.namespaces["PROJECTS"]
    assert projects.calls == [("t1/p1", "handle"), ("t1/p1", "handle")]
    conn = projects.storages["t1/p1"]._conn
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    # Every row is in the database: one store (psycopg, directly) sees them all.
    store = db.open("psycopg")
    try:
        digest = hashlib.sha256(token.encode()).digest()
        caller = IdentityService(store, edge.clock, RandomIds()).authenticate(digest)
        assert (caller.tenant_id, caller.actor_id) == ("t1", "a1")
        counts = store.transaction(lambda tx: tx.count_tenant_rows("t1"))
        assert counts["changes"] == 1 and counts["token_bindings"] == 1
    finally:
        store.close()


def test_edge3_token_lookup_through_postgres_is_cached_at_most_30_s(
    edge: Edge, db: pg.Database
) -> None:
    edge.bootstrap("t1", "p1", "a1")
    token = edge.token("t1", "a1")
    digest = hashlib.sha256(token.encode()).digest()
    assert edge.get(P + "/identity", token)[0] == 200  # looked up in PostgreSQL, cached
    # Revoked straight in the database (another edge location, or the CLI): this isolate's
    # cache keeps the token for the documented window, a fresh isolate refuses it at once.
    store = db.open("psycopg")
    try:
        IdentityService(store, edge.clock, RandomIds()).revoke_token(digest)
    finally:
        store.close()
    fresh = edge.runtime.isolate()
    url = f"https://edge.test{P}/identity"
    headers = {"authorization": f"Bearer {token}"}
    assert edge.runtime.fetch("GET", url, headers, isolate=fresh)[0] == 401
    edge.clock.advance(29_999)
    assert edge.get(P + "/identity", token)[0] == 200
    edge.clock.advance(1)
    status, _, body = edge.get(P + "/identity", token)
    assert (status, body["error"]["code"]) == (401, "authentication_failed")


def test_edge3_revocation_through_the_admin_route_evicts_this_isolates_cache(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    token = edge.token("t1", "a1")
    assert edge.get(P + "/identity", token)[0] == 200
    digest = hashlib.sha256(token.encode()).hexdigest()
    status, _, _ = edge.runtime.admin(
        "POST", "/v1/admin/tokens/revoke", json={"token_sha256": digest}
    )
    assert status == 200
    assert edge.get(P + "/identity", token)[0] == 401


def test_auth5_suspension_applies_on_the_next_request(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    token = edge.token("t1", "a1")
    assert edge.get(P + "/identity", token)[0] == 200
    body = {"tenant_id": "t1", "project_id": "p1", "actor_id": "a1", "status": "suspended"}
    assert edge.runtime.admin("POST", "/v1/admin/members", json=body)[0] == 200
    status, _, answer = edge.get(P + "/identity", token)
    assert (status, answer["error"]["code"]) == (403, "project_unauthorized")


# -- tenants --------------------------------------------------------------------------------


def test_rec1_tenant_isolation_in_one_database(edge: Edge) -> None:
    edge.bootstrap("ta", "p1", "a1")
    edge.bootstrap("tb", "p1", "a1")
    ta, tb = edge.token("ta", "a1"), edge.token("tb", "a1")
    assert edge.post(P + "/sessions", ta, _session(1))[0] == 200
    status, _, body = edge.get(P + "/resources/session/s1", ta)
    assert status == 200 and "'ta'" in repr(body), body
    # Same project id, same actor id, other tenant: another object, no data, own sequence.
    assert edge.get(P + "/resources/session/s1", tb)[0] == 404
    assert edge.post(P + "/sessions", tb, _session(2))[0] == 200
    page = _changes(edge, tb)
    assert [(c["seq"], c["resource"]["id"]) for c in page] == [(1, "s2")]
    projects = edge.runtime.namespaces["PROJECTS"]
    assert {"ta/p1", "tb/p1"} <= {name for name, _ in projects.calls}
    # An export of one tenant carries nothing of the other; deleting it leaves the other.
    status, _, data = edge.get("/v1/admin/tenants/tb/export", edge.runtime.admin_token)
    assert status == 200 and b'"tenant_id":"ta"' not in data
    status, _, answer = edge.runtime.admin("DELETE", "/v1/admin/tenants/tb?confirm=tb")
    assert status == 200 and answer["removed"]["tenants"] == 1, answer
    assert edge.get(P + "/resources/session/s1", ta)[0] == 200


def test_edge6_each_object_holds_one_connection_and_runs_one_call_at_a_time(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    token = edge.token("t1", "a1")
    assert edge.post(P + "/sessions", token, _session(1))[0] == 200
    live = edge.runtime.namespaces["PROJECTS"].live["t1/p1"]
    store = live.obj._store
    assert store is not None and store.pool.size == 1
    assert store.mode == "edge"
    # Concurrent calls into one object: each waits for the one before (no interleaving on
    # the object's connection), and every one commits.
    stub = edge.runtime.env.PROJECTS.getByName("t1/p1")
    caller = {"tenant_id": "t1", "actor_id": "a1"}

    def request(n: int) -> dict[str, object]:
        body = json.dumps(_session(n))
        headers = {"content-type": "application/json"}
        return {"method": "POST", "path": P + "/sessions", "query": "", "headers": headers,
                "route": "create_session", "params": {"project_id": "p1"},
                "content_type": "application/json", "body": body}  # fmt: skip

    import asyncio

    async def many() -> list[int]:
        answers = await asyncio.gather(*(stub.handle(request(n), caller) for n in range(2, 12)))
        return [int(a["status"]) for a in answers]

    assert edge.runtime.run(many()) == [200] * 10
    assert [c["seq"] for c in _changes(edge, token)] == list(range(1, 12))


# -- the driver stays out of the SQLite mode ------------------------------------------------


def test_layer2_pg_connection_imports_without_loading_pg8000() -> None:
    code = (
        "import sys, durable_objects.pg_connection as m\n"
        "assert 'pg8000' not in sys.modules, 'pg8000 loaded at import'\n"
        "class Env: STORAGE_MODE = 'postgres'\n"
        "assert m.postgres_mode(Env) and not m.postgres_mode(object())\n"
        "m.pg8000_connect({'host': 'h', 'port': 1, 'user': 'u'})\n"
        "assert 'pg8000' not in sys.modules, 'pg8000 loaded before a connection'\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env=env, timeout=60)


def _pg_import_peak(tmp: Path, db: pg.Database, pairs: int) -> tuple[int, int]:
    """`(archive size, peak Python memory)` of one streamed import in PostgreSQL mode."""
    import tracemalloc

    from tests.conformance.test_archive_staging import TENANT, generated
    from tests.edge.runtime.harness import BASE_URL, Context
    from tests.edge.runtime.workers_module import Request

    runtime = postgres_runtime(tmp, FixedClock(START_MS), db)
    try:
        body = b"".join(generated(pairs, 16_300))
        headers = {
            "authorization": f"Bearer {runtime.admin_token}",
            "content-type": "application/x-ndjson",
        }
        request = Request(BASE_URL + "/v1/admin/import", "POST", headers, body)
        worker = runtime.Default(Context(), runtime.env)

        async def run() -> int:
            return int((await worker.fetch(request)).status)

        tracemalloc.start()
        try:
            status = runtime.run(run())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert status == 200
        store = db.open("psycopg")
        try:
            counts = store.read(lambda tx: tx.count_tenant_rows(TENANT))
        finally:
            store.close()
        assert counts["changes"] == pairs
        return len(body), peak
    finally:
        runtime.close()


def test_arc7_arc9_postgres_mode_import_streams_into_the_database_stage(tmp_path: Path) -> None:
    """In PostgreSQL mode the Worker pushes an import's lines into the database's staged import
    as the body streams (ARC-9): its Python memory stays the same when the body doubles (a
    fixed cost: the driver and one staged page in its encodings), never the body itself."""
    with pg.fresh_database(pooled=True) as small_db, pg.fresh_database(pooled=True) as large_db:
        size, peak = _pg_import_peak(tmp_path / "small", small_db, 96)
        size2, peak2 = _pg_import_peak(tmp_path / "large", large_db, 192)
    print(f"\narchive {size} -> {size2} bytes: peak Python memory {peak} -> {peak2} bytes")
    assert size > 3 * 1024 * 1024 and size2 > 1.9 * size
    assert peak2 < 1.25 * peak + 1024 * 1024, (peak, peak2)
    # A fixed cost (the driver, one page in its encodings) but nothing that follows the body.
    assert peak2 - peak < (size2 - size) / 3, (peak, peak2, size, size2)
