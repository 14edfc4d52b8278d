"""`aidememo memory semantic status|provision|rebuild|clear` (SPEC.md MEM-22).

Nuzo's commands, flags and output lines over aidememo's sidecar and model directory
(`aidememo.agent_memory.semantic`): `status` inspects without loading the model, `provision` checks
and records the installed bundled model (or an operator's ONNX model in `--model-path`),
`rebuild` embeds the active memories into a new sidecar, `clear` deletes the sidecar.
`--allow-network` is accepted for Nuzo's scripts and changes nothing: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from aidememo.agent_memory import paths, semantic
from aidememo.agent_memory.render import untrusted_json
from aidememo.cli.memory.vectors import OnnxRuntime


def add_semantic_commands(command: Any) -> None:
    """Register `semantic` and its subcommands with `command(name, help)` of the memory group."""
    p = command("semantic", "the derived semantic sidecar and the local model")
    sub = p.add_subparsers(dest="semantic_command", metavar="COMMAND", required=True)
    s = sub.add_parser("status", help="inspect model and index state without loading the model")
    s.add_argument("--model-path")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser(
        "provision", help="verify and record the installed local model (nothing is downloaded)"
    )
    s.add_argument("--model-path")
    s.add_argument("--allow-network", action="store_true", help="accepted; nothing is downloaded")
    s.add_argument("--yes", action="store_true")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("rebuild", help="rebuild the semantic sidecar from active memories")
    s.add_argument("--model-path")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("clear", help="delete only the derived semantic sidecar")
    s.add_argument("--yes", action="store_true")


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def cmd_semantic(ns: argparse.Namespace, _store: None) -> int:
    from aidememo.agent_memory.store import AgentMemory

    runtime = paths.resolve_runtime(store=ns.store, scope=ns.scope)
    if ns.semantic_command == "clear":
        removed = semantic.clear(runtime.store_path, yes=ns.yes)
        _out("Semantic index cleared" if removed else "Semantic index already absent")
        return 0
    models = OnnxRuntime()
    if ns.semantic_command == "provision":
        done = semantic.provision(ns.model_path, models, yes=ns.yes)
        if ns.json:
            _out(untrusted_json(done))
        else:
            _out(
                "Semantic model provisioned"
                if done["provisioned"]
                else "Semantic model already ready"
            )
            _out(f"Path: {done['path']}")
            _out(f"Files: {done['files']}")
            _out(f"Bytes: {done['bytes']}")
        return 0
    store = AgentMemory.open_runtime(runtime)
    try:
        if ns.semantic_command == "rebuild":
            built = semantic.rebuild(store, models, ns.model_path)
            if ns.json:
                _out(untrusted_json(built))
            else:
                _out("Semantic index rebuilt")
                _out(f"Path: {built['path']}")
                _out(f"Indexed memories: {built['indexedMemories']}")
            return 0
        report = semantic.status(store, models, ns.model_path)
    finally:
        store.close()
    if ns.json:
        _out(untrusted_json(report))
    else:
        _out(f"Model: {report['model']['state']} ({report['model']['path']})")
        _out(f"Index: {report['index']['state']} ({report['index']['path']})")
        _out(f"Indexed: {report['index']['indexedMemories']}/{report['index']['activeMemories']}")
    return 0
