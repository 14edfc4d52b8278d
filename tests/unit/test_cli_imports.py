"""CLI-8: a command loads only what it needs. `aidememo --help` builds the top-level names
without importing any handler, store, memory or client module; an agent command's tree does
not import the admin, memory or MCP modules; the client package loads a name's module when
first used. Checked in fresh interpreters (imports, not timings: those are
scripts/bench_cli_startup.py's)."""

from __future__ import annotations

import json
import subprocess
import sys

from aidememo.cli.main import (
    ADMIN_COMMANDS,
    AGENT_COMMANDS,
    MCP_COMMANDS,
    MEMORY_COMMANDS,
    build_parser,
)

HEAVY = (
    "aidememo.cli.admin",
    "aidememo.cli.mcp.stdio",
    "aidememo.cli.mcp.install",
    "aidememo.cli.memory",
    "origin",
    "aidememo.agent_memory",
    "aidememo.client.models",
    "aidememo.ports",
    "aidememo.service",
    "httpx",
    "pydantic",
)


def _loaded_after(code: str) -> list[str]:
    probe = (
        "import json, sys\n"
        f"{code}\n"
        "print(json.dumps(sorted(k for k, v in sys.modules.items() if v is not None)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)  # fmt: skip
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def _heavy(loaded: list[str]) -> list[str]:
    return [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_cli8_help_imports_no_handler_store_memory_or_client_module() -> None:
    loaded = _loaded_after(
        "from aidememo.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    )
    assert _heavy(loaded) == []


def test_cli8_an_agent_commands_tree_leaves_admin_memory_and_mcp_unloaded() -> None:
    loaded = _loaded_after(
        "from aidememo.cli.main import build_parser\n"
        "build_parser('fact').parse_args(['fact', 'add', 'x', '--session', 's1'])"
    )
    assert _heavy(loaded) == []


def test_cli8_the_client_package_loads_a_names_module_on_first_use() -> None:
    loaded = _loaded_after("from aidememo.client import AidememoClientError, Client")
    assert "aidememo.client.sync" in loaded
    assert "aidememo.client.async_client" not in loaded


def test_cli8_the_top_level_names_and_help_match_the_whole_tree() -> None:
    def listing(parser: object) -> list[tuple[str, str | None]]:
        action = next(a for a in parser._actions if a.dest == "command")  # type: ignore[attr-defined]
        return [(c.dest, c.help) for c in action._choices_actions]

    table = {**ADMIN_COMMANDS, **AGENT_COMMANDS, **MCP_COMMANDS, **MEMORY_COMMANDS}
    assert listing(build_parser()) == list(table.items())
    assert listing(build_parser("")) == list(table.items())


def test_cli8_the_synchronous_client_imports_no_http_library_or_pydantic() -> None:
    loaded = _loaded_after(
        "from aidememo.client import Client, Written\n"
        "from aidememo.client.models import Identity\n"
        "Client('http://127.0.0.1:9', 't', 'p').close()\n"
        "Identity.model_validate({'tenant_id': 't', 'project_id': 'p', 'project_epoch': 'e',"
        " 'actor_id': 'a', 'role': 'writer'})"
    )
    assert [m for m in loaded if m.split(".")[0] in ("httpx", "pydantic", "httpcore")] == []
    assert "http.client" not in loaded and "aidememo.client.artifacts" not in loaded
