"""The `aidememo` command line (CPython only), one subpackage per command group.

`main` builds the command tree (stdlib `argparse`) and runs one command; `agent/` holds the
agent commands (profiles, sessions, facts, handoffs, artifacts, replica and outbox) on the
Python client, `admin/` the admin commands (tokens, bootstrap, admin, health, indexer) on a
store or an admin URL, `mcp/` the MCP stdio server and installer, `memory/` the local memory
store's commands. The modules here are what every group shares: flags with environment
fallbacks (`options`), errors and exit statuses, output, URL checks, token files and store
paths. `serve` is origin's (`origin.serve_command`, the one module of origin/ the command line
imports, and only when a command needs it).
"""
