"""`aidememo`: the command tree (argparse) and the entry point.

Every flag of the admin commands may also come from an `AIDEMEMO_*` environment variable (named
in each flag's help); a flag given on the command line wins. The agent commands take only
`--profile` and `--json` from it. `AIDEMEMO_DATABASE_URL` keeps a PostgreSQL password out
of `ps`. Expected failures print one line to stderr and exit 1 (refused, nothing changed), 2
(usage, or something this build cannot do) or, for the agent commands, 3 (the server could not
be reached); they never print a traceback. The agent commands (`aidememo.cli.agent.parser`)
act as a named profile through `aidememo.client`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TypeAlias, cast

from aidememo import __version__
from aidememo.cli.agent.parser import add_agent_commands
from aidememo.cli.errors import EXIT_FAILED, CliError
from aidememo.cli.mcp.parser import add_mcp_commands
from aidememo.cli.options import PROG, Parser, apply_environment
from aidememo.domain.errors import AidememoError

# -- parser -----------------------------------------------------------------------------------


# The top-level commands by the part of the tree that adds them, in `--help` order, with their
# one-line help: a part the command line does not name is added as these names only, so
# `aidememo --help` and an agent command never build (or import) the rest of the tree.
ADMIN_COMMANDS = {
    "token": "token files",
    "bootstrap": "create or confirm a project, member and token",
    "admin": "administration",
    "health": "open the store and report it",
    "serve": "serve the HTTP API",
    "indexer": "follow every project's feed into the semantic index",
}
AGENT_COMMANDS = {
    "auth": "named profiles: who the agent commands act as",
    "session": "sessions",
    "fact": "facts",
    "search": "search facts",
    "get": "one resource's current body",
    "members": "the project's members",
    "changes": "change entries after a sequence",
    "watch": "the live change feed: batches as they come (Ctrl-C ends)",
    "handoff": "hand work to another agent",
    "replica": "an exact-read copy of the project for reading offline",
    "outbox": "commands queued while the server could not be reached",
    "artifact": "file bodies under logical paths",
}
MCP_COMMANDS = {"mcp": "serve the MCP tools over stdio (for agent hosts)"}
MEMORY_COMMANDS = {"memory": "the local memory store (Nuzo compatible)"}
Sub: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _named(argv: Sequence[str]) -> str | None:
    """The top-level command `argv` names (its first word that is not an option), or None."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command tree: whole, or with only the part that adds `command` built in full (the
    other top-level commands are names with their help, enough for `--help` and suggestions;
    an unknown or missing `command` builds none in full)."""
    parser = Parser(prog=PROG, description="Memory and coordination service for AI agent teams.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    # Every subparser is a `Parser` (its suggestions); the adders take the base class.
    sub = cast(Sub, parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    parts: list[tuple[dict[str, str], Callable[[Sub], None]]] = [
        (ADMIN_COMMANDS, _add_admin_commands),
        (AGENT_COMMANDS, add_agent_commands),
        (MCP_COMMANDS, add_mcp_commands),
        (MEMORY_COMMANDS, _add_memory_commands),
    ]
    for names, add in parts:
        if command is None or command in names:
            add(sub)
        else:
            for name, help in names.items():
                sub.add_parser(name, help=help)
    return parser


def _add_memory_commands(sub: Sub) -> None:
    from aidememo.cli.memory.parser import add_memory_commands

    add_memory_commands(sub)


def _add_admin_commands(sub: Sub) -> None:
    from aidememo.cli.admin.parser import add_admin_commands

    add_admin_commands(sub)


def _skip_httpx_command_line() -> None:
    """Keep httpx from loading its own command line (click, rich, pygments) when this process
    imports httpx (the MCP SDK does, for `aidememo mcp`; the agent commands do not): its
    package import tries `httpx._main` and falls back to a stub when that cannot be imported,
    and this process never runs httpx's command line. A process that imported httpx already
    is left alone."""
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status."""
    _skip_httpx_command_line()
    args = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_named(args) or "")
    ns = parser.parse_args(args)
    try:
        apply_environment(ns)
        run: Callable[[argparse.Namespace], int] = ns._run
        return run(ns)
    except CliError as error:
        sys.stderr.write(f"{PROG}: error: {error.message}\n")
        return error.exit_code
    except AidememoError as error:
        sys.stderr.write(f"{PROG}: error: {error.message} ({error.code.value})\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
