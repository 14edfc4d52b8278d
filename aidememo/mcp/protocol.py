"""JSON-RPC of the stateless MCP transport: both protocol eras, no session (SPEC.md MCP-4..6).

One POST carries one JSON-RPC message; the answer is one JSON-RPC response (HTTP 200), or
nothing for a notification or a client's response (HTTP 202). Two eras are served:

- **2026-07-28** (a request whose `params._meta` carries
  `io.modelcontextprotocol/protocolVersion`): no handshake. The version must be one this
  server speaks (else -32022 with the supported list), the `MCP-Protocol-Version` header must
  equal it, `Mcp-Method` must equal the body's method and, for `tools/call`, `Mcp-Name` the
  tool's name (else -32020). Methods: `server/discover`, `tools/list`, `tools/call`.
- **2025-11-25 and older**: `initialize` answers the client's version when this server
  speaks it, else the newest handshake version; then `tools/list`, `tools/call`, `ping`.
  Batches (arrays) are accepted only under 2024-11-05 and 2025-03-26, the versions that had
  them, named by the `MCP-Protocol-Version` header.

Protocol faults are JSON-RPC errors: -32700 the body is not JSON, -32600 not a request (or a
batch the version forbids), -32601 an unknown method, -32602 malformed params or an unknown
tool. Everything about a tool's arguments and every domain refusal is a tool result with
`isError: true` instead (`aidememo.mcp.dispatch`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aidememo import __version__
from aidememo.domain.canonical import decode_json
from aidememo.domain.errors import AidememoError
from aidememo.mcp.tools import BY_NAME, READ_TOOLS, TOOLS, Tool

MODERN_VERSIONS = ("2026-07-28",)
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
BATCH_VERSIONS = frozenset({"2024-11-05", "2025-03-26"})
VERSIONS = (*HANDSHAKE_VERSIONS, *MODERN_VERSIONS)
DEFAULT_HANDSHAKE_VERSION = "2025-03-26"  # a request without the version header (2025-06-18)

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_SERVER = "io.modelcontextprotocol/serverInfo"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022

SERVER_INFO = {"name": "aidememo", "version": __version__}
INSTRUCTIONS = (
    "aidememo is the team's shared memory and work queue for this project: record facts in"
    " sessions, search them, and hand work to teammates (send, accept, heartbeat, return)."
    " Your identity comes from the token; call identity first."
)
TOOLS_TTL_MS = 60_000


class RpcError(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


@dataclass(frozen=True, slots=True)
class Host:
    """What the protocol needs of its host: the tools the caller may see, and a tool call.

    `tools()` may raise an `AidememoError` (a token that is no member of the project): the
    request then fails as an HTTP error, like every member route.
    """

    tools: Callable[[], tuple[Tool, ...]]
    call: Callable[[Tool, Any], bytes]


@dataclass(frozen=True, slots=True)
class Answer:
    """HTTP status and body: 200 with a JSON-RPC response, or 202 with none."""

    status: int
    body: bytes


ACCEPTED = Answer(202, b"")


def visible_tools(role: str) -> tuple[Tool, ...]:
    """The tools `tools/list` shows a member of `role`: readers see only the read tools."""
    return READ_TOOLS if role == "reader" else TOOLS


def _error(id_: Any, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": id_, "error": error}).encode("utf-8")


def _ok(id_: Any, result: bytes) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":' + json.dumps(id_).encode("utf-8") + b',"result":' + result + b"}"
    )


# What one batch may hold (MCP-9): each tool call is bounded on its own (a search by SRCH-7).
BATCH_MAX_MESSAGES = 8
BATCH_MAX_CALLS = 4


def _valid_id(value: Any) -> bool:
    return (type(value) is int) or isinstance(value, str)


def handle(body: bytes, headers: dict[str, str], host: Host) -> Answer:
    """The answer to one POST of the MCP endpoint (see the module docstring)."""
    try:
        message = decode_json(body, "the JSON-RPC message")
    except AidememoError as error:
        return Answer(200, _error(None, PARSE_ERROR, f"parse error: {error.message}"))
    if isinstance(message, list):
        return _batch(message, headers, host)
    out = _message(message, headers, host, batched=False)
    return ACCEPTED if out is None else Answer(200, out)


def _batch(messages: list[Any], headers: dict[str, str], host: Host) -> Answer:
    version = headers.get("mcp-protocol-version", DEFAULT_HANDSHAKE_VERSION)
    if version not in BATCH_VERSIONS:
        return Answer(
            200,
            _error(None, INVALID_REQUEST, f"protocol version {version} does not allow batches"),
        )
    if not messages:
        return Answer(200, _error(None, INVALID_REQUEST, "an empty batch"))
    calls = sum(1 for m in messages if isinstance(m, dict) and m.get("method") == "tools/call")
    if len(messages) > BATCH_MAX_MESSAGES or calls > BATCH_MAX_CALLS:
        # Refused whole, before any message runs: a batch costs at most a few requests (MCP-9).
        return Answer(
            200,
            _error(
                None,
                INVALID_REQUEST,
                f"a batch holds at most {BATCH_MAX_MESSAGES} messages and "
                f"{BATCH_MAX_CALLS} tools/call requests",
            ),
        )
    answers = [_message(m, headers, host, batched=True) for m in messages]
    parts = [a for a in answers if a is not None]
    return Answer(200, b"[" + b",".join(parts) + b"]") if parts else ACCEPTED


def _message(message: Any, headers: dict[str, str], host: Host, *, batched: bool) -> bytes | None:
    """One message's response; None for a notification or a client's response."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return _error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
    has_id = "id" in message
    id_ = message.get("id")
    if has_id and not _valid_id(id_):
        return _error(None, INVALID_REQUEST, "id must be a string or an integer")
    method = message.get("method")
    if method is None and has_id and ("result" in message or "error" in message):
        return None  # a response to a request this server never sends: nothing to do
    if not isinstance(method, str):
        return _error(id_ if has_id else None, INVALID_REQUEST, "method must be a string")
    params = message.get("params", {})
    if not isinstance(params, dict):
        return _error(id_ if has_id else None, INVALID_PARAMS, "params must be an object")
    try:
        result = _dispatch(method, params, headers, host, batched=batched)
    except RpcError as error:
        return _error(id_ if has_id else None, error.code, error.message, error.data)
    return _ok(id_, result) if has_id else None


def _modern_version(params: dict[str, Any]) -> str | None:
    meta = params.get("_meta")
    if isinstance(meta, dict) and META_VERSION in meta:
        value = meta[META_VERSION]
        return value if isinstance(value, str) else ""
    return None


def _dispatch(
    method: str, params: dict[str, Any], headers: dict[str, str], host: Host, *, batched: bool
) -> bytes:
    version = _modern_version(params)
    if version is not None:
        if batched:
            raise RpcError(INVALID_REQUEST, "protocol 2026-07-28 has no batches")
        return _modern(version, method, params, headers, host)
    header = headers.get("mcp-protocol-version")
    if header is not None and header not in HANDSHAKE_VERSIONS and method != "initialize":
        if header in MODERN_VERSIONS:
            raise RpcError(INVALID_PARAMS, f"params._meta[{META_VERSION!r}] is required")
        raise RpcError(
            UNSUPPORTED_VERSION,
            "unsupported protocol version",
            {"supported": list(VERSIONS), "requested": header},
        )
    if method.startswith("notifications/"):
        return b"{}"
    if method == "initialize":
        return _initialize(params)
    if method == "ping":
        return b"{}"
    if method == "tools/list":
        return _tools_list(host, modern=False)
    if method == "tools/call":
        return _tools_call(params, host, modern=False)
    raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")


def _modern(
    version: str, method: str, params: dict[str, Any], headers: dict[str, str], host: Host
) -> bytes:
    if version not in MODERN_VERSIONS:
        raise RpcError(
            UNSUPPORTED_VERSION,
            "unsupported protocol version",
            {"supported": list(VERSIONS), "requested": version},
        )
    if headers.get("mcp-protocol-version") != version:
        raise RpcError(HEADER_MISMATCH, "MCP-Protocol-Version header does not match params._meta")
    if headers.get("mcp-method") != method:
        raise RpcError(HEADER_MISMATCH, "Mcp-Method header does not match the body's method")
    if method == "tools/call" and headers.get("mcp-name") != params.get("name"):
        raise RpcError(HEADER_MISMATCH, "Mcp-Name header does not match params.name")
    if method.startswith("notifications/"):
        return b"{}"
    if method == "server/discover":
        return _discover()
    if method == "tools/list":
        return _tools_list(host, modern=True)
    if method == "tools/call":
        return _tools_call(params, host, modern=True)
    raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")


def _initialize(params: dict[str, Any]) -> bytes:
    asked = params.get("protocolVersion")
    if not isinstance(asked, str):
        raise RpcError(INVALID_PARAMS, "params.protocolVersion must be a string")
    version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    result = {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": SERVER_INFO,
        "instructions": INSTRUCTIONS,
    }
    return json.dumps(result).encode("utf-8")


def _discover() -> bytes:
    result = {
        "supportedVersions": list(VERSIONS),
        "capabilities": {"tools": {"listChanged": False}},
        "instructions": INSTRUCTIONS,
        "resultType": "complete",
        "ttlMs": TOOLS_TTL_MS,
        "cacheScope": "private",
        "_meta": {META_SERVER: SERVER_INFO},
    }
    return json.dumps(result).encode("utf-8")


_LISTINGS: dict[tuple[tuple[str, ...], bool], bytes] = {}


def _tools_list(host: Host, *, modern: bool) -> bytes:
    tools = host.tools()
    key = (tuple(tool.name for tool in tools), modern)
    cached = _LISTINGS.get(key)
    if cached is None:
        result: dict[str, Any] = {"tools": [tool.listing() for tool in tools]}
        if modern:
            # 2026-07-28 moved tasks out of the core protocol: its Tool has no `execution`.
            for listed in result["tools"]:
                del listed["execution"]
            result.update(resultType="complete", ttlMs=TOOLS_TTL_MS, cacheScope="private")
        cached = _LISTINGS[key] = json.dumps(result, ensure_ascii=False).encode("utf-8")
    return cached


def _tools_call(params: dict[str, Any], host: Host, *, modern: bool) -> bytes:
    name = params.get("name")
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, "params.name must be a string")
    tool = BY_NAME.get(name)
    if tool is None:
        raise RpcError(INVALID_PARAMS, f"unknown tool: {name}")
    arguments = params.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise RpcError(INVALID_PARAMS, "params.arguments must be an object")
    result = host.call(tool, arguments)
    if modern:
        return result[:-1] + b',"resultType":"complete"}'
    return result
