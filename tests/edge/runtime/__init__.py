"""A small double of the Cloudflare Workers runtime around our Python, for CPython tests.

What it stands in for, and only that (a double only for what cannot run here):
- the `workers` module of the Python Workers SDK: `WorkerEntrypoint`, `DurableObject`,
  `Request`, `Response` (`tests.edge.runtime.workers_module`);
- Durable Object namespaces (`getByName`, `idFromName`, `get`) and stubs whose RPC calls copy
  every payload through a structured-clone check (`tests.edge.runtime.objects`);
- each object's `ctx`: `storage` = `tests.doubles.do_storage.DoStorage` on real sqlite3 (with
  workerd's refusals) plus alarms, `blockConcurrencyWhile`, `id`;
- the rate-limit binding with a fixed window (`tests.edge.runtime.ratelimit`).

`Runtime.install()` puts the stand-in `workers` module on `sys.modules` and imports `worker`
and `durable_objects` against it; `uninstall()` removes all of them again, so no other test
ever sees the stand-in. Use it only through fixtures.
"""

from tests.edge.runtime.harness import EdgeClient, Runtime

__all__ = ["EdgeClient", "Runtime"]
