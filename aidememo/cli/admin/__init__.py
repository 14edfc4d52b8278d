"""The admin commands: `token`, `bootstrap`, `admin ...`, `health` and `indexer`, on a local
store (`--database`) or an admin URL (`--url`, `remote`). `parser` adds them (and origin's
`serve`) to the command tree; `commands` holds the handlers."""
