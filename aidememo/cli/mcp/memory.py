"""The memory tools of `aidememo mcp --memory-store PATH`: the local memory store's provider
(`aidememo.agent_memory.mcp_tools`, Nuzo's 19 `memory.*` tools) in the stdio server's
`ToolProvider` shape. The store's refusals are tool results with `isError: true` carrying
its structured error; arguments outside a tool's schema are an invalid-params error (MEM-13)."""

from __future__ import annotations

from typing import Any

from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.mcp_tools import MemoryToolProvider, ToolInputError, open_provider


class MemoryTools:
    """The memory store's tools for the stdio server."""

    def __init__(self, provider: MemoryToolProvider) -> None:
        self.provider = provider
        self._names = frozenset(tool["name"] for tool in provider.tools())

    def listing(self) -> list[dict[str, Any]]:
        return self.provider.tools()

    def names(self) -> frozenset[str]:
        return self._names

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        try:
            return self.provider.call(name, arguments), False
        except AgentMemoryError as error:
            return self.provider.refusal(name, error), True
        except ToolInputError as error:
            # Arguments outside the tool's schema are an invalid-params error, as Nuzo
            # answers them (MEM-13).
            from mcp.shared.exceptions import MCPError

            from aidememo.mcp.protocol import INVALID_PARAMS

            raise MCPError(code=INVALID_PARAMS, message=str(error)) from None

    def close(self) -> None:
        self.provider.store.close()
        if self.provider.user_store is not None:
            self.provider.user_store.close()


def provider(path: str) -> MemoryTools:
    """The provider `aidememo.cli.mcp.stdio.store_provider("memory", path)` loads; a store or
    session setting it refuses (a bad allowlist, an unsafe store path) is `CODE: message`,
    exit 1."""
    from aidememo.cli.errors import CliError

    try:
        tools = MemoryTools(open_provider(path, restricted_by_env=True))
    except AgentMemoryError as error:
        raise CliError(f"{error.code.value}: {error.message}") from None
    # `memory.recall` takes `retrieval_mode` (MEM-23): the default local model directory.
    from aidememo.agent_memory.semantic import SemanticRecall
    from aidememo.cli.memory.vectors import OnnxRuntime

    tools.provider.store.semantic = SemanticRecall(OnnxRuntime())
    _add_tiers(tools.provider)
    return tools


def _add_tiers(provider: MemoryToolProvider) -> None:
    """Recall's user and team tiers (MEM-24): the user store when the served store is the
    project's and the user store is another existing file; the team tier of
    `AIDEMEMO_MEMORY_TEAM_PROFILE`."""
    import os

    from aidememo.agent_memory import paths
    from aidememo.agent_memory.semantic import SemanticRecall
    from aidememo.agent_memory.store import AgentMemory
    from aidememo.cli.memory.team import PROFILE_ENV, ProfileTeam
    from aidememo.cli.memory.vectors import OnnxRuntime

    served = os.path.realpath(provider.store.db.path)
    user_path = paths.user_store_path()
    project = os.path.realpath(paths.project_store_path(provider.project_root))
    if served == project and os.path.realpath(user_path) != served and os.path.isfile(user_path):
        provider.user_store = AgentMemory.open(user_path)
        provider.user_store.semantic = SemanticRecall(OnnxRuntime())
    team = os.environ.get(PROFILE_ENV)
    if team:
        provider.team = ProfileTeam(team)
