"""`aidememo memory ...`: the local memory store (Nuzo compatible, `aidememo.agent_memory`).
`parser` adds the commands; `commands` and the modules beside it run them."""
