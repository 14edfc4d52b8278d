"""The `mcp` part of the command tree: `aidememo mcp` (stdio) and `aidememo mcp install`.

Both handlers are imported only when they run (`aidememo.cli.agent.parser.lazy`), so the other
commands never load the MCP SDK or the client.
"""

from __future__ import annotations

import argparse

from aidememo.cli.options import Command, lazy


def add_mcp_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `mcp` and `mcp install` to the top-level subcommands."""
    serve = Command(
        sub.add_parser("mcp", help="serve the MCP tools over stdio (for agent hosts)"),
        lazy("aidememo.cli.mcp.stdio", "cmd_mcp"),
    )
    serve.add("--profile", env="AIDEMEMO_PROFILE", help="the team tools, as this profile")
    serve.add("--memory-store", help="the memory tools over this local memory store")
    actions = serve.parser.add_subparsers(dest="mcp_command", metavar="ACTION")
    install = Command(
        actions.add_parser("install", help="print or add an agent host's MCP configuration"),
        lazy("aidememo.cli.mcp.install", "cmd_install"),
    )
    # Its own variable: AIDEMEMO_HOST is `serve`'s listen address, never an agent host.
    install.add("--host", env="AIDEMEMO_MCP_HOST", required=True,
                choices=["claude-code", "codex"], help="the agent host")  # fmt: skip
    install.add("--profile", env="AIDEMEMO_PROFILE", required=True, help="the profile to pin")
    install.add("--write", switch=True, help="add it to the host's config file")
