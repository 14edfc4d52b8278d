"""`aidememo mcp`: the MCP tools over stdio with the official SDK (`mcp.server.MCPServer`).

The server combines tool providers. `--profile NAME` adds the team tools: the registry of
`aidememo.mcp.tools` (the same names, schemas and descriptions as the HTTP endpoint, MCP-1),
each call sent as its REST twin's request (`aidememo.mcp.dispatch.twin_request`) through the
profile's `aidememo.client.Client`, so the server judges it exactly as the route does
(MCP-2) and a retry after a lost answer is sent identically (CLIENT-1). The profile pins the
actor: nothing a host sends can switch it (CLI-3). `--memory-store PATH` adds the memory
tools (`PROVIDER_MODULES`); with both, both sets are served (MCP-8).
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from aidememo import __version__
from aidememo.cli.errors import EXIT_USAGE, CliError

Listing = dict[str, Any]


class ToolProvider(Protocol):
    """A set of tools the stdio server serves: their listings and their calls."""

    def listing(self) -> list[Listing]:
        """The `tools/list` entries (name, description, inputSchema, outputSchema, ...)."""
        ...

    def names(self) -> frozenset[str]:
        """Every tool it answers: the listed ones and those it lists to nobody (a reader
        sees no write tool, yet calling one is answered, with `project_unauthorized`)."""
        ...

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """`(structuredContent, isError)` of one call of a tool in `names()`."""
        ...

    def close(self) -> None: ...


ProviderFactory = Callable[[str], ToolProvider]
PROVIDER_MODULES = {"memory": "aidememo.cli.mcp.memory"}
"""The module whose `provider(path) -> ToolProvider` builds the tools of `--<option>-store
PATH`, imported only when that option is given (the memory tools live beside the memory
store; a build without that module refuses `--memory-store`)."""


def store_provider(option: str, path: str) -> ToolProvider:
    """The tool provider of `--<option>-store PATH`."""
    import importlib

    module_name = PROVIDER_MODULES[option]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise CliError(
            f"this build has no {option} store tools (--{option}-store)", EXIT_USAGE
        ) from None
    factory: ProviderFactory = module.provider
    return factory(path)


@dataclass
class TeamTools:
    """The team tools of one profile, sent through its `aidememo.client.Client`."""

    client: Any  # aidememo.client.Client
    project_id: str
    actor_id: str
    role: str

    def listing(self) -> list[Listing]:
        from aidememo.mcp.protocol import visible_tools

        return [tool.listing() for tool in visible_tools(self.role)]

    def names(self) -> frozenset[str]:
        from aidememo.mcp.tools import BY_NAME

        return frozenset(BY_NAME)

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        from aidememo.client import AidememoClientError
        from aidememo.client import plans as p
        from aidememo.domain.errors import AidememoError
        from aidememo.mcp.dispatch import check_arguments, twin_request
        from aidememo.mcp.tools import BY_NAME, Context

        tool = BY_NAME[name]
        try:
            args = check_arguments(tool, arguments)
            request, _ = twin_request(tool, Context(self.project_id, self.actor_id), args)
        except AidememoError as error:
            return error.to_json(), True
        target = request.path + (f"?{request.query}" if request.query else "")
        body = request.body.read() if request.method != "GET" else None
        call = p.Call(request.method, target, _raw_model(), body)
        try:
            # The client's own read plan: an identical resend after a lost answer.
            answer: dict[str, Any] = self.client._read(call).root
        except AidememoClientError as error:
            return {"error": {"code": error.code, "message": error.message}}, True
        return answer, False

    def close(self) -> None:
        self.client.close()


@functools.cache
def _raw_model() -> Any:
    """A pydantic model that takes any JSON object as it is (the REST answer)."""
    from pydantic import RootModel

    return RootModel[dict[str, Any]]


def team_tools(profile_name: str) -> TeamTools:
    """The team tools of profile `profile_name`, its pinned actor checked (CLI-3)."""
    from aidememo.cli.agent import profiles
    from aidememo.cli.agent.connect import client_for
    from aidememo.cli.token_files import read_token_file

    profile = profiles.get(profile_name)
    client = client_for(profile.url, read_token_file(profile.token_file), profile.project_id)
    who = client.identity()
    pinned = (profile.tenant_id, profile.project_id, profile.actor_id)
    if (who.tenant_id, who.project_id, who.actor_id) != pinned:
        client.close()
        raise CliError(
            f"profile {profile.name} acts as {profile.actor_id} only, but its token is now "
            f"{who.actor_id}'s; nothing was served",
            EXIT_USAGE,
        )
    return TeamTools(client, profile.project_id, profile.actor_id, who.role)


def build_server(providers: Iterable[ToolProvider]) -> Any:
    """An `MCPServer` that lists and calls the tools of `providers`."""
    from mcp.server import MCPServer
    from mcp.shared.exceptions import MCPError
    from mcp_types import CallToolResult, TextContent, Tool

    from aidememo.mcp.protocol import INSTRUCTIONS, INVALID_PARAMS

    owners: dict[str, ToolProvider] = {}
    listings: list[Listing] = []
    for provider in providers:
        for name in provider.names():
            if name in owners:
                raise CliError(f"two providers offer the tool {name}", EXIT_USAGE)
            owners[name] = provider
        listings += provider.listing()

    class Server(MCPServer):
        async def list_tools(self) -> list[Any]:
            return [Tool.model_validate(entry) for entry in listings]

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            import anyio

            owner = owners.get(name)
            if owner is None:
                raise MCPError(code=INVALID_PARAMS, message=f"unknown tool: {name}")
            content, error = await anyio.to_thread.run_sync(owner.call, name, arguments)
            text = json.dumps(content, ensure_ascii=False)
            return CallToolResult(
                content=[TextContent(type="text", text=text)],
                structured_content=content,
                is_error=error,
            )

    return Server("aidememo", instructions=INSTRUCTIONS, version=__version__)


def cmd_mcp(ns: argparse.Namespace) -> int:
    """`aidememo mcp [--profile NAME] [--memory-store PATH]`: serve over stdio until EOF."""
    if ns.profile is None and ns.memory_store is None:
        raise CliError(
            "aidememo mcp needs --profile NAME (the team tools) and/or --memory-store PATH",
            EXIT_USAGE,
        )
    try:
        import mcp.server  # noqa: F401
    except ImportError:
        raise CliError(
            "aidememo mcp needs the mcp extra: pip install 'aidememo[mcp]'", EXIT_USAGE
        ) from None
    from aidememo.cli.agent.connect import refusal
    from aidememo.client import AidememoClientError

    providers: list[ToolProvider] = []
    try:
        if ns.profile is not None:
            try:
                providers.append(team_tools(ns.profile))
            except AidememoClientError as error:
                raise refusal(error) from None
        if ns.memory_store is not None:
            providers.append(store_provider("memory", ns.memory_store))
        build_server(providers).run("stdio")
    finally:
        for provider in providers:
            provider.close()
    return 0
