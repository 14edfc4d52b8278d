"""`aidememo mcp install --host claude-code|codex --profile NAME [--write]` (SPEC.md MCP-8).

Prints the exact configuration that makes the host start `aidememo mcp --profile NAME` over
stdio. The command is this installation's own `aidememo` (absolute path) and, when
`AIDEMEMO_HOME` is set, the entry sets it too, so the host finds the same profile; the profile
is the only argument, so the host can never switch actors. `--write` adds the entry (Claude
Code: `.mcp.json` in the current directory; Codex: `$CODEX_HOME/config.toml`, by default
`~/.codex/config.toml`) only when the file has no `aidememo` entry yet, keeping every other
entry as it is (Codex: appended at the end of the file).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

from aidememo.cli.agent import profiles
from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.stores import HOME_ENV

SERVER_NAME = "aidememo"
HOSTS = ("claude-code", "codex")


def launch(profile: str) -> tuple[str, list[str], dict[str, str]]:
    """The command, arguments and environment a host starts the stdio server with."""
    command = shutil.which("aidememo") or str(Path(sys.executable).with_name("aidememo"))
    env = {HOME_ENV: os.environ[HOME_ENV]} if os.environ.get(HOME_ENV) else {}
    return command, ["mcp", "--profile", profile], env


def claude_entry(profile: str) -> dict[str, Any]:
    command, args, env = launch(profile)
    entry: dict[str, Any] = {"type": "stdio", "command": command, "args": args}
    if env:
        entry["env"] = env
    return entry


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def codex_block(profile: str) -> str:
    command, args, env = launch(profile)
    lines = [
        f"[mcp_servers.{SERVER_NAME}]",
        f"command = {_toml_string(command)}",
        "args = [" + ", ".join(_toml_string(a) for a in args) + "]",
    ]
    if env:
        pairs = ", ".join(f"{k} = {_toml_string(v)}" for k, v in env.items())
        lines.append(f"env = {{ {pairs} }}")
    return "\n".join(lines) + "\n"


def codex_config() -> Path:
    home = os.environ.get("CODEX_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".codex") / "config.toml"


def _write_claude(profile: str) -> Path:
    path = Path.cwd() / ".mcp.json"
    data: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise CliError(f"{path} is not JSON ({exc}); nothing was written", EXIT_USAGE) from None
        if not isinstance(loaded, dict):
            raise CliError(f"{path} is not a JSON object; nothing was written", EXIT_USAGE)
        data = loaded
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict) or SERVER_NAME in servers:
        raise CliError(
            f"{path} already has an {SERVER_NAME} entry; nothing was written", EXIT_USAGE
        )
    servers[SERVER_NAME] = claude_entry(profile)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def _write_codex(profile: str) -> Path:
    path = codex_config()
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CliError(f"{path} is not TOML ({exc}); nothing was written", EXIT_USAGE) from None
    if SERVER_NAME in parsed.get("mcp_servers", {}):
        raise CliError(
            f"{path} already has an {SERVER_NAME} entry; nothing was written", EXIT_USAGE
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    separator = (
        "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    )
    with open(path, "a", encoding="utf-8") as out:
        out.write(separator + codex_block(profile))
    return path


def cmd_install(ns: argparse.Namespace) -> int:
    """Print (and with `--write` add) the host's configuration for `aidememo mcp`."""
    profile = profiles.get(ns.profile).name  # refuses an unknown profile, naming the known
    if ns.host == "claude-code":
        snippet = json.dumps({"mcpServers": {SERVER_NAME: claude_entry(profile)}}, indent=2)
        writer = _write_claude
    else:
        snippet = codex_block(profile).rstrip("\n")
        writer = _write_codex
    sys.stdout.write(snippet + "\n")
    if ns.write:
        path = writer(profile)
        sys.stderr.write(f"added the {SERVER_NAME} entry to {path}\n")
    return 0
