"""Command-line flags with `AIDEMEMO_*` environment fallbacks; a flag given wins."""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from aidememo.cli.errors import EXIT_USAGE, CliError

PROG = "aidememo"
TOKEN_BYTES = 32
TOKEN_FILE_MODE = 0o600
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 3030
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class Parser(argparse.ArgumentParser):
    """An `ArgumentParser` whose unknown-choice error names the closest choices first
    (`difflib`), so `aidememo fatc` says `did you mean 'fact'?` (CLI-7). Subparsers made by
    `add_subparsers` are of the same class."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and value not in choices and isinstance(value, str):
            import difflib

            names = [str(c) for c in choices]
            close = difflib.get_close_matches(value, names, n=3, cutoff=0.6)
            if close:
                guess = " or ".join(repr(c) for c in close)
                raise argparse.ArgumentError(
                    action,
                    f"invalid choice: {value!r} (did you mean {guess}?; choose from "
                    + ", ".join(repr(c) for c in names)
                    + ")",
                )
        super()._check_value(action, value)


# -- flags with environment fallbacks ---------------------------------------------------------


class _Opt(NamedTuple):
    flag: str
    dest: str
    env: str
    required: bool
    default: Any
    convert: Callable[[str], Any]
    choices: tuple[str, ...] | None
    group: str | None  # flags of one exclusive group: the environment fills at most one


def _flag_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"expected one of {sorted(_TRUE | _FALSE)}, got {text!r}")


def int_in(low: int, high: int) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    convert.__name__ = "integer"
    return convert


class Command:
    """A subcommand's parser plus the environment fallbacks of its flags."""

    def __init__(self, parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]):
        self.parser = parser
        self.opts: list[_Opt] = []
        parser.set_defaults(_run=run, _opts=self.opts)

    def add(
        self,
        flag: str,
        *,
        env: str | None = None,
        required: bool = False,
        default: Any = None,
        convert: Callable[[str], Any] = str,
        choices: Sequence[str] | None = None,
        help: str,
        group: argparse._MutuallyExclusiveGroup | None = None,
        group_name: str | None = None,
        switch: bool = False,
    ) -> None:
        dest = flag.lstrip("-").replace("-", "_")
        env_name = env or "AIDEMEMO_" + dest.upper()
        text = f"{help} [env {env_name}]"
        if default is not None and not switch:
            text += f" (default {default})"
        target: Any = group if group is not None else self.parser
        if switch:  # off unless given on the command line or in the environment
            target.add_argument(flag, dest=dest, action="store_true", default=None, help=text)
            convert = _flag_bool
            default = False if default is None else default
        else:
            target.add_argument(
                flag,
                dest=dest,
                type=convert,
                choices=list(choices) if choices else None,
                default=None,
                help=text,
                metavar=(
                    "{" + ",".join(choices) + "}"
                    if choices
                    else flag.lstrip("-").upper().replace("-", "_")
                ),
            )
        self.opts.append(
            _Opt(
                flag,
                dest,
                env_name,
                required,
                default,
                convert,
                tuple(choices) if choices else None,
                group_name,
            )
        )


def apply_environment(ns: argparse.Namespace) -> None:
    """Fill flags not given on the command line from the environment, then defaults."""
    opts: list[_Opt] = ns._opts
    given_groups = {o.group for o in opts if o.group and getattr(ns, o.dest) is not None}
    for opt in opts:
        if getattr(ns, opt.dest) is not None:
            continue
        raw = os.environ.get(opt.env, "")
        value: Any = None
        if raw and not (opt.group and opt.group in given_groups):
            try:
                value = opt.convert(raw)
            except (ValueError, argparse.ArgumentTypeError) as exc:
                raise CliError(f"{opt.env}: {exc}", EXIT_USAGE) from None
            if opt.choices is not None and value not in opt.choices:
                raise CliError(
                    f"{opt.env}: expected one of {', '.join(opt.choices)}, got {raw!r}",
                    EXIT_USAGE,
                )
            if opt.group:
                given_groups.add(opt.group)
        if value is None:
            if opt.required:
                raise CliError(f"{opt.flag} is required (or set {opt.env})", EXIT_USAGE)
            value = opt.default
        setattr(ns, opt.dest, value)


# -- small helpers ----------------------------------------------------------------------------


MISSING_CLIENT = "this command needs the client extra: pip install 'aidememo[client]'"


def lazy(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """A handler that imports `module` when it runs and calls its `name`."""

    def run(ns: argparse.Namespace) -> int:
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:
            if exc.name in ("httpx", "pydantic", "websockets", "aidememo.client"):
                raise CliError(f"{MISSING_CLIENT} ({exc.name} is missing)", EXIT_USAGE) from None
            raise
        handler: Callable[[argparse.Namespace], int] = getattr(loaded, name)
        return handler(ns)

    return run
