"""`aidememo memory init [--project]`: the config and the store (SPEC.md MEM-9, MEM-12).

The user init writes `~/.nuzo/config.json` (0600) naming the user store; `--project` writes
`<project>/.nuzo/config.json` naming the portable `.nuzo/memory/memories.sqlite` and the
project's `project:<hash>` scope, refusing symlinked managed paths, and adds Nuzo's rules
for the store to `<project>/.gitignore`. An existing config is kept.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from aidememo.agent_memory import paths
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.jstext import js_json
from aidememo.agent_memory.store import AgentMemory


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def cmd_init(ns: argparse.Namespace, _: AgentMemory | None) -> int:
    if ns.project:
        if ns.store is not None:
            raise AgentMemoryError(
                C.MEMORY_INIT_STORE_CONFLICT,
                "Project init cannot be combined with a custom --store path.",
            )
        root = os.path.realpath(os.getcwd())
        for path in (
            ".nuzo",
            ".nuzo/config.json",
            ".nuzo/memory",
            ".nuzo/memory/memories.sqlite",
            ".gitignore",
        ):
            if os.path.islink(os.path.join(root, path)):
                raise AgentMemoryError(
                    C.MEMORY_INIT_PATH_UNSAFE,
                    "Project init refuses symbolic links in managed paths.",
                    {"path": os.path.join(root, path)},
                )
        store_path, scope = paths.project_store_path(root), paths.project_scope(root)
        config, config_store = os.path.join(root, ".nuzo", "config.json"), paths.PROJECT_STORE
    else:
        runtime = paths.resolve_runtime(store=ns.store, scope=ns.scope)
        store_path, scope = runtime.store_path, runtime.scope
        default = paths.user_store_path()
        root_dir = (
            os.path.dirname(os.path.dirname(store_path))
            if store_path == default
            else os.path.dirname(store_path)
        )
        config, config_store = os.path.join(root_dir, "config.json"), store_path
    paths.ensure_private_dir(os.path.dirname(store_path))
    if not ns.project:
        for extra in ("exports", "logs"):
            paths.ensure_private_dir(os.path.join(os.path.dirname(store_path), extra))
    if not os.path.lexists(config):
        paths.ensure_private_dir(os.path.dirname(config))
        document: dict[str, Any] = {
            "version": 1,
            "default_scope": scope,
            "storage": {"driver": "sqlite", "path": config_store},
            "recall": {"limit": 8, "include_global": True},
            "privacy": {"allow_network": False, "record_recall_events": False},
        }
        paths.write_private_file(config, js_json(document, 2) + "\n")
    if ns.project:
        paths.ensure_project_gitignore(root)
    AgentMemory.open(store_path).close()
    _out("Nuzo initialized")
    _out(f"Store: {store_path}")
    _out(f"Scope: {scope}")
    _out("Network: disabled")
    return 0
