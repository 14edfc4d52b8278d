"""The SQLite-dialect canonical store: one schema and one SQL text for two executors.

`Sqlite3Executor` (stdlib `sqlite3`) is imported lazily by `SqliteStore.open_file` and
`open_memory`, so this package imports under Pyodide, which has no `sqlite3`.
"""

from aidememo.stores.sqlite.schema import SCHEMA_VERSION
from aidememo.stores.sqlite.store import SqliteStore

__all__ = ["SCHEMA_VERSION", "SqliteStore"]
