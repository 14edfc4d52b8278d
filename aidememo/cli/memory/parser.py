"""`aidememo memory ...`: the local memory store's commands (SPEC.md MEM-12).

The commands, flags, output lines, `--json` shapes and exit statuses are Nuzo 1.2's `nuzo memory`
ones, so scripts written for it keep working: `--store` and `--scope` come before the subcommand
(`aidememo memory --store S remember ...`); a refused operation prints `CODE: message` to stderr
and exits 1; a bad flag exits 2; an unexpected failure prints `NUZO_INTERNAL_ERROR: Unexpected
CLI failure.` and exits 70.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

from aidememo.agent_memory.model import (
    CAPTURE_DECISIONS,
    CHALLENGE_OUTCOMES,
    CONFIDENCE_STATES,
    EVENT_TYPES,
    RELATIONS,
)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("Expected a positive integer.") from None
    if value < 1 or str(value) != text.strip():
        raise argparse.ArgumentTypeError("Expected a positive integer.")
    return value


def _confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("Expected a number between 0 and 1.") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError("Expected a number between 0 and 1.")
    return value


def _provenance(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        value = []
    if value is not None and not isinstance(value, dict):
        raise argparse.ArgumentTypeError("Expected provenance to be a JSON object or null.")
    return value


def _iso(field: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        from aidememo.agent_memory.jstext import normalize_date

        normal = normalize_date(text)
        if normal is None:
            raise argparse.ArgumentTypeError(f"Expected {field} to be an ISO timestamp.")
        return normal

    parse.__name__ = "ISO timestamp"
    return parse


def _choice(values: tuple[str, ...], what: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in values:
            raise argparse.ArgumentTypeError(f"Expected {what} to be one of: {', '.join(values)}.")
        return text

    parse.__name__ = what
    return parse


def _draft_flags(p: argparse.ArgumentParser, *, confidence: bool = True) -> None:
    p.add_argument("--tag", nargs="+", action="extend", help="memory tag (repeatable)")
    if confidence:
        p.add_argument("--confidence", type=_confidence, help="confidence between 0 and 1")
    p.add_argument(
        "--confidence-state",
        type=_choice(CONFIDENCE_STATES, "confidence state"),
        help="confidence state",
    )
    p.add_argument(
        "--provenance-json",
        type=_provenance,
        default=argparse.SUPPRESS,
        help="structured provenance metadata as JSON",
    )
    p.add_argument("--review-after", type=_iso("review-after"), help="ISO review timestamp")
    p.add_argument("--expires-at", type=_iso("expires-at"), help="ISO expiry timestamp")


def add_memory_commands(sub: Any) -> None:
    """Register `memory` and its subcommands on the root command tree."""
    from aidememo.cli.memory import commands as run

    memory = sub.add_parser("memory", help="the local memory store (Nuzo compatible)")
    memory.add_argument("--store", help="path to the SQLite memory store")
    memory.add_argument("--scope", help="memory scope (project:auto for this project)")
    memory.set_defaults(_run=run.dispatch, _opts=[], memory_command=None)
    cmds = memory.add_subparsers(dest="memory_command", metavar="COMMAND", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = cmds.add_parser(name, help=help, description=help)
        return parser

    command("init", "initialize the local memory store").add_argument(
        "--project", action="store_true", help="initialize project memory in .nuzo/memory"
    )

    p = command("remember", "store a memory")
    p.add_argument("content")
    p.add_argument("--kind", required=True)
    _draft_flags(p, confidence=False)
    p.add_argument("--source", default="nuzo:cli")

    for name, source in (
        ("suggest-capture", "nuzo:cli:capture-suggestion"),
        ("confirm-capture", "nuzo:cli:capture-confirmed"),
    ):
        p = command(name, f"{name.replace('-', ' ')} of a memory draft")
        p.add_argument("content")
        p.add_argument("--kind", required=True)
        p.add_argument("--reason", required=True)
        _draft_flags(p)
        p.add_argument("--source", default=source)
        p.add_argument("--json", action="store_true")
        if name == "suggest-capture":
            p.add_argument(
                "--relationship-mode", type=_choice(("exact", "bounded"), "relationship mode")
            )
        else:
            p.add_argument("--decision", required=True, type=_choice(CAPTURE_DECISIONS, "decision"))
            p.add_argument("--target-memory-id")
            p.add_argument("--expected-revision", type=_positive)
            p.add_argument("--actor", default="nuzo:cli")
            p.add_argument("--yes", action="store_true")

    p = command("recall", "recall relevant memories")
    p.add_argument("query")
    p.add_argument("--limit", type=_positive)
    p.add_argument("--include-global", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--mode", default="fts", type=_choice(("fts", "semantic", "hybrid"), "mode"))
    p.add_argument("--semantic-fallback", type=_choice(("error", "fts"), "semantic fallback"))
    p.add_argument("--model-path")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--single-store",
        action="store_true",
        help="search only the resolved store (no user or team tier)",
    )
    p.add_argument(
        "--team-profile",
        help="also search the team project of this saved profile"
        " (default: AIDEMEMO_MEMORY_TEAM_PROFILE)",
    )

    p = command("list", "list memories")
    p.add_argument("--tag", nargs="+", action="extend")
    p.add_argument("--all-scopes", action="store_true")
    p.add_argument("--include-archived", action="store_true")
    p.add_argument("--needs-review", action="store_true")

    p = command("review-relations", "report relation-governance candidates (read-only)")
    p.add_argument("--include-archived", action="store_true")
    p.add_argument("--needs-review", action="store_true")
    p.add_argument("--limit", type=_positive)
    p.add_argument("--json", action="store_true")

    p = command("relate", "create an explicit relation between two memories")
    p.add_argument("source_id")
    p.add_argument("--target", required=True)
    p.add_argument("--relation", required=True, type=_choice(RELATIONS, "relation"))
    p.add_argument("--reason")
    p.add_argument("--actor", default="nuzo:cli")

    p = command("relations", "list explicit relations of a memory")
    p.add_argument("id")
    p.add_argument("--outgoing-only", action="store_true")
    p.add_argument("--limit", type=_positive)

    p = command("unrelate", "remove an explicit relation")
    p.add_argument("id")
    p.add_argument("--reason")
    p.add_argument("--actor", default="nuzo:cli")

    p = command("show", "show one memory with relations and audit events")
    p.add_argument("id")
    p.add_argument("--history-limit", type=_positive)
    p.add_argument("--json", action="store_true")

    p = command("challenge", "mark a memory valid, needing review, stale, incorrect or superseded")
    p.add_argument("id")
    p.add_argument(
        "--outcome", required=True, type=_choice(CHALLENGE_OUTCOMES, "challenge outcome")
    )
    p.add_argument("--reason", required=True)
    p.add_argument("--superseded-by")
    p.add_argument("--expected-revision", type=_positive)
    p.add_argument("--actor", default="nuzo:cli")
    p.add_argument("--json", action="store_true")

    p = command("update", "update a memory")
    p.add_argument("id")
    p.add_argument("--content")
    p.add_argument("--kind")
    p.add_argument("--scope", dest="new_scope")
    _draft_flags(p)
    p.add_argument("--clear-review-after", action="store_true")
    p.add_argument("--clear-expires-at", action="store_true")
    p.add_argument("--expected-revision", type=_positive)

    p = command("forget", "archive or delete a memory")
    p.add_argument("id")
    p.add_argument("--archive", action="store_true")
    p.add_argument("--delete", action="store_true")
    p.add_argument("--yes", action="store_true")
    p.add_argument("--reason")
    p.add_argument("--expected-revision", type=_positive)

    command("history", "list audit events of a memory").add_argument("id")

    p = command("audit", "list store-wide audit events")
    p.add_argument("--memory-id")
    p.add_argument(
        "--event-type", nargs="+", action="extend", type=_choice(EVENT_TYPES, "audit event type")
    )
    p.add_argument("--actor")
    p.add_argument("--scope", dest="filter_scope")
    p.add_argument("--since")
    p.add_argument("--until")
    p.add_argument("--limit", type=_positive)

    p = command("forget-many", "preview or apply a bulk archive or delete")
    p.add_argument("--scope", dest="filter_scope")
    p.add_argument("--tag", nargs="+", action="extend")
    p.add_argument("--all", action="store_true")
    p.add_argument("--delete", action="store_true")
    p.add_argument("--apply", action="store_true")
    p.add_argument("--yes", action="store_true")
    p.add_argument("--reason")

    p = command("export", "export memories as a versioned document")
    p.add_argument("--path")
    p.add_argument("--format", type=_choice(("json", "markdown"), "export format"))
    p.add_argument("--tag", nargs="+", action="extend")
    p.add_argument("--include-archived", action="store_true")

    p = command("import", "import memories from a versioned JSON document")
    p.add_argument("path")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--scope", dest="filter_scope")

    p = command("publish", "copy a memory into a team project as a fact (agent profile)")
    p.add_argument("id")
    p.add_argument(
        "--profile",
        default=os.environ.get("AIDEMEMO_PROFILE"),
        help="the agent profile to publish as (auth login) [env AIDEMEMO_PROFILE]",
    )
    p.add_argument("--session", required=True, help="the team session the fact joins")
    p.add_argument("--json", action="store_true")

    p = command("rehome-scope", "move every memory of one project scope to another")
    p.add_argument("--from", dest="from_scope", required=True)
    p.add_argument("--to", dest="to_scope", required=True)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--apply", action="store_true")
    p.add_argument("--yes", action="store_true")
    p.add_argument("--backup-path")
    p.add_argument("--json", action="store_true")

    from aidememo.cli.memory.maint import add_maintenance_commands

    add_maintenance_commands(command)

    from aidememo.cli.memory.semantic import add_semantic_commands

    add_semantic_commands(command)
