"""The MCP endpoint's components: its JSON-RPC messages (SPEC.md MCP-4..6)."""

from __future__ import annotations

from aidememo.http.schemas import Schema, obj


def mcp_schemas(s: dict[str, Schema]) -> None:
    """The MCP endpoint's JSON-RPC messages (SPEC.md MCP-4..6)."""
    s["JsonRpcMessage"] = {
        "description": "One JSON-RPC 2.0 message of MCP (request, notification or response),"
        " or a batch under protocol 2024-11-05 and 2025-03-26. Protocol 2026-07-28 requests"
        " carry params._meta['io.modelcontextprotocol/protocolVersion'] and the headers"
        " MCP-Protocol-Version, Mcp-Method and (tools/call) Mcp-Name matching the body.",
        "type": ["object", "array"],
    }
    response = {
        "type": "object",
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["string", "integer", "null"]},
            "result": {"type": "object"},
            "error": obj(
                {"code": {"type": "integer"}, "message": {"type": "string"}}, {"data": {}}
            ),
        },
        "required": ["jsonrpc", "id"],
        "oneOf": [{"required": ["result"]}, {"required": ["error"]}],
        "additionalProperties": False,
    }
    s["JsonRpcAnswer"] = {
        "description": "The JSON-RPC response (a batch's responses under the versions that"
        " have batches). Tool refusals are results with isError true; JSON-RPC errors are"
        " protocol faults only: -32700, -32600, -32601, -32602, and under 2026-07-28 -32020"
        " (headers do not match the body) and -32022 (unsupported version).",
        "anyOf": [response, {"type": "array", "items": response, "minItems": 1}],
    }
