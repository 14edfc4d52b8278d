#!/usr/bin/env python3
"""Artifact transfer through a real `aidememo serve` (SQLite, local bodies; SPEC.md ART-*).

`--grants` measures grant transfers with S3 bodies on SeaweedFS instead, beside a same-run raw
boto3 `put_object`/`get_object` baseline (`scripts/_bench_grants.py` says how; GRANT-3).

What is measured, and how:
- The server: `python -m aidememo serve` on a free loopback port with a fresh `AIDEMEMO_HOME`
  (SQLite at `<home>/ssot.sqlite`, bodies under `<home>/ssot.sqlite.artifacts`), one writer
  bootstrapped with `aidememo bootstrap`. Its peak RSS is `VmHWM` of `/proc/<pid>/status`:
  read once idle (after a warm-up round) and after each size's rounds.
- Per body size (1 KiB, 1 MiB, 64 MiB by default; `--sizes` in bytes) and `--rounds` rounds
  (default 30, 10, 3): one `reserve + upload + publish` (a new path each round, so nothing is
  replaced) and one `download`, each timed with `time.perf_counter_ns` around the whole
  exchange over one keep-alive `http.client` connection; the upload streams the body from
  memory in 64 KiB writes.
- Baseline, same run, same bytes: write a new file in the same file system, `fsync`, close
  (the write), and read it back whole (the read).
- Output: progress on stderr; the last stdout line is one JSON object (`_bench_common.emit`):
  `figures` has `{size}_{put|get}_{p50,p95,p99,max,mean}_ms`, `{size}_{put|get}_mib_s`
  (median throughput) and `server_rss_*`; `baseline` the file write/read figures; `targets`
  the peak server RSS during the 64 MiB uploads over idle (<= 32 MiB: bodies stream).
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import emit, free_port, latency_summary, note, target

REPO = Path(__file__).resolve().parents[1]
PROJECT = "bench"
SIZES = {1024: 30, 1 << 20: 10, 64 << 20: 3}


def _label(size: int) -> str:
    return f"{size >> 20}mib" if size >= 1 << 20 else f"{size >> 10}kib"


def _hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


class Conn:
    def __init__(self, port: int, token: str) -> None:
        self.http = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        self.auth = {"authorization": f"Bearer {token}"}

    def json(self, method: str, path: str, body: Any) -> Any:
        data = json.dumps(body).encode()
        headers = {**self.auth, "content-type": "application/json"}
        self.http.request(method, path, body=data, headers=headers)
        response = self.http.getresponse()
        raw = response.read()
        if response.status != 200:
            raise SystemExit(f"{method} {path}: {response.status} {raw[:300]!r}")
        return json.loads(raw)

    def put_body(self, path: str, data: bytes) -> None:
        self.http.putrequest("PUT", path)
        for key, value in {**self.auth, "content-type": "application/octet-stream"}.items():
            self.http.putheader(key, value)
        self.http.putheader("content-length", str(len(data)))
        self.http.endheaders()
        view = memoryview(data)
        for i in range(0, len(data), 64 << 10):
            self.http.send(view[i : i + (64 << 10)])
        response = self.http.getresponse()
        raw = response.read()
        if response.status != 200:
            raise SystemExit(f"PUT {path}: {response.status} {raw[:300]!r}")

    def download(self, path: str, revision: int) -> int:
        headers = {**self.auth, "content-type": "application/json"}
        self.http.request("POST", path, body=json.dumps({"revision": revision}), headers=headers)
        response = self.http.getresponse()
        n = 0
        while chunk := response.read(1 << 20):
            n += len(chunk)
        return n


def put_once(conn: Conn, path: str, data: bytes, n: int) -> dict[str, Any]:
    base = f"/v1/projects/{PROJECT}"
    payload = {
        "path": path, "size_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
    }  # fmt: skip
    r = conn.json("POST", f"{base}/artifact-reservations",
                  {"command_id": f"r{n}", "payload": payload})  # fmt: skip
    conn.put_body(f"{base}/artifact-reservations/{r['reservation_id']}/body", data)
    ref: dict[str, Any] = conn.json(
        "POST", f"{base}/artifact-reservations/{r['reservation_id']}/publish",
        {"command_id": f"p{n}"},
    )  # fmt: skip
    return ref


def baseline(folder: Path, data: bytes, rounds: int) -> tuple[list[int], list[int]]:
    writes, reads = [], []
    for i in range(rounds):
        path = folder / f"base{i}"
        t0 = time.perf_counter_ns()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        view = memoryview(data)
        for j in range(0, len(data), 64 << 10):
            os.write(fd, view[j : j + (64 << 10)])
        os.fsync(fd)
        os.close(fd)
        t1 = time.perf_counter_ns()
        with open(path, "rb") as handle:
            while handle.read(1 << 20):
                pass
        t2 = time.perf_counter_ns()
        writes.append(t1 - t0)
        reads.append(t2 - t1)
        path.unlink()
    return writes, reads


def main() -> int:
    if sys.argv[1:2] == ["--grants"]:
        from _bench_grants import run

        return run(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", help="comma-separated body sizes in bytes")
    parser.add_argument("--rounds", help="comma-separated rounds per size")
    parser.add_argument(
        "--grants", action="store_true", help="first: grant transfers on S3 bodies (own options)"
    )
    args = parser.parse_args()
    sizes = dict(SIZES)
    if args.sizes:
        given = [int(s) for s in args.sizes.split(",")]
        counts = [int(c) for c in args.rounds.split(",")] if args.rounds else [3] * len(given)
        sizes = dict(zip(given, counts, strict=True))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
        env["AIDEMEMO_HOME"] = str(home)
        token = secrets.token_hex(32)
        token_file = Path(tmp) / "token"
        token_file.write_text(token)
        aidememo = [sys.executable, "-m", "aidememo"]
        subprocess.run(
            [*aidememo, "bootstrap", "--tenant-id", "t", "--project-id", PROJECT,
             "--actor-id", "bench", "--token-file", str(token_file)],
            check=True, env=env, cwd=REPO, capture_output=True,
        )  # fmt: skip
        port = free_port()
        server = subprocess.Popen(
            [*aidememo, "serve", "--port", str(port)], env=env, cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            for _ in range(200):
                try:
                    http.client.HTTPConnection("127.0.0.1", port, timeout=1).request(
                        "GET", "/health"
                    )
                    break
                except OSError:
                    time.sleep(0.05)
            conn = Conn(port, token)
            put_once(conn, "sessions/warm/artifacts/w", b"warm", 0)
            idle = _hwm_kib(server.pid)
            figures: dict[str, Any] = {"server_rss_idle_mib": round(idle / 1024, 1)}
            base: dict[str, Any] = {}
            n = 1
            peak_64 = idle
            for size, rounds in sizes.items():
                label = _label(size)
                data = os.urandom(size)
                puts, gets = [], []
                note(f"{label}: {rounds} rounds")
                for i in range(rounds):
                    t0 = time.perf_counter_ns()
                    ref = put_once(conn, f"sessions/b/artifacts/{label}-{i}", data, n)
                    t1 = time.perf_counter_ns()
                    got = conn.download(
                        f"/v1/projects/{PROJECT}/artifacts/{ref['artifact_id']}/downloads",
                        ref["revision"],
                    )
                    t2 = time.perf_counter_ns()
                    assert got == size, (got, size)
                    puts.append(t1 - t0)
                    gets.append(t2 - t1)
                    n += 1
                hwm = _hwm_kib(server.pid)
                if size >= 64 << 20:
                    peak_64 = max(peak_64, hwm)
                figures[f"server_rss_after_{label}_mib"] = round(hwm / 1024, 1)
                figures.update(latency_summary(puts, f"{label}_put"))
                figures.update(latency_summary(gets, f"{label}_get"))
                for kind, samples in (("put", puts), ("get", gets)):
                    mid = sorted(samples)[len(samples) // 2]
                    figures[f"{label}_{kind}_mib_s"] = round(size / (1 << 20) / (mid / 1e9), 2)
                writes, reads = baseline(home, data, rounds)
                base.update(latency_summary(writes, f"{label}_file_write"))
                base.update(latency_summary(reads, f"{label}_file_read"))
            conn.http.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    targets = {}
    if any(size >= 64 << 20 for size in sizes):
        targets["server_rss_64mib_over_idle_mib"] = target((peak_64 - idle) / 1024, "<= 32")
    emit("bench_artifacts", figures, base, targets)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
