"""Runs inside Pyodide (tests/pyodide/runner.mjs --sockets): the PostgreSQL mode's store on the
vendored pg8000 against the real PostgreSQL of scripts/test, reached through PgBouncer in
transaction pool mode as the edge reaches Hyperdrive, over Node's TCP sockets (where workerd
has its own). The test puts `CONNECTION` (the Hyperdrive binding's host, port, user, password
and database) before this text.

`open_store` connects and checks the schema version (the edge never migrates); a bootstrap
writes the tenant, project, actor, membership and token binding in one transaction; the token
then authenticates in a read transaction.
"""

import hashlib
import sys
from typing import Any

import durable_objects.pg_connection as pgc
from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.service.identity import IdentityService

sys.path.insert(0, "/pkgs/python_modules")  # pg8000, imported by the first connection

connection: dict[str, Any] = globals()["CONNECTION"]  # set by the test before this text


class Binding:
    pass


binding = Binding()
for key, value in connection.items():
    setattr(binding, key, value)


class Env:
    STORAGE_MODE = "postgres"
    HYPERDRIVE = binding


store = pgc.open_store(Env)
identity = IdentityService(store, SystemClock(), RandomIds())
digest = hashlib.sha256(b"pyodide-postgres-token").digest()
identity.bootstrap(tenant_id="t_pyo", project_id="p_pyo", actor_id="a_pyo", token_sha256=digest)
caller = identity.authenticate(digest)
version = store.schema_version()
store.close()

RESULT = {
    "mode": store.mode,
    "schema_version": version,
    "caller": [caller.tenant_id, caller.actor_id],
    "driver_loaded": "pg8000" in sys.modules,
}
