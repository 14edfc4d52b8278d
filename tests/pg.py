"""PostgreSQL for tests: the connection factories of both drivers and a fresh database per test.

`scripts/test` starts a throwaway PostgreSQL 15 cluster and exports `AIDEMEMO_TEST_PG_URL`.
Without it a PostgreSQL test is skipped, except under `CI=true`, where it fails: CI must never
pass by skipping the PostgreSQL tiers.

Every test gets its own database, cloned with `CREATE DATABASE ... TEMPLATE` from a template
migrated once per session (a clone takes a few milliseconds; migrating takes longer), and
dropped again at teardown.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from aidememo.stores.postgres import PostgresStore

URL_ENV = "AIDEMEMO_TEST_PG_URL"
DRIVERS = ("psycopg", "pg8000")

_template_lock = threading.Lock()
_template: list[str] = []


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


def psycopg_connect(url: str) -> Callable[[], Any]:
    """The origin's driver, configured as behind a transaction-mode pool."""
    import psycopg

    def connect() -> Any:
        return psycopg.connect(url, autocommit=False, prepare_threshold=None, connect_timeout=5)

    return connect


def pg8000_connect(url: str) -> Callable[[], Any]:
    """The edge's driver (pure Python, DB-API `format` paramstyle)."""
    import pg8000.dbapi

    parts = urlsplit(url)

    def connect() -> Any:
        return pg8000.dbapi.connect(
            user=unquote(parts.username or "postgres"),
            password=unquote(parts.password) if parts.password else None,
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            database=parts.path.lstrip("/") or "postgres",
            timeout=30,
        )

    return connect


def connector(driver: str, url: str) -> Callable[[], Any]:
    """The connection factory of `driver` ("psycopg" or "pg8000") for `url`."""
    return psycopg_connect(url) if driver == "psycopg" else pg8000_connect(url)


def admin(url: str) -> Any:
    """An autocommit psycopg connection for DDL around the tests (CREATE/DROP DATABASE)."""
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=5)


def _template_name(url: str) -> str:
    with _template_lock:
        if not _template:
            name = f"aidememo_tpl_{os.getpid()}_{uuid.uuid4().hex[:8]}"
            with admin(url) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            store = PostgresStore.open(psycopg_connect(with_database(url, name)), migrate=True)
            store.close()  # a template must have no connections when it is cloned
            _template.append(name)
        return _template[0]


def drop_template() -> None:
    """Drop the session's template database (called at session end)."""
    url = os.environ.get(URL_ENV, "")
    if url and _template:
        with admin(url) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{_template.pop()}" WITH (FORCE)')


@dataclass
class Database:
    """One fresh, migrated database; `url` names it, `connect(driver)` opens connections."""

    server: str
    name: str
    url: str

    def connect(self, driver: str) -> Callable[[], Any]:
        """A connection factory of `driver` for this database."""
        return connector(driver, self.url)

    def open(self, driver: str, **options: Any) -> PostgresStore:
        """A store on this database (already migrated: `open` only checks the schema)."""
        return PostgresStore.open(self.connect(driver), **options)

    def drop(self) -> None:
        """Drop the database, ending any session still connected to it."""
        with admin(self.server) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def create_database(*, migrated: bool = True) -> Database:
    """A new database, cloned from the migrated template (or empty with `migrated=False`)."""
    server = server_url()
    name = f"aidememo_t_{uuid.uuid4().hex[:16]}"
    template = f' TEMPLATE "{_template_name(server)}"' if migrated else ""
    with admin(server) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{template}')
    return Database(server, name, with_database(server, name))


@contextmanager
def fresh_database(*, migrated: bool = True) -> Iterator[Database]:
    """A database for one test, dropped afterwards."""
    db = create_database(migrated=migrated)
    try:
        yield db
    finally:
        db.drop()
