"""A test server: `origin.server.serve` in front of a dispatcher that says which request path
answered (`python -m tests.origin.probe_serve PORT GATE STARTED`).

Every answer is JSON: the method, path, query, the body's length, the request id the core saw,
and `path_taken`: `direct` when `dispatch` runs under `origin.direct` (on the event loop or in
a pool thread it submitted), `asgi` otherwise. A POST to `/slow` touches the file STARTED once
it is in `dispatch`, then waits until the file GATE exists, so a test can act (a SIGTERM, more
pipelined requests) while a write is in flight. The environment chooses the rest
(`AIDEMEMO_DIRECT_PATH=off`: every request through ASGI).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from aidememo.http.types import Request, Response
from origin.server import ServerSettings, serve


def path_taken() -> str:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("origin/direct.py"):
            return "direct"
        frame = frame.f_back  # type: ignore[assignment]
    return "asgi"


class Probe:
    def __init__(self, gate: Path, started: Path) -> None:
        self.gate = gate
        self.started = started

    def dispatch(self, request: Request) -> Response:
        taken = path_taken()
        body = request.body.read()
        if request.method == "POST" and request.path == "/slow":
            self.started.touch()
            while not self.gate.exists():
                time.sleep(0.01)
        answer = {
            "method": request.method,
            "path": request.path,
            "query": request.query,
            "body_bytes": len(body),
            "request_id": request.request_id,
            "path_taken": taken,
        }
        return Response(200, [("content-type", "application/json")], json.dumps(answer).encode())


def main() -> int:
    port, gate, started = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    return serve(Probe(gate, started), ServerSettings(port=port), close=lambda: None)


if __name__ == "__main__":
    raise SystemExit(main())
