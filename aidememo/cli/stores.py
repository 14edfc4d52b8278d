"""Where the command line's data lives, and how a `--database` value becomes a `Store`.

`--database` is a PostgreSQL URL (`postgresql://` or `postgres://`) or a SQLite file path.
Without one, commands use `$AIDEMEMO_HOME/ssot.sqlite` (default `~/.aidememo`); that data
directory is created 0700, and put back to 0700 if it exists with looser bits. An explicit
path's directory is left alone (the store creates a missing one 0700 and its files 0600).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.domain.errors import AidememoError

if TYPE_CHECKING:
    from aidememo.ports import Store
    from aidememo.stores.postgres import PostgresStore

HOME_ENV = "AIDEMEMO_HOME"
DATABASE_FILE = "ssot.sqlite"
DATA_DIR_MODE = 0o700
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
MISSING_POSTGRES_EXTRA = "pip install 'aidememo[origin]'"
CONNECT_TIMEOUT_S = 5


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    """`$AIDEMEMO_HOME`, or `~/.aidememo`."""
    env = os.environ if environ is None else environ
    value = env.get(HOME_ENV, "")
    return Path(value).expanduser() if value else Path.home() / ".aidememo"


def ensure_data_home(environ: Mapping[str, str] | None = None) -> Path:
    """Create the data directory 0700 (or tighten it to 0700) and return it."""
    home = data_home(environ)
    try:
        home.mkdir(mode=DATA_DIR_MODE, parents=True, exist_ok=True)
        os.chmod(home, DATA_DIR_MODE)
    except OSError as exc:
        raise CliError(f"cannot prepare data directory {home}: {exc.strerror or exc}") from exc
    return home


def default_database(environ: Mapping[str, str] | None = None) -> str:
    """The default SQLite file, with its data directory prepared."""
    return str(ensure_data_home(environ) / DATABASE_FILE)


def is_postgres(database: str) -> bool:
    """True for a PostgreSQL URL."""
    return database.startswith(POSTGRES_SCHEMES)


def describe_database(database: str) -> str:
    """The database as it may be printed: a URL loses its password, a path becomes absolute."""
    if is_postgres(database):
        parts = urlsplit(database)
        if parts.password is None:
            return database
        host = parts.hostname or ""
        netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return os.path.abspath(os.path.expanduser(database))


def psycopg_connector(url: str) -> Callable[[], Any]:
    """The origin's connection factory: psycopg 3, no server-side prepared statements (they
    would not survive a transaction-mode pool such as PgBouncer), bounded connect time."""
    try:
        import psycopg
    except ImportError:
        raise CliError(f"PostgreSQL needs psycopg: {MISSING_POSTGRES_EXTRA}", EXIT_USAGE) from None

    def connect() -> Any:
        return psycopg.connect(
            url, autocommit=False, prepare_threshold=None, connect_timeout=CONNECT_TIMEOUT_S
        )

    return connect


def open_postgres(url: str, *, migrate: bool = True, pool_size: int | None = None) -> PostgresStore:
    """Open a PostgreSQL store; by default migrate it first (under the advisory lock).
    `pool_size` None: the store's default pool."""
    from aidememo.stores.postgres import PostgresStore

    connect = psycopg_connector(url)
    options = {} if pool_size is None else {"pool_size": pool_size}
    try:
        return PostgresStore.open(connect, migrate=migrate, **options)
    except AidememoError as exc:
        raise CliError(f"cannot open database {describe_database(url)}: {exc.message}") from exc


def open_store(database: str, *, create: bool = True, pool_size: int | None = None) -> Store:
    """Open the canonical store named by `database` (a PostgreSQL URL or a SQLite path).

    A PostgreSQL database is migrated to this code's schema first, under
    `pg_advisory_xact_lock`, so concurrent start-ups never race. A SQLite file that does not
    exist is created, unless `create` is false: then it is refused and nothing is made (the
    admin commands that change or read existing data, where a new empty database would only
    hide a mistyped path). `pool_size` sizes a PostgreSQL store's connection pool (None: its
    default); SQLite has none.
    """
    if is_postgres(database):
        return open_postgres(database, pool_size=pool_size)
    from aidememo.stores.sqlite import SqliteStore

    path = os.path.expanduser(database)
    if os.path.isdir(path):
        raise CliError(f"database {path} is a directory; give a file path")
    if not create and not os.path.exists(path):
        raise CliError(
            f"database {os.path.abspath(path)} does not exist (nothing was created): give the "
            "path of an existing database; `aidememo bootstrap` creates a new one",
            EXIT_USAGE,
        )
    try:
        store: Store = SqliteStore.open_file(path, synchronous="FULL")
    except AidememoError as exc:
        raise CliError(f"cannot open database {path}: {exc.message}") from exc
    return store
