"""The Hyperdrive binding: `env.HYPERDRIVE` with the connection parameters of a database.

Cloudflare's binding exposes `connectionString`, `host`, `port`, `user`, `password` and
`database`; at the edge they name Hyperdrive's local pooler (transaction mode). Here they name
the PgBouncer that `scripts/test` starts in transaction pool mode in front of the test cluster,
so the Worker and the Durable Objects make real pg8000 connections through a real
transaction-mode pool, exactly as through Hyperdrive.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit


class Hyperdrive:
    """`env.HYPERDRIVE` for one PostgreSQL URL."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        # The binding's string carries no query (no options, no application_name).
        self.connectionString = parts._replace(query="").geturl()
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 5432
        self.user = unquote(parts.username or "")
        self.password = unquote(parts.password) if parts.password else ""
        self.database = unquote(parts.path.lstrip("/")) or "postgres"
