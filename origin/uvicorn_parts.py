"""The parts of uvicorn the origin's transport relies on beyond `uvicorn.Config` and
`uvicorn.Server`, in one place, for the uvicorn version pyproject.toml pins exactly (a new
uvicorn is taken by moving the pin and running tests/origin, which exercises each of them).
The transport also uses, at the versions pinned beside uvicorn: httptools'
`HttpRequestParser` (its callbacks, `get_method`, `get_http_version`, `should_keep_alive`,
`should_upgrade`, `set_dangerous_leniencies`), `parse_url` and its two exceptions; and
`websockets.http11.Request`, the handshake request `QuietWebSocketProtocol` is handed.

- The HTTP protocol class contract: uvicorn makes `Config.http` for each connection with the
  keywords `config`, `server_state`, `app_state`; the transport reads `Config.loaded`,
  `load()`, `loaded_app`, `root_path`, `ws_protocol_class`, and `ServerState.connections`
  (where graceful shutdown finds each connection's `shutdown()`), `tasks`,
  `default_headers` (the `date` line) and `total_requests`.
- `WebSocketsSansIOProtocol`, subclassed by `QuietWebSocketProtocol`: its `send`,
  `handle_connect`, `handshake_complete`, `response` and `loop`; it is made as above, then
  `connection_made`, the transport's `set_protocol` and `data_received` with the request head.
"""

from __future__ import annotations

from uvicorn.config import Config
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState

__all__ = ["Config", "ServerState", "WebSocketsSansIOProtocol"]
