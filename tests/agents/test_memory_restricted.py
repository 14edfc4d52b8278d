"""A restricted memory session over stdio with the official MCP SDK client (MEM-20):
`aidememo mcp --memory-store` under `NUZO_AUTHORIZATION_MODE=restricted` refuses cross-scope
reads, writes and destructive operations, and a forbidden memory's refusal names no scope."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from aidememo.agent_memory import AgentMemory


def _server(home: Path, store: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "NUZO_"))}
    env.update(
        AIDEMEMO_HOME=str(home),
        HOME=str(home),
        NUZO_AUTHORIZATION_MODE="restricted",
        NUZO_AUTHORIZED_SCOPES="project:nuzo",
        NUZO_MEMORY_SCOPE="project:nuzo",
    )
    args = ["-m", "aidememo", "mcp", "--memory-store", str(store)]
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(home))


async def _session(home: Path, store: Path, global_id: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with Client(_server(home, store), mode="legacy") as client:

        async def call(name: str, **args: Any) -> tuple[bool, Any, str]:
            result = await client.call_tool(name, args)
            text = "".join(getattr(item, "text", "") for item in result.content)
            return bool(result.is_error), json.loads(text), text

        seen["remember_global"] = await call(
            "memory.remember", content="x", kind="note", scope="user:default"
        )
        seen["recall_global"] = await call("memory.recall", query="pref", include_global=True)
        seen["list"] = await call("memory.list")
        seen["show"] = await call("memory.show", id=global_id)
        seen["history"] = await call("memory.history", id=global_id)
        seen["forget"] = await call("memory.forget", id=global_id, mode="delete", confirm=True)
        seen["forget_all"] = await call("memory.forget_many", all=True, dry_run=False, confirm=True)
        seen["export"] = await call("memory.export", scope="user:default")
        seen["remember"] = await call("memory.remember", content="Allowed note.", kind="note")
    return seen


def test_mem20_restricted_session_over_stdio_with_the_sdk_client(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    store = tmp_path / "memories.sqlite"
    with AgentMemory.open(str(store), scope="project:nuzo") as admin:
        global_id = admin.remember(
            "A global preference.", kind="preference", scope="user:default", source="marker-src"
        ).id
    seen = anyio.run(_session, home, store, global_id)
    codes = {name: (failed, body.get("code")) for name, (failed, body, _t) in seen.items()}
    assert codes == {
        "remember_global": (True, "MEMORY_SCOPE_FORBIDDEN"),
        "recall_global": (True, "MEMORY_SCOPE_FORBIDDEN"),
        "list": (True, "MEMORY_SCOPE_REQUIRED"),
        "show": (True, "MEMORY_SCOPE_FORBIDDEN"),
        "history": (True, "MEMORY_SCOPE_FORBIDDEN"),
        "forget": (True, "MEMORY_SCOPE_FORBIDDEN"),
        "forget_all": (True, "MEMORY_SCOPE_REQUIRED"),
        "export": (True, "MEMORY_SCOPE_FORBIDDEN"),
        "remember": (False, None),
    }
    assert seen["recall_global"][1]["details"] == {"scope": "user:default"}
    for name in ("show", "history", "forget"):
        _failed, body, text = seen[name]
        assert "details" not in body and "user:default" not in text and "marker-src" not in text
    with AgentMemory.open(str(store), scope="project:nuzo") as admin:
        assert admin.get(global_id).archived_at is None
        assert [m.scope for m in admin.list(all_scopes=True)].count("project:nuzo") == 1


def test_mem20_a_bad_session_setting_refuses_to_start(tmp_path: Path) -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "NUZO_"))}
    env.update(HOME=str(tmp_path), NUZO_AUTHORIZED_SCOPES="project:nuzo")
    store = tmp_path / "memories.sqlite"
    proc = subprocess.run(
        [sys.executable, "-m", "aidememo", "mcp", "--memory-store", str(store)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1 and "MEMORY_CONFIG_INVALID: " in proc.stderr
    assert "Traceback" not in proc.stderr
