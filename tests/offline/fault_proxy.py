"""A fault-injecting HTTP proxy on a loopback port, in front of a real server.

Two switches, as the degraded-operation scenario needs them:
- `outage`: every request is answered 503 `injected server outage` without reaching the
  server, and every open WebSocket tunnel is cut (the live feed is lost);
- `lose_next_handoff`: the next `POST .../handoffs` the server answers with success is
  committed there, but the client gets 502 `injected lost upstream success response`.

A WebSocket upgrade is tunnelled byte for byte to the server (the live feed works through
the proxy). `posts` counts the POSTs that reached the server, by path.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

OUTAGE = "injected server outage"
LOST = "injected lost upstream success response"


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        proxy = self
        self.outage = False
        self.lose_next_handoff = False
        self.lost = 0
        self.posts: Counter[str] = Counter()
        self._tunnels: set[socket.socket] = set()
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, code: str, message: str) -> None:
                data = json.dumps({"error": {"code": code, "message": message}}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                if proxy.outage:
                    self._answer(503, "service_unavailable", OUTAGE)
                    return
                if self.headers.get("upgrade", "").lower() == "websocket":
                    self._tunnel()
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                conn = http.client.HTTPConnection(host, port, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                finally:
                    conn.close()
                path = self.path.split("?", 1)[0]
                if self.command == "POST":
                    proxy.posts[path] += 1
                if (
                    self.command == "POST"
                    and path.endswith("/handoffs")
                    and 200 <= answer.status < 300
                    and proxy._take_lost()
                ):
                    self._answer(502, "bad_gateway", LOST)
                    return
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _tunnel(self) -> None:
                upstream = socket.create_connection((host, port), timeout=30)
                upstream.settimeout(None)
                head = [f"{self.command} {self.path} HTTP/1.1"]
                head += [f"{k}: {v}" for k, v in self.headers.items()]
                upstream.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
                client = self.connection
                client.settimeout(None)
                with proxy._lock:
                    proxy._tunnels.update((client, upstream))

                def pump(src: socket.socket, dst: socket.socket) -> None:
                    try:
                        while data := src.recv(65536):
                            dst.sendall(data)
                    except OSError:
                        pass
                    for sock in (src, dst):
                        try:
                            sock.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass

                back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
                back.start()
                # a WebSocket client sends nothing more before the 101, so rfile holds nothing
                pump(client, upstream)
                back.join(timeout=10)
                with proxy._lock:
                    proxy._tunnels.difference_update((client, upstream))
                upstream.close()
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _take_lost(self) -> bool:
        with self._lock:
            if not self.lose_next_handoff:
                return False
            self.lose_next_handoff = False
            self.lost += 1
            return True

    def set_outage(self, on: bool) -> None:
        """Switch the outage; switching it on cuts every open tunnel."""
        self.outage = on
        if on:
            with self._lock:
                tunnels = list(self._tunnels)
            for sock in tunnels:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        self.set_outage(True)
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
