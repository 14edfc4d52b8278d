"""`aidememo mcp` over stdio with real clients: the SDK's `mcp.Client` (`auto` and `legacy`)
and the MCP Inspector CLI 0.15.0 (npm), against real servers through a profile (MCP-8), and
`aidememo mcp install` for Claude Code and Codex."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from aidememo.cli.main import main
from aidememo.mcp.tools import TOOLS
from tests.agents.targets import PROJECT, READER, WRITER, Target, target

__all__ = ["target"]

REPO = Path(__file__).resolve().parents[2]
INSPECTOR = REPO / "node_modules" / ".bin" / "mcp-inspector"


def login(home: Path, served: Target, actor: str, profile: str) -> None:
    token = home.parent / f"{actor}.token"
    token.write_text(served.tokens[actor])
    token.chmod(0o600)
    os.environ["AIDEMEMO_HOME"] = str(home)
    args = ["auth", "login", "--profile", profile, "--url", served.url]
    assert main([*args, "--project-id", PROJECT, "--token-file", str(token)]) == 0


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("AIDEMEMO_"):
            monkeypatch.delenv(name)
    folder = tmp_path / "home"
    monkeypatch.setenv("AIDEMEMO_HOME", str(folder))
    return folder


def _server(home: Path, profile: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
    env["AIDEMEMO_HOME"] = str(home)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "aidememo", "mcp", "--profile", profile], env=env
    )


async def _stdio_flow(home: Path, mode: str) -> None:
    async with Client(_server(home, "w"), mode=mode) as writer:  # type: ignore[arg-type]
        names = [t.name for t in (await writer.list_tools()).tools]
        assert names == [t.name for t in TOOLS]
        me = await writer.call_tool("identity", {})
        assert (me.structured_content or {})["actor_id"] == WRITER
        made = await writer.call_tool("session_create", {"session_id": "s_io", "topic": "stdio"})
        assert made.is_error is False, made
        again = await writer.call_tool("session_create", {"session_id": "s_io", "topic": "stdio"})
        assert again.structured_content == made.structured_content  # replayed (ID-4)
        args = {"fact_id": "f_io", "session_id": "s_io", "content": "stdio works"}
        fact = await writer.call_tool("fact_create", args)
        assert fact.is_error is False, fact
        widened = await writer.call_tool("fact_create", {**args, "actor_id": READER})
        assert widened.is_error is True
        assert (widened.structured_content or {})["error"]["code"] == "invalid_command"
        found = await writer.call_tool("search", {"q": "stdio"})
        assert [r["fact_id"] for r in (found.structured_content or {})["results"]] == ["f_io"]
    async with Client(_server(home, "r"), mode=mode) as reader:  # type: ignore[arg-type]
        assert len((await reader.list_tools()).tools) < len(TOOLS)
        refused = await reader.call_tool("fact_create", {**args, "fact_id": "f_no"})
        assert refused.is_error is True
        assert (refused.structured_content or {})["error"]["code"] == "project_unauthorized"


# The stdio server reaches every backend the same way (aidememo.client over HTTP), which the
# HTTP tests already cover on each: here the origin on SQLite in both modes and PostgreSQL.
@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("target", "mode"),
    [("serve_sqlite", "auto"), ("serve_sqlite", "legacy"), ("serve_postgres", "auto")],
    indirect=["target"],
)
def test_mcp8_mcp2_stdio_sdk_client(target: Target, home: Path, mode: str) -> None:
    login(home, target, WRITER, "w")
    login(home, target, READER, "r")
    anyio.run(_stdio_flow, home, mode)


def _inspector(home: Path, *args: str) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
    env["AIDEMEMO_HOME"] = str(home)
    command = [str(INSPECTOR), "--cli", sys.executable, "-m", "aidememo", "mcp"]
    command += ["--profile", "w", *args]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env=env, cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    return json.loads(done.stdout)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("target", ["serve_sqlite", "serve_postgres"], indirect=True)
def test_mcp8_inspector_cli_lists_and_calls(target: Target, home: Path) -> None:
    if not INSPECTOR.exists() or shutil.which("node") is None:
        if os.environ.get("CI"):
            pytest.fail("the MCP Inspector is missing: npm ci")
        pytest.skip("the MCP Inspector is missing: npm ci")
    login(home, target, WRITER, "w")
    listed = _inspector(home, "--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == [t.name for t in TOOLS]
    called = _inspector(
        home, "--method", "tools/call", "--tool-name", "session_create",
        "--tool-arg", "session_id=s_insp", "--tool-arg", "topic=from the inspector",
    )  # fmt: skip
    assert called["isError"] is False, called
    assert called["structuredContent"]["resource"] == {"kind": "session", "id": "s_insp"}


def test_mcp8_install_prints_and_writes_once(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    served = Target("http://127.0.0.1:9", {WRITER: "t" * 32})
    from aidememo.cli.agent import profiles

    token = tmp_path / "w.token"
    token.write_text("t" * 32)
    profiles.save(
        {
            "w": profiles.Profile(
                "w", served.url, "t_mcp", PROJECT, WRITER, "writer", str(token),
                profiles.token_sha256("t" * 32),
            )
        }
    )  # fmt: skip
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    assert main(["mcp", "install", "--host", "claude-code", "--profile", "w", "--write"]) == 0
    printed = json.loads(capsys.readouterr().out)
    entry = printed["mcpServers"]["aidememo"]
    assert entry["args"] == ["mcp", "--profile", "w"]
    assert entry["env"] == {"AIDEMEMO_HOME": str(home)}
    written = json.loads((project / ".mcp.json").read_text())
    assert written["mcpServers"] == {"other": {"command": "x"}, "aidememo": entry}
    assert main(["mcp", "install", "--host", "claude-code", "--profile", "w", "--write"]) == 2
    codex = tmp_path / "codex"
    monkeypatch.setenv("CODEX_HOME", str(codex))
    codex.mkdir()
    (codex / "config.toml").write_text('model = "o4"\n')
    assert main(["mcp", "install", "--host", "codex", "--profile", "w", "--write"]) == 0
    text = (codex / "config.toml").read_text()
    assert text.startswith('model = "o4"\n')
    config = tomllib.loads(text)
    assert config["mcp_servers"]["aidememo"]["args"] == ["mcp", "--profile", "w"]
    assert main(["mcp", "install", "--host", "codex", "--profile", "w", "--write"]) == 2
    assert (codex / "config.toml").read_text() == text
    assert main(["mcp", "install", "--host", "codex", "--profile", "nobody"]) == 2


class _Fake:
    """A tool provider with one tool that echoes its arguments."""

    def __init__(self, name: str) -> None:
        self.name = name

    def listing(self) -> list[dict[str, Any]]:
        schema = {"type": "object", "properties": {}, "additionalProperties": True}
        return [{"name": self.name, "description": "echo", "inputSchema": schema}]

    def names(self) -> frozenset[str]:
        return frozenset({self.name})

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        return {"tool": name, **arguments}, False

    def close(self) -> None:
        pass


async def _combined() -> None:
    from aidememo.cli.mcp.stdio import build_server

    server = build_server([_Fake("team_echo"), _Fake("memory_echo")])
    async with Client(server, mode="legacy") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["team_echo", "memory_echo"]
        answer = await client.call_tool("memory_echo", {"x": 1})
        assert answer.structured_content == {"tool": "memory_echo", "x": 1}


def test_mcp8_stdio_server_combines_providers() -> None:
    from aidememo.cli.errors import CliError
    from aidememo.cli.mcp.stdio import build_server

    anyio.run(_combined)
    with pytest.raises(CliError):
        build_server([_Fake("same"), _Fake("same")])


def _memory_server(home: Path, *extra: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "NUZO_"))}
    env["AIDEMEMO_HOME"] = str(home)
    env["HOME"] = str(home)
    store = home / "memories.sqlite"
    args = ["-m", "aidememo", "mcp", "--memory-store", str(store), *extra]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


async def _memory_flow(home: Path, *extra: str) -> list[str]:
    from mcp.shared.exceptions import MCPError

    async with Client(_memory_server(home, *extra), mode="legacy") as client:
        listed = (await client.list_tools()).tools
        names = [t.name for t in listed]
        # Every tool, the team's and the memory store's, says it never runs as a task.
        assert {t.execution.task_support if t.execution else None for t in listed} == {"forbidden"}
        kept = await client.call_tool(
            "memory.remember", {"content": "the cache uses redis", "kind": "fact"}
        )
        assert kept.is_error is False, kept
        found = await client.call_tool("memory.recall", {"query": "redis"})
        assert found.is_error is False, found
        assert "the cache uses redis" in json.dumps(found.structured_content)
        missing = await client.call_tool("memory.show", {"id": "mem_does_not_exist"})
        assert missing.is_error is True
        assert str((missing.structured_content or {})["code"]).startswith("MEMORY_")
        with pytest.raises(MCPError):
            await client.call_tool("memory.remember", {"content": 5, "kind": "fact"})
    return names


def test_mem13_mcp8_stdio_serves_the_memory_tools(home: Path) -> None:
    home.mkdir(parents=True)
    names = anyio.run(_memory_flow, home)
    assert len(names) == 19 and all(name.startswith("memory.") for name in names)
    assert (home / "memories.sqlite").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("target", ["serve_sqlite"], indirect=True)
def test_mem13_mcp8_stdio_serves_team_and_memory_tools_together(target: Target, home: Path) -> None:
    login(home, target, WRITER, "w")
    names = anyio.run(_memory_flow, home, "--profile", "w")
    assert names == [t.name for t in TOOLS] + [n for n in names if n.startswith("memory.")]
    assert len(names) == len(TOOLS) + 19


class _BearerProxy:
    """A loopback proxy that adds the bearer token the Inspector CLI 0.15.0 cannot send (it
    has no header option) and forwards `POST /mcp` to the project's MCP route unchanged."""

    def __init__(self, endpoint: str, token: str) -> None:
        import http.server
        import threading
        import urllib.error
        import urllib.request

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() in ("content-type", "accept") or k.lower().startswith("mcp-")
                }
                headers["Authorization"] = f"Bearer {token}"
                request = urllib.request.Request(endpoint, body, headers, method="POST")
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        status, kept, data = answer.status, answer.headers, answer.read()
                except urllib.error.HTTPError as refused:
                    status, kept, data = refused.code, refused.headers, refused.read()
                self.send_response(status)
                for name in ("Content-Type", "Mcp-Session-Id"):
                    if kept.get(name):
                        self.send_header(name, kept[name])
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.send_response(405)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/mcp"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("target", ["serve_sqlite", "serve_postgres"], indirect=True)
def test_mcp3_mcp8_inspector_cli_over_streamable_http(target: Target) -> None:
    if not INSPECTOR.exists() or shutil.which("node") is None:
        if os.environ.get("CI"):
            pytest.fail("the MCP Inspector is missing: npm ci")
        pytest.skip("the MCP Inspector is missing: npm ci")
    proxy = _BearerProxy(target.endpoint(), target.tokens[WRITER])
    try:

        def inspect(*args: str) -> Any:
            command = [str(INSPECTOR), "--cli", proxy.url, "--transport", "http", *args]
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=120, cwd=REPO, check=False
            )
            assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
            return json.loads(done.stdout)

        listed = inspect("--method", "tools/list")
        assert [t["name"] for t in listed["tools"]] == [t.name for t in TOOLS]
        called = inspect(
            "--method", "tools/call", "--tool-name", "session_create",
            "--tool-arg", "session_id=s_http", "--tool-arg", "topic=inspector over http",
        )  # fmt: skip
        assert called["isError"] is False, called
        assert called["structuredContent"]["resource"] == {"kind": "session", "id": "s_http"}
    finally:
        proxy.close()
