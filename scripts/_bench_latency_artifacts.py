"""The artifact operations of scripts/bench_latency.py: a small body published and read back.

- `artifact_put`: reserve (`POST .../artifact-reservations`), upload, publish, one sample for
  the three. The upload is the reservation's `transfer`: `direct` is `PUT .../body` on the
  service connection; `grant` is `POST .../upload-grants` on it, then the grant's `PUT` with
  exactly its headers straight to the object store.
- `artifact_get`: the current revision's bytes: a download grant (`POST .../download-grants`)
  and its `GET` from the store when the server issues them, else `POST .../downloads`.
Requests to the store go over their own keep-alive connection per store host (opened on first
use, reused after, also by cold samples, whose fresh connection is the service's), so a grant
operation's samples include the store's round trips but not repeated TLS handshakes to it.
Each put writes a new path under the run tag, so repeated runs never collide. `mode` in the
figures says which transfer the server offered.
"""

from __future__ import annotations

import hashlib
import http.client
import json
from typing import Any
from urllib.parse import quote, urlsplit

from _bench_latency_client import Actor, Endpoint, HttpFailure

BODY_BYTES = 4096
TIMEOUT_S = 30.0


class ArtifactOps:
    """The two artifact operations of one bench run."""

    def __init__(self, endpoint: Endpoint, writer: Actor, base: str, tag: str) -> None:
        self.endpoint = endpoint
        self.writer = writer
        self.base = base
        self.tag = tag
        self.body = (tag.encode() * BODY_BYTES)[:BODY_BYTES]
        self.sha = hashlib.sha256(self.body).hexdigest()
        self.mode = "unknown"
        self.published: dict[str, Any] | None = None
        self.store: dict[tuple[str, str], http.client.HTTPConnection] = {}

    def close(self) -> None:
        for conn in self.store.values():
            conn.close()
        self.store.clear()

    def _raw(
        self, conn: http.client.HTTPConnection, method: str, path: str, data: bytes,
        headers: dict[str, str],
    ) -> bytes:  # fmt: skip
        conn.request(method, self.endpoint.prefix + path, data, {**self.writer.headers, **headers})
        response = conn.getresponse()
        raw = response.read()
        if response.status != 200:
            raise HttpFailure(f"{method} {path}: {response.status} {raw[:300]!r}")
        return raw

    def _store(self, method: str, grant: dict[str, Any], data: bytes | None) -> bytes:
        """One request to the object store with the grant's exact headers (never logged)."""
        parts = urlsplit(str(grant["url"]))
        key = (parts.scheme, parts.netloc)
        for attempt in (0, 1):  # a kept connection the store closed meanwhile: reopen once
            conn = self.store.get(key)
            if conn is None:
                cls = (
                    http.client.HTTPSConnection
                    if parts.scheme == "https"
                    else http.client.HTTPConnection
                )
                conn = self.store[key] = cls(parts.netloc, timeout=TIMEOUT_S)
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            try:
                conn.request(method, target, data, dict(grant["headers"]))
                response = conn.getresponse()
                raw = response.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                del self.store[key]
                if attempt:
                    raise
                continue
            if response.status != 200:
                raise HttpFailure(f"{method} to the object store: {response.status}")
            return raw
        raise AssertionError("unreachable")

    def put(self, conn: http.client.HTTPConnection, i: int) -> Any:
        path = f"sessions/bench-{self.tag}/artifacts/a{i}.bin"
        payload = {"path": path, "size_bytes": len(self.body), "sha256": self.sha,
                   "content_type": "application/octet-stream"}  # fmt: skip
        command = {"command_id": f"bench-art-{self.tag}-{i}", "payload": payload}
        r = self.writer.request(conn, "POST", f"{self.base}/artifact-reservations", command)
        rid = r["reservation_id"]
        transfer = r.get("transfer") or {}
        self.mode = str(transfer.get("mode", "direct"))
        if self.mode == "grant":
            g = self.writer.request(
                conn, "POST", f"{self.base}/artifact-reservations/{rid}/upload-grants"
            )
            self._store("PUT", g, self.body)
        else:
            self._raw(conn, "PUT", f"{self.base}/artifact-reservations/{rid}/body", self.body,
                      {"Content-Type": "application/octet-stream"})  # fmt: skip
        ref = self.writer.request(conn, "POST", f"{self.base}/artifact-reservations/{rid}/publish",
                                  {"command_id": f"bench-artp-{self.tag}-{i}"})  # fmt: skip
        self.published = ref
        return ref

    def get(self, conn: http.client.HTTPConnection, i: int) -> Any:
        assert self.published is not None, "artifact_put runs first"
        ref = self.published
        target = f"{self.base}/artifacts/{quote(ref['artifact_id'], safe='')}"
        body = {"revision": ref["revision"]}
        if self.mode == "grant":
            g = self.writer.request(conn, "POST", f"{target}/download-grants", body)
            data = self._store("GET", g, None)
        else:
            data = self._raw(conn, "POST", f"{target}/downloads", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})  # fmt: skip
        if len(data) != len(self.body):
            raise HttpFailure(f"artifact_get read {len(data)} bytes, not {len(self.body)}")
        return data
