"""The canonical store on PostgreSQL, over any DB-API 2 driver with `%s` placeholders.

The connection factory is injected (psycopg 3 at the origin, pg8000 at the edge); no driver
is imported anywhere in this package.
"""

from aidememo.stores.postgres.schema import SCHEMA_VERSION
from aidememo.stores.postgres.store import PostgresStore

__all__ = ["SCHEMA_VERSION", "PostgresStore"]
