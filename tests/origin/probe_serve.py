"""A test server: `origin.server.serve` in front of a dispatcher that says which request path
answered (`python -m tests.origin.probe_serve PORT GATE STARTED`).

Every answer is JSON: the method, path, query, the body's length, the request id the core saw,
and `path_taken`: `whole` for a request whose body the transport collected before dispatch,
`arriving` for one whose body the core read while it arrived (`origin.exchange.ArrivingBody`),
and `gc_frozen`, how many objects the server moved out of the collector's reach at start-up.
A POST to `/slow` touches the file STARTED once it is in `dispatch`, then waits until the file
GATE exists, so a test can act (a SIGTERM, more pipelined requests) while a write is in flight.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path

from aidememo.http.types import Request, Response
from origin.exchange import ArrivingBody
from origin.server import ServerSettings, serve


class Probe:
    def __init__(self, gate: Path, started: Path) -> None:
        self.gate = gate
        self.started = started

    def dispatch(self, request: Request) -> Response:
        taken = "arriving" if isinstance(request.body, ArrivingBody) else "whole"
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
            "gc_frozen": gc.get_freeze_count(),
        }
        return Response(200, [("content-type", "application/json")], json.dumps(answer).encode())


def main() -> int:
    port, gate, started = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    return serve(Probe(gate, started), ServerSettings(port=port), close=lambda: None)


if __name__ == "__main__":
    raise SystemExit(main())
