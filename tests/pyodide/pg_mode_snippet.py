"""Runs inside Pyodide (tests/pyodide/runner.mjs): the PostgreSQL mode's modules import, and the
vendored pg8000 imports from python_modules/ with its dependencies. Nothing here connects:
pg_store_snippet.py runs the store on the real PostgreSQL (runner.mjs --sockets), and the
request flows of that mode run on CPython against it (tests/edge/test_postgres_mode.py) and in
Pyodide through the whole edge (test_edge_postgres_pyodide.py).
"""

import sys
from importlib import metadata

import durable_objects.pg_connection as pgc
from aidememo.stores.postgres import SCHEMA_VERSION, PostgresStore


class Binding:
    host = "hyperdrive.local"
    port = 5432
    user = "aidememo"
    password = "secret"
    database = "aidememo"
    connectionString = "postgresql://aidememo:secret@hyperdrive.local:5432/aidememo"


class Env:
    STORAGE_MODE = "postgres"
    HYPERDRIVE = Binding()


loaded_at_import = "pg8000" in sys.modules
params = pgc.connection_params(Env)
store = pgc.open_store(Env, check_schema=False)  # makes no connection
loaded_before_connect = "pg8000" in sys.modules

sys.path.insert(0, "/pkgs/python_modules")
import asn1crypto.x509  # noqa: E402
import dateutil.parser  # noqa: E402
import pg8000.dbapi  # noqa: E402
import scramp  # noqa: E402
import six  # noqa: E402

RESULT = {
    "python": list(sys.version_info[:2]),
    "mode": pgc.storage_mode(Env),
    "params": params,
    "store": [type(store).__name__, store.mode, store.pool.size, isinstance(store, PostgresStore)],
    "schema_version": SCHEMA_VERSION,
    "loaded_at_import": loaded_at_import,
    "loaded_before_connect": loaded_before_connect,
    "paramstyle": pg8000.dbapi.paramstyle,
    "files": {
        m.__name__: m.__file__
        for m in (pg8000.dbapi, scramp, dateutil.parser, asn1crypto.x509, six)
    },
    "versions": {
        name: metadata.version(name)
        for name in ("pg8000", "scramp", "asn1crypto", "python-dateutil", "six")
    },
}
