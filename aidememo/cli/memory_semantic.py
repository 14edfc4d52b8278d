"""`aidememo memory semantic status|provision|rebuild|clear` (SPEC.md MEM-22).

Nuzo's commands, flags and output lines, answered without a model or an index
(`aidememo.memory.semantic`): `status` reports both missing, `clear` removes a sidecar,
`provision` and `rebuild` refuse with Nuzo's codes (exit 1).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from aidememo.memory import paths, semantic
from aidememo.memory.render import untrusted_json


def add_semantic_commands(command: Any) -> None:
    """Register `semantic` and its subcommands with `command(name, help)` of the memory group."""
    p = command("semantic", "the optional semantic index and local model (not built here)")
    sub = p.add_subparsers(dest="semantic_command", metavar="COMMAND", required=True)
    s = sub.add_parser("status", help="inspect model and index state without loading the model")
    s.add_argument("--model-path")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("provision", help="download the pinned local model (refused)")
    s.add_argument("--model-path")
    s.add_argument("--allow-network", action="store_true")
    s.add_argument("--yes", action="store_true")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("rebuild", help="rebuild the semantic sidecar (refused: no model)")
    s.add_argument("--model-path")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("clear", help="delete only the derived semantic sidecar")
    s.add_argument("--yes", action="store_true")


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def cmd_semantic(ns: argparse.Namespace, _store: None) -> int:
    from aidememo.cli.memory_commands import _open

    runtime = paths.resolve_runtime(store=ns.store, scope=ns.scope)
    if ns.semantic_command == "clear":
        removed = semantic.clear(runtime.store_path, yes=ns.yes)
        _out("Semantic index cleared" if removed else "Semantic index already absent")
        return 0
    if ns.semantic_command == "provision":
        semantic.provision(ns.model_path, yes=ns.yes, allow_network=ns.allow_network)
        return 0  # never reached: provisioning always refuses
    store = _open(runtime)
    try:
        active = store.db.conn.execute(
            "SELECT COUNT(*) FROM memories WHERE archived_at IS NULL"
        ).fetchone()[0]
    finally:
        store.close()
    if ns.semantic_command == "rebuild":
        semantic.rebuild(active, ns.model_path)
        return 0  # never reached: rebuilding always refuses
    report = semantic.status(active, runtime.store_path, ns.model_path)
    if ns.json:
        _out(untrusted_json(report))
    else:
        _out(f"Model: {report['model']['state']} ({report['model']['path']})")
        _out(f"Index: {report['index']['state']} ({report['index']['path']})")
        _out(f"Indexed: {report['index']['indexedMemories']}/{report['index']['activeMemories']}")
    return 0
