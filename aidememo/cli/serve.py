"""`aidememo serve`: open the store, build the HTTP app, hand it to the origin server.

uvicorn and `origin` are imported only here, only when serving, so every other command works
without the `origin` extra.
"""

from __future__ import annotations

import importlib.util
import ipaddress

from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.stores import default_database, open_store

MISSING_EXTRA = "aidememo serve needs the origin extra: pip install 'aidememo[origin]'"


def is_loopback(host: str) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1 (brackets allowed)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def run_serve(
    *,
    database: str | None,
    host: str,
    port: int,
    allow_insecure_http: bool,
    handoff_lease_ms: int,
    dispatch: str = "writes",
    admin_token_sha256: bytes | None = None,
    mcp_allowed_origins: str = "",
) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit status.

    `admin_token_sha256` opens the admin routes to the token with that digest; without it
    they answer 401 `authentication_failed` to everyone."""
    if not is_loopback(host) and not allow_insecure_http:
        raise CliError(
            f"refusing plain HTTP on non-loopback host {host}: tokens would cross the network "
            "in clear text; put a TLS proxy in front and pass --allow-insecure-http",
            EXIT_USAGE,
        )
    if importlib.util.find_spec("uvicorn") is None:
        raise CliError(MISSING_EXTRA, EXIT_USAGE)
    from aidememo.http.app import HttpApp
    from aidememo.mcp.http import parse_origins
    from origin.limits import TransportLimits
    from origin.server import ServerSettings, serve

    try:
        limits = TransportLimits.from_environ()
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None

    store = open_store(database if database else default_database())
    try:
        app = HttpApp(
            store,
            handoff_lease_ms=handoff_lease_ms,
            admin_token_sha256=admin_token_sha256,
            mcp_allowed_origins=parse_origins(mcp_allowed_origins),
        )
    except BaseException:
        store.close()
        raise
    settings = ServerSettings(host=host, port=port, dispatch=dispatch, limits=limits)
    return serve(app, settings, close=store.close)
