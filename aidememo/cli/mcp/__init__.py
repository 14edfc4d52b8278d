"""`aidememo mcp`: the MCP tools over stdio for agent hosts (`stdio`, with the official SDK),
the memory tools beside them (`memory`), and `mcp install` (`install`)."""
