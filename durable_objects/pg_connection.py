"""The edge's PostgreSQL mode: `STORAGE_MODE=postgres`, pg8000 over the Hyperdrive binding.

This is the one module of the edge that imports pg8000 (`tests/unit/test_import_contract.py`
enforces it), and only inside the connection factory, so nothing loads the driver unless a
connection is actually made in this mode. pg8000 and its pure-Python dependencies are vendored
by `scripts/build_edge.py` into `python_modules/` next to `wrangler.toml`, which wrangler uploads
beside the bundle.

What the binding gives (Cloudflare "Hyperdrive: Python Workers", compatibility date
2026-09-08 or later): `env.HYPERDRIVE.host`, `.port`, `.user`, `.password`, `.database` and
`.connectionString`. The Worker reaches Hyperdrive through the runtime's TCP sockets, which the
stdlib `socket` module of Python Workers wraps, so pg8000 runs unchanged. Driver-side TLS is
off (`ssl_context=False`): that hop stays inside Cloudflare, and Hyperdrive speaks TLS to the
origin database itself.

Hyperdrive pools in transaction mode, so the shared `PostgresStore` keeps no session state
(every setting `SET LOCAL`, every lock a transaction lock; SPEC.md STORE-8), and the edge never
migrates: a schema older than this code is `storage_failure` naming `aidememo admin migrate`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from aidememo.domain.errors import ErrorCode, fail
from aidememo.stores.postgres import PostgresStore

STORAGE_MODE = "STORAGE_MODE"  # var: "sqlite" (default) or "postgres"
HYPERDRIVE = "HYPERDRIVE"  # [[hyperdrive]] binding
SQLITE = "sqlite"
POSTGRES = "postgres"
MODES = (SQLITE, POSTGRES)

# Connections per store. A project object runs one call at a time (its own lock, since a
# socket wait lets the next call in), so one connection serves it; Hyperdrive does the real
# pooling in front of the database.
POOL_SIZE = 1
# How long a call waits for the store's connection before `storage_failure`.
ACQUIRE_TIMEOUT_S = 5.0


def storage_mode(env: Any) -> str:
    """The `STORAGE_MODE` var: `sqlite` when unset or empty; anything else but the two modes is
    a configuration error (`ValueError`, which the Worker answers with 503)."""
    raw = getattr(env, STORAGE_MODE, None)
    mode = str(raw).strip().lower() if raw is not None else ""
    if not mode:
        return SQLITE
    if mode not in MODES:
        raise ValueError(f"STORAGE_MODE must be one of {', '.join(MODES)}, not {raw!r}")
    return mode


def postgres_mode(env: Any) -> bool:
    """True when the deployment keeps its records in PostgreSQL through Hyperdrive."""
    return storage_mode(env) == POSTGRES


def connection_params(env: Any) -> dict[str, Any]:
    """pg8000's keyword arguments from the Hyperdrive binding's parameters (its
    `connectionString` when the separate attributes are missing)."""
    hd = getattr(env, HYPERDRIVE, None)
    if hd is None:
        raise fail(
            ErrorCode.STORAGE_FAILURE,
            f"STORAGE_MODE=postgres needs the {HYPERDRIVE} binding ([[hyperdrive]])",
        )
    host = getattr(hd, "host", None)
    if host:
        port = getattr(hd, "port", None)
        params: dict[str, Any] = {
            "host": str(host),
            "port": int(port) if port not in (None, "") else 5432,
            "user": str(getattr(hd, "user", "") or ""),
            "password": _optional(getattr(hd, "password", None)),
            "database": _optional(getattr(hd, "database", None)),
        }
    else:
        params = _from_url(str(getattr(hd, "connectionString", "") or ""))
    if not params["user"]:
        raise fail(ErrorCode.STORAGE_FAILURE, f"the {HYPERDRIVE} binding names no user")
    return params


def _optional(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _from_url(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql") or not parts.hostname:
        raise fail(ErrorCode.STORAGE_FAILURE, f"the {HYPERDRIVE} binding has no usable address")
    return {
        "host": parts.hostname,
        "port": parts.port or 5432,
        "user": unquote(parts.username or ""),
        "password": unquote(parts.password) if parts.password else None,
        "database": unquote(parts.path.lstrip("/")) or None,
    }


def pg8000_connect(params: dict[str, Any]) -> Callable[[], Any]:
    """A connection factory for the shared store: a new pg8000 DB-API connection per call.

    pg8000 is imported on the first call, never at module import, so the SQLite mode (and
    the Pyodide tier, which has no sockets) never loads it."""

    def connect() -> Any:
        import pg8000.dbapi

        return pg8000.dbapi.connect(**params, ssl_context=False)

    return connect


def open_store(env: Any, *, check_schema: bool = True) -> PostgresStore:
    """The shared PostgreSQL store over the binding. Never migrates: with `check_schema` the
    schema version is read first, and an older schema is `storage_failure` naming
    `aidememo admin migrate` (a newer one is refused too)."""
    connect = pg8000_connect(connection_params(env))
    options: dict[str, Any] = {
        "pool_size": POOL_SIZE,
        "acquire_timeout_s": ACQUIRE_TIMEOUT_S,
        "mode": "edge",
    }
    if check_schema:
        return PostgresStore.open(connect, migrate=False, **options)
    return PostgresStore(connect, **options)
