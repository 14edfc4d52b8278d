"""What both modes of `scripts/bench_latency.py` share: how they reach the deployment.

`Endpoint` (where to connect, the path prefix, one explicit connection at a time), `Actor` (one
bearer token; a request on a given connection, its status checked), `HttpFailure` (a non-200
answer, which ends the run with exit status 1), `TIMEOUT_S`, `read_token` (the token files)
and `plot`, the latency histograms both the request mode and `--live` draw with `--plot`. Kept
apart so that the request benchmark (`bench_latency.py`) and the live-feed round
(`_bench_latency_live.py`) import them from one place.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from _bench_common import note

TIMEOUT_S = 30.0


class HttpFailure(RuntimeError):
    pass


class Endpoint:
    """Where to connect and which path prefix to put in front of every route."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SystemExit(f"--base-url must be http(s)://host[:port][/prefix], not {base_url}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")

    def connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=TIMEOUT_S)
        conn.connect()
        return conn


class Actor:
    """One token; `request` runs on a given connection and checks the status."""

    def __init__(self, endpoint: Endpoint, token: str | None) -> None:
        self.endpoint = endpoint
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def request(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
    ) -> Any:
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, self.endpoint.prefix + path, data, headers)
        response = conn.getresponse()
        raw = response.read()
        if response.status != 200:
            raise HttpFailure(f"{method} {path}: {response.status} {raw[:300]!r}")
        return json.loads(raw) if raw else None


def read_token(path: str) -> str:
    text = Path(path).expanduser().read_text(encoding="utf-8").strip()
    if not text:
        raise SystemExit(f"token file {path} is empty")
    return text


def plot(path: str, samples: dict[str, dict[str, list[int]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(samples)
    fig, axes = plt.subplots(len(names), 1, figsize=(8, 2.4 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        for kind, values in samples[name].items():
            if values:
                ax.hist(
                    [v / 1e6 for v in values], bins=40, alpha=0.6, label=f"{kind} (n={len(values)})"
                )
        ax.set_title(name)
        ax.set_xlabel("ms")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    note(f"histograms written to {path}")
