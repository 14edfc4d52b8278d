"""Every part of uvicorn the origin's transport relies on beyond uvicorn's public API, in one
place, for the uvicorn version pyproject.toml pins exactly (a new uvicorn is taken by moving
the pin and running tests/origin, which exercises each of them).

Imported here, for `origin.transport` and `origin.direct`:
- `HttpToolsProtocol` (subclassed by `LimitedHttpProtocol`), `RequestResponseCycle` (made by
  the transport, and by uvicorn, to receive a body that comes after its head),
  `STATUS_LINE`, `HEADER_RE`, `HEADER_VALUE_RE` (the response head `origin.direct.encode`
  writes as the cycle would), `WebSocketsSansIOProtocol` (subclassed by
  `QuietWebSocketProtocol`).

Used on those classes (names as uvicorn spells them):
- `HttpToolsProtocol` attributes: `app`, `cycle`, `pipeline`, `flow` (`write_paused`,
  `read_paused`, `resume_reading`, `drain`), `parser`, `headers`, `url`, `scope`, `root_path`,
  `server_state` (`default_headers`, `total_requests`), `timeout_keep_alive`,
  `timeout_keep_alive_task`, `tasks`, `logger`, `access_logger`, `access_log`,
  `expect_100_continue`, `limit_concurrency`, `transport`, `loop`.
- `HttpToolsProtocol` methods overridden or called: `connection_made`, `connection_lost`,
  `data_received`, `on_headers_complete`, `on_body`, `on_message_complete`,
  `on_response_complete`, `handle_websocket_upgrade`, `_unset_keepalive_if_required`,
  `_start_asgi_task` (overridden: where uvicorn would run the application, the transport
  answers), `_should_upgrade`, `_unsupported_upgrade_warning`, `send_400_response`.
- `RequestResponseCycle`: its constructor's keywords (`scope`, `transport`, `flow`,
  `logger`, `access_logger`, `access_log`, `default_headers`, `message_event`,
  `expect_100_continue`, `keep_alive`, `on_response`) and attributes `scope`, `body`,
  `transport`, `response_started`, `response_complete`, `keep_alive`, `disconnected`,
  `message_event`, `receive`.
- `WebSocketsSansIOProtocol`: `send`, `handle_connect`, `handshake_complete`, `response`,
  `loop`.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

__all__ = [
    "HEADER_RE",
    "HEADER_VALUE_RE",
    "STATUS_LINE",
    "HttpToolsProtocol",
    "RequestResponseCycle",
    "WebSocketsSansIOProtocol",
]
