"""The MCP surface of the core (stdlib only, so the edge serves it too).

`tools` is the one tool registry (names, model-facing descriptions, closed argument schemas,
output schemas), `dispatch` runs a tool call through its REST twin's route handler with the
caller's identity, `protocol` is the JSON-RPC handling of the stateless HTTP transport
(SPEC.md MCP-*), and `http` is the route handler of `POST /v1/projects/{project_id}/mcp`.
"""
