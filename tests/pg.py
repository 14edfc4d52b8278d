"""PostgreSQL for tests: the connection factories of both drivers and a fresh schema per test.

`scripts/test` starts a throwaway PostgreSQL 15 cluster and exports `AIDEMEMO_TEST_PG_URL`.
Without it a PostgreSQL test is skipped, except under `CI=true`, where it fails: CI must never
pass by skipping the PostgreSQL tiers.

Every test gets its own schema in the cluster's database, migrated by the store itself
(`PostgresStore.open(..., migrate=True)`) and dropped at teardown. A schema costs about 50 ms;
`CREATE DATABASE ... TEMPLATE` costs about 270 ms here (it copies the whole system catalog),
which over some 300 tests on two drivers is more than a minute. The test's connections reach
their schema through `search_path`, set as a connection startup parameter, and carry the
schema's name as `application_name`, so teardown can end any session a test left behind.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import pytest

from aidememo.stores.postgres import PostgresStore

URL_ENV = "AIDEMEMO_TEST_PG_URL"
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
    `options=-c search_path=...` and `application_name`."""
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


@dataclass
class Database:
    """One fresh schema; `url` reaches it, `connect(driver)` opens connections to it."""

    server: str
    name: str
    url: str

    def connect(self, driver: str) -> Callable[[], Any]:
        """A connection factory of `driver` for this schema."""
        return connector(driver, self.url)

    def open(self, driver: str, **options: Any) -> PostgresStore:
        """A store on this schema (migrated already: `open` only checks the version)."""
        return PostgresStore.open(self.connect(driver), **options)

    def terminate_sessions(self) -> None:
        """End every session a test opened on this schema."""
        with admin(self.server) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (self.name,),
            )

    def drop(self) -> None:
        """Drop the schema, ending any session still using it."""
        self.terminate_sessions()
        with admin(self.server) as conn:
            conn.execute("SET lock_timeout = '10s'")
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.name}" CASCADE')


def create_database(*, migrated: bool = True) -> Database:
    """A new schema, migrated by the store unless `migrated=False`."""
    server = server_url()
    name = f"aidememo_t_{uuid.uuid4().hex[:16]}"
    with admin(server) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    db = Database(server, name, with_schema(server, name))
    if migrated:
        try:
            PostgresStore.open(db.connect("psycopg"), migrate=True).close()
        except BaseException:
            db.drop()
            raise
    return db


@contextmanager
def fresh_database(*, migrated: bool = True) -> Iterator[Database]:
    """A schema for one test, dropped afterwards."""
    db = create_database(migrated=migrated)
    try:
        yield db
    finally:
        db.drop()
