"""Layering contract: dependencies point inward.

Every import statement (module level or inside functions) of the edge core, worker/ and
durable_objects/ is read from the AST, relative imports resolved, and checked against an allow
list. Violations are reported as file:line. Missing folders are fine: the tree grows over time.

Core (stdlib only, runs on CPython and Pyodide): the stdlib and the core packages; `sqlite3`
only in aidememo/stores/sqlite/sqlite3_executor.py and in the local memory store's SQLite
modules (MEMORY_SQLITE_MODULES); the aidememo root (`__version__`). The memory store
(aidememo/agent_memory/) is core too:
stdlib and core only; the rest of the core never imports it. A core
module may also reach the Pyodide runtime (`pyodide`, `js`) inside a `try:` whose handler catches
ImportError, so that it still imports on CPython.
Edge (worker/, durable_objects/): the stdlib, the Workers SDK (`workers`, `js`, `pyodide`), the
core and each other; pg8000 only in durable_objects/pg_connection.py.
Client (aidememo/client/, CPython only): the stdlib, httpx, pydantic, itself and
aidememo.domain; nothing but the agent commands of aidememo.cli (imported only when one
runs, SPEC.md CLI-2) and tests imports it, the origin included (SPEC.md CLIENT-4).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CORE_PACKAGES = (
    "aidememo.domain",
    "aidememo.ports",
    "aidememo.service",
    "aidememo.stores",
    "aidememo.http",
    "aidememo.conformance",
    "aidememo.mcp",
    "aidememo.agent_memory",
    "aidememo.bodies",
)
CORE_PATHS = tuple(
    REPO / p
    for p in (
        "aidememo/__init__.py",
        "aidememo/domain",
        "aidememo/service",
        "aidememo/ports.py",
        "aidememo/stores",
        "aidememo/http",
        "aidememo/conformance",
        "aidememo/mcp",
        "aidememo/agent_memory",
        "aidememo/bodies",
    )
)
EDGE_PATHS = (REPO / "worker", REPO / "durable_objects")
CLIENT_PATHS = (REPO / "aidememo/client",)
ORIGIN_PATHS = (REPO / "origin",)
CLIENT_ALLOWED = ("httpx", "pydantic", "aidememo.client", "aidememo.domain")
RUNTIME = ("workers", "js", "pyodide")
SQLITE3 = frozenset({"sqlite3", "_sqlite3"})
SQLITE3_MODULE = REPO / "aidememo/stores/sqlite/sqlite3_executor.py"
MEMORY_SQLITE_MODULES = frozenset(
    REPO / "aidememo/agent_memory" / name
    for name in (
        "db.py",
        "schema.py",
        "rehome.py",
        "integrity.py",
        "repair_fts.py",
        "backup.py",
        "open_checks.py",
        "sidecar.py",
    )
)
PG_CONNECTION_MODULE = REPO / "durable_objects/pg_connection.py"
STDLIB = frozenset(sys.stdlib_module_names)
IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


@dataclass(frozen=True)
class Import:
    line: int
    name: str  # absolute module name, relative imports resolved
    guarded: bool  # inside `try:` whose handlers catch ImportError


def _py_files(paths: tuple[Path, ...]) -> Iterator[Path]:
    for path in paths:
        if path.is_file() and path.suffix == ".py":
            yield path
        elif path.is_dir():
            yield from (p for p in sorted(path.rglob("*.py")) if "__pycache__" not in p.parts)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _catches_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(t, ast.Name) and t.id in IMPORT_ERRORS for t in types):
            return True
    return False


def _guarded_nodes(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside the body of a try that catches ImportError."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and _catches_import_error(node):
            for stmt in node.body:
                guarded.update(id(n) for n in ast.walk(stmt))
    return guarded


def _imports(path: Path, root: Path = REPO) -> Iterator[Import]:
    """Yield every import of the file, module names made absolute against root."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    guarded = _guarded_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(node.lineno, alias.name, id(node) in guarded)
        elif isinstance(node, ast.ImportFrom):
            if not node.level:
                yield Import(node.lineno, node.module or "", id(node) in guarded)
                continue
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - (node.level - 1)])
            if node.module:
                yield Import(node.lineno, f"{base}.{node.module}", id(node) in guarded)
            else:  # from . import a, b: each name may be a submodule
                for alias in node.names:
                    yield Import(node.lineno, f"{base}.{alias.name}", id(node) in guarded)


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _core_violation(path: Path, imp: Import) -> str | None:
    top = imp.name.partition(".")[0]
    if top in SQLITE3:
        allowed = path == SQLITE3_MODULE or path in MEMORY_SQLITE_MODULES
        return None if allowed else "sqlite3 outside sqlite3_executor.py and the memory store"
    if _within(imp.name, ("aidememo.agent_memory",)) and not _within(
        _module_name(path, REPO), ("aidememo.agent_memory",)
    ):
        return "the memory store outside aidememo/agent_memory"
    if top in STDLIB or imp.name == "aidememo" or _within(imp.name, CORE_PACKAGES):
        return None
    if _within(imp.name, ("js", "pyodide")):
        return None if imp.guarded else "Pyodide runtime import without an ImportError guard"
    return "not stdlib or the core"


def _edge_violation(path: Path, imp: Import) -> str | None:
    top = imp.name.partition(".")[0]
    if top in SQLITE3:
        return "sqlite3 at the edge"
    if top in STDLIB or imp.name == "aidememo":
        return None
    if _within(imp.name, RUNTIME + CORE_PACKAGES + ("worker", "durable_objects")):
        return None
    if top == "pg8000" and path == PG_CONNECTION_MODULE:
        return None
    return "not stdlib, the Workers SDK or the core"


def _client_violation(path: Path, imp: Import) -> str | None:
    top = imp.name.partition(".")[0]
    if top in STDLIB or _within(imp.name, CLIENT_ALLOWED):
        return None
    return "not stdlib, httpx, pydantic or aidememo.domain"


def _origin_violation(path: Path, imp: Import) -> str | None:
    return "the client is not the origin's" if _within(imp.name, ("aidememo.client",)) else None


Rule = Callable[[Path, Import], str | None]


def _violations(paths: tuple[Path, ...], rule: Rule) -> list[str]:
    found = []
    for path in _py_files(paths):
        for imp in _imports(path):
            reason = rule(path, imp)
            if reason:
                found.append(f"{path.relative_to(REPO)}:{imp.line}: imports {imp.name} ({reason})")
    return found


def test_layer2_core_imports_only_stdlib_and_core() -> None:
    violations = _violations(CORE_PATHS, _core_violation)
    assert not violations, "\n".join(violations)


def test_layer2_edge_imports_only_stdlib_sdk_and_core() -> None:
    violations = _violations(EDGE_PATHS, _edge_violation)
    assert not violations, "\n".join(violations)


def test_client4_client_imports_only_stdlib_httpx_pydantic_and_domain() -> None:
    violations = _violations(CLIENT_PATHS, _client_violation)
    assert not violations, "\n".join(violations)


def test_client4_origin_never_imports_the_client() -> None:
    violations = _violations(ORIGIN_PATHS, _origin_violation)
    assert not violations, "\n".join(violations)


EMBEDDING_PATHS = (REPO / "aidememo/embedding",)
EMBEDDING_ALLOWED = ("numpy", "onnxruntime", "tokenizers", "aidememo.embedding")


def _embedding_violation(path: Path, imp: Import) -> str | None:
    top = imp.name.partition(".")[0]
    if top in STDLIB or imp.name == "aidememo":
        return None
    if _within(imp.name, EMBEDDING_ALLOWED + CORE_PACKAGES):
        return None
    return "not stdlib, numpy, onnxruntime, tokenizers or the core"


def test_sem2_embedding_providers_import_only_their_runtime_and_the_core() -> None:
    """The providers (SEM-2) are a module of their own, reusable beside the core: the core
    never imports them (the core rule above), and they need nothing but their runtime."""
    violations = _violations(EMBEDDING_PATHS, _embedding_violation)
    assert not violations, "\n".join(violations)


def _imp(name: str, guarded: bool = False) -> Import:
    return Import(1, name, guarded)


def test_layer2_rules_reject_outward_imports() -> None:
    domain = REPO / "aidememo/domain/x.py"
    for name in ("origin.app", "aidememo.cli.main", "aidememo.client", "mcp.server"):
        assert _core_violation(domain, _imp(name)), name
    for name in ("aidememo.agent_memory", "worker.entry", "durable_objects", "pydantic", "httpx"):
        assert _core_violation(domain, _imp(name)), name
    assert _core_violation(REPO / "aidememo/stores/sqlite/store.py", _imp("sqlite3"))
    assert _core_violation(REPO / "aidememo/agent_memory/store.py", _imp("sqlite3"))
    assert _core_violation(REPO / "aidememo/agent_memory/db.py", _imp("httpx"))
    assert _core_violation(domain, _imp("pyodide.ffi"))
    entry = REPO / "worker/entry.py"
    for name in ("pg8000", "origin.settings", "mcp.server", "aidememo.cli", "sqlite3", "boto3"):
        assert _edge_violation(entry, _imp(name)), name
    assert _edge_violation(entry, _imp("aidememo.client"))
    client = REPO / "aidememo/client/sync.py"
    for name in ("aidememo.service", "aidememo.http.routes", "origin.app", "aidememo.cli", "boto3"):
        assert _client_violation(client, _imp(name)), name
    for name in ("httpx", "pydantic", "aidememo.domain.command_ids", "json"):
        assert _client_violation(client, _imp(name)) is None, name
    assert _origin_violation(REPO / "origin/app.py", _imp("aidememo.client.sync"))


def test_layer2_rules_accept_inward_imports() -> None:
    service = REPO / "aidememo/service/x.py"
    for name in ("json", "aidememo", "aidememo.domain.errors", "aidememo.ports", "typing"):
        assert _core_violation(service, _imp(name)) is None, name
    assert _core_violation(SQLITE3_MODULE, _imp("sqlite3")) is None
    for module in MEMORY_SQLITE_MODULES:
        assert _core_violation(module, _imp("sqlite3")) is None
    memory = REPO / "aidememo/agent_memory/store.py"
    assert _core_violation(memory, _imp("aidememo.domain.secrets")) is None
    assert _core_violation(memory, _imp("aidememo.agent_memory.db")) is None
    assert _core_violation(service, _imp("pyodide.ffi", guarded=True)) is None
    entry = REPO / "worker/entry.py"
    for name in ("workers", "js", "pyodide.ffi", "aidememo.stores.sqlite.schema", "worker.auth"):
        assert _edge_violation(entry, _imp(name)) is None, name
    assert _edge_violation(PG_CONNECTION_MODULE, _imp("pg8000.dbapi")) is None


def test_layer2_relative_and_guarded_imports_are_resolved(tmp_path: Path) -> None:
    package = tmp_path / "aidememo" / "service"
    package.mkdir(parents=True)
    probe = package / "probe.py"
    probe.write_text(
        "from . import ledger\n"
        "from ..cli import main\n"
        "from .. import agent_memory\n"
        "def later() -> None:\n"
        "    import origin.app\n"
        "try:\n"
        "    from pyodide.ffi import jsnull\n"
        "except (ImportError, AttributeError):\n"
        "    jsnull = None\n"
    )
    found = [(i.name, i.guarded) for i in _imports(probe, tmp_path)]
    assert sorted(found) == sorted(
        [
            ("aidememo.service.ledger", False),
            ("aidememo.cli", False),
            ("aidememo.agent_memory", False),
            ("origin.app", False),
            ("pyodide.ffi", True),
        ]
    )
    (package / "__init__.py").write_text("from .ledger import x\n")
    assert [i.name for i in _imports(package / "__init__.py", tmp_path)] == [
        "aidememo.service.ledger"
    ]


# -- layer order and cycles inside the core (docs/architecture.md, SPEC.md LAYER-1) ------------

LAYERS: tuple[tuple[str, ...], ...] = (
    ("aidememo.domain", "aidememo.metrics"),
    ("aidememo.ports", "aidememo.service"),
    (
        "aidememo.stores",
        "aidememo.bodies",
        "aidememo.embedding",
        "aidememo.agent_memory",
        "aidememo.conformance",
    ),
    ("aidememo.http", "aidememo.mcp", "aidememo.console"),
    ("aidememo.cli", "aidememo.client", "origin", "worker", "durable_objects"),
)
"""The layers, lowest first: a module imports only its own layer and the ones before it."""

FRONT_PATHS = tuple(REPO / p for p in ("aidememo", "origin", "worker", "durable_objects"))


def _layer(name: str) -> int | None:
    """The layer of a module name, None outside the layered packages (the stdlib, a driver)."""
    if name == "aidememo":
        return 0  # the package root: `__version__`
    for at, prefixes in enumerate(LAYERS):
        if _within(name, prefixes):
            return at
    return None


def _modules(paths: tuple[Path, ...]) -> dict[str, Path]:
    return {_module_name(path, REPO): path for path in _py_files(paths)}


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of `modules` it imports, by any import statement: module level,
    inside functions and under `TYPE_CHECKING` alike (`from a import b` is `a.b` when that is
    a module, else `a`)."""

    def target(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        names: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - (node.level - 1)])
                    base = f"{base}.{node.module}" if node.module else base
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    names.append(sub if sub in modules else base)
        found = (target(name) for name in names)
        graph[module] = {t for t in found if t is not None and t != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _layer_violations(paths: tuple[Path, ...]) -> list[str]:
    found = []
    for path in _py_files(paths):
        own = _layer(_module_name(path, REPO))
        if own is None:
            continue
        for imp in _imports(path):
            theirs = _layer(imp.name)
            if theirs is not None and theirs > own:
                found.append(f"{path.relative_to(REPO)}:{imp.line}: imports {imp.name} (layer up)")
    return found


def test_layer1_imports_run_down_the_layers() -> None:
    violations = _layer_violations(FRONT_PATHS)
    assert not violations, "\n".join(violations)


def test_layer1_no_import_cycle_in_the_core_or_the_fronts() -> None:
    cycles = _cycles(_graph(_modules(FRONT_PATHS)))
    assert not cycles, sorted(sorted(c) for c in cycles)


def test_layer1_rules_find_cycles_and_upward_imports() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [frozenset({"a", "b", "c"})]
    assert _layer("aidememo.domain.ids") == 0 and _layer("aidememo.service.ledger") == 1
    assert _layer("aidememo.stores.sqlite.store") == 2 and _layer("aidememo.http.routes") == 3
    assert _layer("origin.app") == 4 and _layer("json") is None
