"""Request and response bodies as streams, so a 256 MiB export or import never sits whole in
the Worker's 128 MB.

- `body_chunks(request)`: the request body as it arrives. The SDK's `Request.body` is the JS
  `ReadableStream` (or null); Pyodide iterates it asynchronously, each chunk a `Uint8Array`
  proxy. The Worker counts the chunks against the route's limit as they arrive
  (`aidememo.http.body.read_async`, `worker.transfer`).
- `stream_response(ctx, status, headers, texts)`: a `Response` whose body is the readable side
  of a JS `TransformStream`; a background task writes each text (UTF-8, via `TextEncoder`)
  into the writable side, waiting on every write, so the stream's backpressure bounds what is
  held in memory. The task is handed to `ctx.waitUntil` so the runtime keeps the request alive
  until the body is written. Once the status has gone out an error cannot change it: the
  stream is aborted instead, and the client sees a body that ends early, without the manifest
  line that proves an export whole.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

log = logging.getLogger("aidememo.edge")


async def body_chunks(request: Any) -> AsyncIterator[bytes]:
    """The request body, chunk by chunk, as bytes."""
    body = request.body
    if not body:  # None, or JS null
        return
    async for chunk in body:
        yield chunk.to_bytes()


def stream_response(
    ctx: Any, status: int, headers: dict[str, str], texts: AsyncIterator[str]
) -> Any:
    """A streamed `workers.Response`: `texts` is written to its body in the background."""
    from js import TextEncoder, TransformStream
    from pyodide.ffi import create_proxy
    from workers import Response

    pipe = TransformStream.new()
    writer = pipe.writable.getWriter()
    encoder = TextEncoder.new()

    async def pump() -> None:
        try:
            async for text in texts:
                if text:
                    await writer.write(encoder.encode(text))
            await writer.close()
        except Exception as exc:
            log.exception("streamed response failed after its status was sent")
            try:
                await writer.abort(str(exc))
            except Exception:  # the reader may be gone already
                log.debug("aborting the response stream failed", exc_info=True)

    task = asyncio.ensure_future(pump())
    proxy = create_proxy(task)
    task.add_done_callback(lambda _: proxy.destroy())
    ctx.waitUntil(proxy)
    return Response(pipe.readable, status=status, headers=headers)
