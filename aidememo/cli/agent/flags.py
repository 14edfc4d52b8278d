"""The flags every agent command is built with (`aidememo.cli.agent.parser`,
`aidememo.cli.agent.offline_parser`): `--profile` and `--json` on each, positionals, and
flags that come from the command line only."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from aidememo.cli.options import Command, lazy


def agent(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    module: str,
    handler: str,
) -> Command:
    """A subcommand with the flags every agent command has: `--profile` and `--json`."""
    cmd = Command(sub.add_parser(name, help=help), lazy(f"aidememo.cli.agent.{module}", handler))
    cmd.add("--profile", env="AIDEMEMO_PROFILE", help="the profile to act as (auth login)")
    cmd.add("--json", switch=True, help="print JSON for scripts")
    return cmd


def positional(cmd: Command, name: str, help: str, **kw: object) -> None:
    cmd.parser.add_argument(name, help=help, **kw)  # type: ignore[arg-type]


def flag(
    cmd: Command,
    name: str,
    *,
    help: str,
    required: bool = False,
    default: Any = None,
    convert: Callable[[str], Any] = str,
    choices: list[str] | None = None,
    switch: bool = False,
) -> None:
    """A flag of the command line only: ids, text and cursors never come from the
    environment, where a stray `AIDEMEMO_ID` would name every record a script creates."""
    dest = name.lstrip("-").replace("-", "_")
    text = help if default is None or switch else f"{help} (default {default})"
    if switch:
        cmd.parser.add_argument(name, dest=dest, action="store_true", help=text)
        return
    cmd.parser.add_argument(
        name,
        dest=dest,
        required=required,
        default=default,
        type=convert,
        choices=choices,
        help=text,
        metavar=name.lstrip("-").upper().replace("-", "_") if choices is None else None,
    )
