"""A test server: `origin.server.serve` in front of a dispatcher that says which request path
answered (`python -m tests.origin.probe_serve PORT GATE STARTED`).

Every answer is JSON: the method, path, query, the body's length, the request id the core saw,
and `path_taken`: `direct` for a request made from a `DirectCycle` (`origin.direct`), `cycle`
for one received through a uvicorn cycle. A POST to `/slow` touches the file STARTED once it
is in `dispatch`, then waits until the file GATE exists, so a test can act (a SIGTERM, more
pipelined requests) while a write is in flight. Run under `tests.origin.cycle_only`, every
request is received through a cycle.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from aidememo.http.types import Request, Response
from origin.direct import DirectCycle
from origin.server import ServerSettings, serve

PATH_TAKEN = "x-probe-path-taken"
"""Set on the requests the direct path makes (`_mark_direct`); absent on the others."""


def _mark_direct() -> None:
    """Have `origin.direct.DirectCycle` mark each request it makes as the direct path's."""
    made = DirectCycle.request

    def request(self: DirectCycle) -> Request:
        made_request = made(self)
        made_request.headers[PATH_TAKEN] = "direct"
        return made_request

    DirectCycle.request = request  # type: ignore[method-assign]


class Probe:
    def __init__(self, gate: Path, started: Path) -> None:
        self.gate = gate
        self.started = started

    def dispatch(self, request: Request) -> Response:
        taken = request.headers.get(PATH_TAKEN, "cycle")
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
    _mark_direct()
    return serve(Probe(gate, started), ServerSettings(port=port), close=lambda: None)


if __name__ == "__main__":
    raise SystemExit(main())
