"""The edge's Durable Objects: thin translations from Workers RPC to the shared core.

- `ProjectCoordinator` (binding `PROJECTS`, one per project): the project's records and its
  single writer; runs `HttpApp.dispatch` with the caller the Worker authenticated; with the
  `AI` and `VECTORIZE` bindings also its semantic index in Vectorize (`project_index`,
  `edge_indexer`, `edge_search`, `vectors`).
- `TenantRegistry` (binding `TENANTS`, one per tenant): projects, actors, memberships, tokens.
- `TokenDirectory` (binding `TOKENS`, 256 shards by digest prefix): digest -> tenant, actor.

Only the stdlib, the core and the Workers SDK (`workers`) are imported, so the package runs
under Pyodide; `tests/unit/test_import_contract.py` enforces it. The package itself imports
nothing: the Worker's entry imports the classes from their modules, and the pure modules
(`durable_objects.rpc`) import on CPython without the SDK.
"""
