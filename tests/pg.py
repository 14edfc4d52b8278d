"""PostgreSQL for tests: the connection factories of both drivers and a fresh schema per test.

`scripts/test` starts a throwaway PostgreSQL 15 cluster and exports `AIDEMEMO_TEST_PG_URL`.
Without it a PostgreSQL test is skipped, except under `CI=true`, where it fails: CI must never
pass by skipping the PostgreSQL tiers.

Every test gets an empty schema of its own in the cluster's database. Creating one (every
migration in one script) costs 130-200 ms here and `CREATE DATABASE ... TEMPLATE` about 270 ms
(it copies the whole system catalog), which over some 300 tests on two drivers is minutes; so
at teardown a schema is emptied (one cascading `DELETE FROM tenants`, a few ms) and handed to
the next test, and new ones are created only when none is free. The test's connections reach
their schema through `search_path`, set as a connection startup parameter, and carry the
schema's name as `application_name`, so teardown can end any session a test left behind.

Through PgBouncer (`scripts/test` starts one in transaction pool mode in front of the cluster
and exports `AIDEMEMO_TEST_PGBOUNCER_URL`; `pooled=True`), PgBouncer 1.18 refuses the `options`
startup parameter, and a session `SET` would not survive a transaction anyway. So each schema
also gets a login role of the same name whose role default is `search_path=<schema>`: PgBouncer
keeps one server pool per (database, user), and every server connection of that pool starts
with the role's search path. The store under test sends nothing but transactions, so passing
through a transaction-mode pool proves it keeps no session state (STORE-8).
"""

from __future__ import annotations

import atexit
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import pytest

from aidememo.stores.postgres import PostgresStore

URL_ENV = "AIDEMEMO_TEST_PG_URL"
PGBOUNCER_ENV = "AIDEMEMO_TEST_PGBOUNCER_URL"
# The role PgBouncer runs its auth query as (scripts/_lib.sh pgbouncer_start).
PGBOUNCER_AUTH_ROLE = "aidememo_pgbouncer_auth"
DRIVERS = ("psycopg", "pg8000")


def server_url() -> str:
    """The cluster's URL; skips the test (fails it under CI=true) when there is none."""
    url = os.environ.get(URL_ENV, "")
    if not url:
        message = f"no PostgreSQL: {URL_ENV} is not set (scripts/test starts a cluster)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + "; CI must not skip PostgreSQL tests")
        pytest.skip(message)
    return url


def pgbouncer_url() -> str:
    """PgBouncer's URL (transaction pool mode, in front of the cluster of `server_url`);
    skips the test (fails it under CI=true) when there is none."""
    server_url()
    url = os.environ.get(PGBOUNCER_ENV, "")
    if not url:
        message = f"no PgBouncer: {PGBOUNCER_ENV} is not set (scripts/test starts one)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + "; CI must not skip the PgBouncer tier")
        pytest.skip(message)
    return url


def pooled_url(bouncer: str, schema: str) -> str:
    """`bouncer` logged in as the schema's role (whose default search_path is the schema),
    named after it; no `options`, which PgBouncer refuses."""
    parts = urlsplit(bouncer)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{schema}@{host}" + (f":{parts.port}" if parts.port else "")
    query = urlencode({"application_name": schema}, quote_via=quote)
    return parts._replace(netloc=netloc, query=query).geturl()


def with_database(url: str, database: str) -> str:
    """`url` pointing at another database of the same server."""
    parts = urlsplit(url)
    return parts._replace(path="/" + database).geturl()


def with_schema(url: str, schema: str) -> str:
    """`url` whose sessions use `schema` (libpq `options`), named after it."""
    parts = urlsplit(url)
    query = urlencode(
        {"options": f"-c search_path={schema}", "application_name": schema}, quote_via=quote
    )
    return parts._replace(query=query).geturl()


def psycopg_connect(url: str) -> Callable[[], Any]:
    """The origin's driver, configured as behind a transaction-mode pool."""
    import psycopg

    def connect() -> Any:
        return psycopg.connect(url, autocommit=False, prepare_threshold=None, connect_timeout=5)

    return connect


def pg8000_connect(url: str) -> Callable[[], Any]:
    """The edge's driver (pure Python, DB-API `format` paramstyle); honours the URL's
    `options=-c search_path=...` and `application_name`. Like Hyperdrive at the edge, it
    sends every statement unnamed (nothing prepared outlives a transaction)."""
    import pg8000.dbapi

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    startup: dict[str, str] = {}
    options = query.get("options", "")
    if options.startswith("-c search_path="):
        startup["search_path"] = options.removeprefix("-c search_path=")

    def connect() -> Any:
        return pg8000.dbapi.connect(
            user=unquote(parts.username or "postgres"),
            password=unquote(parts.password) if parts.password else None,
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            database=parts.path.lstrip("/") or "postgres",
            timeout=30,
            application_name=query.get("application_name"),
            startup_params=startup or None,
        )

    return connect


def connector(driver: str, url: str) -> Callable[[], Any]:
    """The connection factory of `driver` ("psycopg" or "pg8000") for `url`."""
    return psycopg_connect(url) if driver == "psycopg" else pg8000_connect(url)


def admin(url: str) -> Any:
    """An autocommit psycopg connection for DDL around the tests."""
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=5)


_lock = threading.Lock()
_admin_conns: dict[str, Any] = {}
_recycled: dict[str, list[str]] = {}  # server URL -> emptied migrated schemas


def _admin_run(server: str, *statements: str | bytes, params: tuple[Any, ...] = ()) -> None:
    """Run statements in one transaction on a shared admin connection (one per server)."""
    with _lock:
        conn = _admin_conns.get(server)
        if conn is None or conn.closed:
            conn = _admin_conns[server] = admin(server)
        try:
            with conn.transaction():
                for statement in statements:
                    conn.execute(statement, params or None)
        except Exception:
            conn.close()
            raise


@dataclass
class Database:
    """One fresh schema; `url` reaches it, `connect(driver)` opens connections to it."""

    server: str
    name: str
    url: str
    reusable: bool = False  # created with every migration, so it can be emptied and reused
    pooled: bool = False  # `url` goes through PgBouncer in transaction pool mode

    def connect(self, driver: str) -> Callable[[], Any]:
        """A connection factory of `driver` for this schema."""
        return connector(driver, self.url)

    def open(self, driver: str, **options: Any) -> PostgresStore:
        """A store on this schema (migrated already: `open` only checks the version)."""
        return PostgresStore.open(self.connect(driver), **options)

    def terminate_sessions(self) -> None:
        """End every session a test opened on this schema.

        PgBouncer's own auth-query connections (role `PGBOUNCER_AUTH_ROLE`, scripts/_lib.sh) are
        spared: one may carry a logging-in client's `application_name`, and PgBouncer would
        find it dead only when it next sent an auth query on it, failing that client's login
        with "bouncer config error"."""
        _admin_run(
            self.server,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE (application_name = %s OR usename = %s) AND usename <> %s "
            "AND pid <> pg_backend_pid()",
            params=(self.name, self.name, PGBOUNCER_AUTH_ROLE),
        )

    def drop(self) -> None:
        """End the test's sessions, then empty the schema for the next test (every row hangs
        off `tenants` by cascading keys, so that is one DELETE) or drop it."""
        self.terminate_sessions()
        if self.reusable:
            try:
                _admin_run(self.server, *_empty_script(self.name))
            except Exception:
                pass  # a test changed more than rows: drop it instead
            else:
                with _lock:
                    _recycled.setdefault(self.server, []).append(self.name)
                return
        _admin_run(self.server, *_drop_script(self.name))


def _drop_script(name: str) -> list[str]:
    return [
        f'DROP SCHEMA IF EXISTS "{name}" CASCADE',
        f'DROP OWNED BY "{name}"',
        f'DROP ROLE IF EXISTS "{name}"',
    ]


def _role_script(name: str) -> list[str]:
    """The schema's login role (the way in through PgBouncer), with the schema as its
    default search path."""
    return [
        f'CREATE ROLE "{name}" LOGIN SUPERUSER',
        f'ALTER ROLE "{name}" SET search_path TO "{name}"',
    ]


def _empty_script(name: str) -> list[str]:
    from aidememo.stores.postgres import schema

    return [
        "SET LOCAL lock_timeout = '10s'",
        # the search index tables without a foreign key, then everything cascading from tenants
        f'DELETE FROM "{name}".fact_search_postings',
        f'DELETE FROM "{name}".fact_search_terms',
        f'DELETE FROM "{name}".tenants',
        f'DELETE FROM "{name}".aidememo_import_staging',
        f'DELETE FROM "{name}".artifact_gc_intents',
        f'DELETE FROM "{name}".artifact_catalog',
        f'DELETE FROM "{name}".aidememo_listeners',  # the test's listeners were ended above
        f'DELETE FROM "{name}".aidememo_schema',
        f'INSERT INTO "{name}".aidememo_schema (component, version) '
        f"VALUES ('{schema.COMPONENT}', {schema.SCHEMA_VERSION})",
    ]


def _schema_script(name: str) -> bytes:
    """Every migration as one script: one round trip instead of one per statement. The
    store's own `migrate()` is exercised by the schema tests (test_postgres_store.py)."""
    from aidememo.stores.postgres import schema

    statements = [f'SET LOCAL search_path TO "{name}"', schema.CREATE_VERSION_TABLE]
    for _, steps in schema.MIGRATIONS:
        statements.extend(steps)
    statements.append(
        f"INSERT INTO aidememo_schema (component, version) "
        f"VALUES ('{schema.COMPONENT}', {schema.SCHEMA_VERSION})"
    )
    return ";\n".join(statements).encode()


def create_database(*, migrated: bool = True, pooled: bool = False) -> Database:
    """An empty schema with this code's tables and functions (a recycled one when there is
    one), or with nothing at all when `migrated=False`; `pooled` reaches it through PgBouncer
    in transaction pool mode."""
    server = server_url()
    bouncer = pgbouncer_url() if pooled else ""

    def url(name: str) -> str:
        return pooled_url(bouncer, name) if pooled else with_schema(server, name)

    if migrated:
        with _lock:
            free = _recycled.get(server)
            name = free.pop() if free else None
        if name is not None:
            return Database(server, name, url(name), reusable=True, pooled=pooled)
    name = f"aidememo_t_{uuid.uuid4().hex[:16]}"
    if migrated:
        _admin_run(server, f'CREATE SCHEMA "{name}"', *_role_script(name), _schema_script(name))
    else:
        _admin_run(server, f'CREATE SCHEMA "{name}"', *_role_script(name))
    return Database(server, name, url(name), reusable=migrated, pooled=pooled)


def _drop_recycled() -> None:
    """At exit: drop the emptied schemas (they matter on a server that outlives the run)."""
    for server, names in _recycled.items():
        for name in names:
            try:
                _admin_run(server, *_drop_script(name))
            except Exception:
                pass
    for conn in _admin_conns.values():
        conn.close()


atexit.register(_drop_recycled)


@contextmanager
def fresh_database(*, migrated: bool = True, pooled: bool = False) -> Iterator[Database]:
    """An empty schema for one test, emptied or dropped afterwards."""
    db = create_database(migrated=migrated, pooled=pooled)
    try:
        yield db
    finally:
        db.drop()
