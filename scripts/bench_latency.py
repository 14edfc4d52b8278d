#!/usr/bin/env python3
"""Request latency of one aidememo deployment.

Works against `wrangler dev`, a deployed Worker or an origin alike: it only speaks the HTTP
contract. What is measured, and how:

- Client: the stdlib `http.client`, one request at a time, with connections opened explicitly
  so that connection reuse is under control. Two kinds of sample per operation:
  * cold: a fresh connection (TCP, and TLS for https) for one request, then closed; the time
    covers connect + handshake + request + response.
  * warm: one keep-alive connection; a first request (not counted) opens it, then `--requests`
    requests are timed one after another.
  Times are `time.perf_counter_ns` around the whole exchange, body read included.
- Operations, each on the project of `--project` with the token of `--token-file`:
  `POST facts` (a unique command_id/fact_id per request, about 200 bytes of content),
  `GET resource` (a fact written above), `GET search` (two terms that match a few facts),
  `GET changes` (`limit=100` from the start of the log). With `--receiver-token-file` (a second
  member of the project), `--cycles` handoff cycles: send by the first actor, accept, result
  fact and return by the second, timed per step and per cycle on warm connections.
  `artifact_put` (reserve + upload + publish of a 4 KiB body) and `artifact_get` (its
  download), direct or through grants as the server offers (`scripts/_bench_latency_artifacts.py`;
  `artifact_mode` says which); `--no-artifacts` leaves them out.
- Baseline, in the same run and with the same client: `GET /health` (no auth, no store).
- Output: progress on stderr; the last stdout line is the JSON result object
  (`_bench_common.emit`).
  `figures` has `{op}_{cold|warm}_{p50,p95,p99,max,mean}_ms` and sample counts; `baseline`
  the same for `/health`; `ratios` inside figures divide each warm p50 by the baseline's warm
  p50. `targets` is empty: the <= 15 % overhead targets (Worker and Durable Object
  translation over the core) are measured in process by scripts/bench_edge_overhead.py, which
  a network client cannot do.
- `--plot FILE.png` draws a latency histogram per operation (cold and warm) with matplotlib,
  imported only then (`pip install matplotlib` when it is missing).

`--live` measures the live change feed instead: commit-to-delivery latency with
`--live-subscribers` (default `1,100`) WebSocket subscribers (the `websockets` package of the
test extra, all on one asyncio loop in this process) on `/v1/projects/{p}/changes/live`. Each
round subscribes every client at the head (the search `index_seq`, which equals the head,
SRCH-1), waits until each has its first catch-up page, then a writer thread posts
`--live-commits` facts one after another, `--live-interval-ms` apart, over one warm connection
(`--live-writer-url`: to another origin process on the same PostgreSQL database, so each
delivery crosses processes). A sample is the time from just before a fact's POST is sent to the
moment a subscriber has received and decoded the batch of that commit; every subscriber gives
one sample per commit. Every subscriber must receive every commit exactly once and in order:
`lost`, `duplicated` and `out_of_order` count what did not. The baseline is the same run's POST
round trip (the writer's acknowledgement of a durable commit: delivery cannot beat it).
Targets (the issue's, on the origin): `live_100_p95_ms <= 50` and no message lost or
duplicated. The last line is then `{"name": "bench_latency_live", ...}`.

`--client` drives the same request operations (and the handoff cycle) through
`aidememo.client` instead, interleaved with the same calls as raw HTTP, and prints
`{"name": "bench_latency_client", ...}` with the raw-HTTP figures as its baseline and the
client's p50 overhead per operation as targets (`scripts/_bench_latency_sdk.py`).

`--mcp` runs each request operation as the MCP tool call that wraps it (`POST .../mcp`,
protocol 2026-07-28) interleaved with its REST route, and prints `{"name":
"bench_latency_mcp", ...}` with the route as the baseline and the tool call's p50 overhead
per operation as targets (`scripts/_bench_latency_mcp.py`).

Every id written carries a run tag, so repeated runs against one project never collide.
Usage: `.venv/bin/python scripts/bench_latency.py --base-url http://127.0.0.1:3030
--token-file ~/.aidememo/demo.token --project demo [--requests 200] [--live]`.
The HTTP client both modes share (and the histogram plot) is in
`scripts/_bench_latency_client.py`, the live-feed round in `scripts/_bench_latency_live.py`;
this file holds the request operations, the handoff cycle and the command line.
"""

from __future__ import annotations

import argparse
import http.client
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import emit, latency_summary, note, peak_rss_mib
from _bench_latency_artifacts import ArtifactOps
from _bench_latency_client import Actor, Endpoint, HttpFailure, plot, read_token
from _bench_latency_live import add_live_writer_argument, run_live
from _bench_latency_mcp import run_mcp
from _bench_latency_sdk import run_client

OPERATIONS = ("post_facts", "get_resource", "get_search", "get_changes")
ARTIFACT_OPERATIONS = ("artifact_put", "artifact_get")
HANDOFF_STEPS = ("send", "accept", "fact", "return")

Call = Callable[[http.client.HTTPConnection, int], Any]


def measure(endpoint: Endpoint, call: Call, warm_n: int, cold_n: int) -> dict[str, list[int]]:
    """`cold_n` one-request connections, then `warm_n` requests on one warmed connection."""
    clock = time.perf_counter_ns
    cold: list[int] = []
    for i in range(cold_n):
        t0 = clock()
        conn = endpoint.connect()
        try:
            call(conn, i)
        finally:
            conn.close()
        cold.append(clock() - t0)
    warm: list[int] = []
    conn = endpoint.connect()
    try:
        call(conn, cold_n)  # opens the connection (and TLS); not counted
        for i in range(cold_n + 1, cold_n + 1 + warm_n):
            t0 = clock()
            call(conn, i)
            warm.append(clock() - t0)
    finally:
        conn.close()
    return {"cold": cold, "warm": warm}


def summarize(name: str, samples: dict[str, list[int]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("cold", "warm"):
        out.update(latency_summary(samples[kind], f"{name}_{kind}"))
        out[f"{name}_{kind}_n"] = len(samples[kind])
    return out


# -- the operations ---------------------------------------------------------------------------

COMMON = ("deploy", "cache", "timeout", "cluster", "review", "latency", "edge", "origin")


def fact_content(i: int, tag: str) -> str:
    """About 200 bytes: common words plus two terms shared by a few facts."""
    words = [COMMON[(i + k) % len(COMMON)] for k in range(12)]
    return f"{' '.join(words)} rare{tag}{i % 7} probe{tag}{i % 11} benchmark fact number {i}"


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.endpoint = Endpoint(args.base_url)
        self.tag = secrets.token_hex(3)
        self.project = args.project
        self.base = f"/v1/projects/{quote(self.project, safe='')}"
        self.writer = Actor(self.endpoint, read_token(args.token_file))
        self.receiver = (
            Actor(self.endpoint, read_token(args.receiver_token_file))
            if args.receiver_token_file
            else None
        )
        self.anonymous = Actor(self.endpoint, None)
        self.session = f"bench-session-{self.tag}"
        self.facts: list[str] = []

    def setup(self) -> dict[str, Any]:
        conn = self.endpoint.connect()
        try:
            identity = self.writer.request(conn, "GET", f"{self.base}/identity")
            self.epoch = identity["project_epoch"]
            self.writer.request(
                conn,
                "POST",
                f"{self.base}/sessions",
                {
                    "command_id": f"bench-sess-{self.tag}",
                    "payload": {
                        "session_id": self.session,
                        "topic": "latency benchmark",
                        "source_id": "bench",
                    },
                },
            )
        finally:
            conn.close()
        result: dict[str, Any] = identity
        return result

    def health(self, conn: http.client.HTTPConnection, i: int) -> Any:
        return self.anonymous.request(conn, "GET", "/health")

    def post_fact(self, conn: http.client.HTTPConnection, i: int) -> Any:
        fact_id = f"bench-{self.tag}-{i}"
        receipt = self.writer.request(
            conn,
            "POST",
            f"{self.base}/facts",
            {
                "command_id": f"bench-cmd-{self.tag}-{i}",
                "payload": {
                    "fact_id": fact_id,
                    "session_id": self.session,
                    "content": fact_content(i, self.tag),
                },
            },
        )
        self.facts.append(fact_id)
        return receipt

    def post_fact_at(
        self, conn: http.client.HTTPConnection, key: str, t0: int, sent_at: dict[int, int]
    ) -> Any:
        """A fact for the live feed; its commit's send time is kept under its sequence."""
        receipt = self.writer.request(
            conn,
            "POST",
            f"{self.base}/facts",
            {
                "command_id": f"bench-live-{self.tag}-{key}",
                "payload": {
                    "fact_id": f"bench-live-{self.tag}-{key}",
                    "session_id": self.session,
                    "content": fact_content(len(sent_at), self.tag),
                },
            },
        )
        sent_at[int(receipt["project_seq"])] = t0
        return receipt

    def get_resource(self, conn: http.client.HTTPConnection, i: int) -> Any:
        fact_id = self.facts[i % len(self.facts)]
        return self.writer.request(conn, "GET", f"{self.base}/resources/fact/{fact_id}")

    def get_search(self, conn: http.client.HTTPConnection, i: int) -> Any:
        query = urlencode({"q": f"rare{self.tag}{i % 7} probe{self.tag}{i % 11}", "limit": 20})
        return self.writer.request(conn, "GET", f"{self.base}/search?{query}")

    def get_changes(self, conn: http.client.HTTPConnection, i: int) -> Any:
        query = urlencode({"project_epoch": self.epoch, "after_seq": 0, "limit": 100})
        return self.writer.request(conn, "GET", f"{self.base}/changes?{query}")

    def handoff_cycles(self, cycles: int, first: int = 0) -> dict[str, list[int]]:
        """Send (writer), accept, result fact and return (receiver), on warm connections;
        the cycles are numbered from `first` (their ids carry the number)."""
        assert self.receiver is not None
        receiver_id = self._receiver_id()
        clock = time.perf_counter_ns
        timings: dict[str, list[int]] = {step: [] for step in (*HANDOFF_STEPS, "cycle")}
        a, b = self.endpoint.connect(), self.endpoint.connect()
        try:
            self.writer.request(a, "GET", "/health")  # open both connections first
            self.receiver.request(b, "GET", "/health")
            for i in range(first, first + cycles):
                hid, claim, fid = f"bh-{self.tag}-{i}", f"bc-{self.tag}-{i}", f"br-{self.tag}-{i}"
                t0 = clock()
                sent = self.writer.request(
                    a,
                    "POST",
                    f"{self.base}/handoffs",
                    {
                        "command_id": f"bhs-{self.tag}-{i}",
                        "payload": {
                            "handoff_id": hid,
                            "session_id": self.session,
                            "to_actor": receiver_id,
                            "focus": "latency benchmark handoff",
                        },
                    },
                )
                t1 = clock()
                accepted = self.receiver.request(
                    b,
                    "POST",
                    f"{self.base}/handoffs/{hid}/accept",
                    {
                        "command_id": f"bha-{self.tag}-{i}",
                        "expected_revision": sent["revision"],
                        "payload": {"claim_id": claim},
                    },
                )
                t2 = clock()
                self.receiver.request(
                    b,
                    "POST",
                    f"{self.base}/facts",
                    {
                        "command_id": f"bhf-{self.tag}-{i}",
                        "payload": {
                            "fact_id": fid,
                            "session_id": self.session,
                            "content": f"result of benchmark handoff {i}",
                        },
                    },
                )
                t3 = clock()
                self.receiver.request(
                    b,
                    "POST",
                    f"{self.base}/handoffs/{hid}/return",
                    {
                        "command_id": f"bhr-{self.tag}-{i}",
                        "expected_revision": accepted["revision"],
                        "payload": {
                            "claim_id": claim,
                            "result_fact_id": fid,
                            "outcome": "succeeded",
                        },
                    },
                )
                t4 = clock()
                for step, took in zip(
                    (*HANDOFF_STEPS, "cycle"),
                    (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0),
                    strict=True,
                ):
                    timings[step].append(took)
        finally:
            a.close()
            b.close()
        return timings

    def _receiver_id(self) -> str:
        assert self.receiver is not None
        conn = self.endpoint.connect()
        try:
            identity = self.receiver.request(conn, "GET", f"{self.base}/identity")
        finally:
            conn.close()
        if identity["project_epoch"] != self.epoch:
            raise SystemExit("the receiver token belongs to another project epoch")
        actor: str = identity["actor_id"]
        return actor


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:3030")
    parser.add_argument("--token-file", required=True, help="bearer token of a project writer")
    parser.add_argument(
        "--receiver-token-file", help="token of a second writer: adds the handoff cycle"
    )
    parser.add_argument("--project", default="demo", help="project id (default: demo)")
    parser.add_argument(
        "--requests", type=int, default=200, help="warm requests per operation (default 200)"
    )
    parser.add_argument(
        "--cold", type=int, help="fresh-connection requests per operation (default requests/10)"
    )
    parser.add_argument("--cycles", type=int, help="handoff cycles (default requests/10)")
    parser.add_argument("--plot", metavar="FILE.png", help="draw latency histograms")
    parser.add_argument(
        "--no-artifacts", action="store_true", help="leave out artifact_put and artifact_get"
    )
    parser.add_argument(
        "--live", action="store_true", help="measure the live change feed (WebSocket) instead"
    )
    parser.add_argument(
        "--client",
        action="store_true",
        help="drive the operations through aidememo.client, raw HTTP as the baseline",
    )
    parser.add_argument(
        "--mcp",
        action="store_true",
        help="each operation as its MCP tool call beside the REST route (the baseline)",
    )
    parser.add_argument(
        "--live-subscribers",
        default="1,100",
        help="comma-separated subscriber counts, one round each (default 1,100)",
    )
    add_live_writer_argument(parser)
    parser.add_argument(
        "--live-commits", type=int, default=200, help="commits per live round (default 200)"
    )
    parser.add_argument(
        "--live-interval-ms",
        type=float,
        default=10.0,
        help="pause between the writer's commits (default 10 ms)",
    )
    args = parser.parse_args(argv)
    try:
        args.live_subscribers = [int(n) for n in str(args.live_subscribers).split(",") if n]
    except ValueError:
        parser.error("--live-subscribers must be comma-separated integers")
    if not args.live_subscribers or min(args.live_subscribers) < 1 or args.live_commits < 1:
        parser.error("--live-subscribers and --live-commits must be at least 1")
    if args.requests < 1:
        parser.error("--requests must be at least 1")
    args.cold = max(1, args.requests // 10) if args.cold is None else args.cold
    args.cycles = max(1, args.requests // 10) if args.cycles is None else args.cycles
    return args


def _mcp(bench: Bench, args: argparse.Namespace) -> int:
    """`--mcp` (`scripts/_bench_latency_mcp.py`): set up, one fact to read, then the run."""
    try:
        bench.setup()
        note(f"bench_latency --mcp: {args.base_url} project {args.project}")
        conn = bench.endpoint.connect()
        try:
            bench.post_fact(conn, 0)
        finally:
            conn.close()
    except (HttpFailure, OSError) as exc:
        print(f"bench_latency: {exc}", file=sys.stderr)
        return 1
    return run_mcp(bench, args, fact_content)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("--plot needs matplotlib: pip install matplotlib", file=sys.stderr)
            return 2
    bench = Bench(args)
    if args.live:
        try:
            identity = bench.setup()
        except (HttpFailure, OSError) as exc:
            print(f"bench_latency: {exc}", file=sys.stderr)
            return 1
        note(f"bench_latency --live: {args.base_url} project {args.project}")
        return run_live(bench, args)
    if args.client:
        try:
            identity = bench.setup()
            note(f"bench_latency --client: {args.base_url} project {args.project}")
            conn = bench.endpoint.connect()
            try:
                bench.post_fact(conn, 0)  # a fact for GET resource to read
            finally:
                conn.close()
        except (HttpFailure, OSError) as exc:
            print(f"bench_latency: {exc}", file=sys.stderr)
            return 1
        return run_client(bench, args, fact_content)
    if args.mcp:
        return _mcp(bench, args)
    try:
        identity = bench.setup()
        note(f"bench_latency: {args.base_url} project {args.project} as {identity['actor_id']}")
        samples: dict[str, dict[str, list[int]]] = {}
        samples["health"] = measure(bench.endpoint, bench.health, args.requests, args.cold)
        calls = {
            "post_facts": bench.post_fact,
            "get_resource": bench.get_resource,
            "get_search": bench.get_search,
            "get_changes": bench.get_changes,
        }
        for name in OPERATIONS:
            note(f"  {name}: {args.cold} cold + {args.requests} warm")
            samples[name] = measure(bench.endpoint, calls[name], args.requests, args.cold)
        artifacts = ArtifactOps(bench.endpoint, bench.writer, bench.base, bench.tag)
        try:
            for name, call in (("artifact_put", artifacts.put), ("artifact_get", artifacts.get)):
                if args.no_artifacts:
                    break
                note(f"  {name}: {args.cold} cold + {args.requests} warm")
                samples[name] = measure(bench.endpoint, call, args.requests, args.cold)
        finally:
            artifacts.close()
        handoff: dict[str, list[int]] = {}
        if bench.receiver is not None:
            note(f"  handoff: {args.cycles} cycles")
            handoff = bench.handoff_cycles(args.cycles)
    except (HttpFailure, OSError) as exc:
        print(f"bench_latency: {exc}", file=sys.stderr)
        return 1

    figures: dict[str, Any] = {
        "base_url": args.base_url,
        "project": args.project,
        "requests": args.requests,
        "cold_requests": args.cold,
    }
    for name in OPERATIONS:
        figures.update(summarize(name, samples[name]))
    measured = [name for name in ARTIFACT_OPERATIONS if name in samples]
    for name in measured:
        figures.update(summarize(name, samples[name]))
    if measured:
        figures["artifact_mode"] = artifacts.mode
        figures["artifact_body_bytes"] = len(artifacts.body)
    if handoff:
        figures["handoff_cycles"] = args.cycles
        for step, values in handoff.items():
            figures.update(latency_summary(values, f"handoff_{step}"))
    baseline = summarize("health", samples["health"])
    base_p50 = baseline["health_warm_p50_ms"]
    figures["ratios_to_health_warm_p50"] = {
        name: round(figures[f"{name}_warm_p50_ms"] / base_p50, 2) if base_p50 else None
        for name in (*OPERATIONS, *measured)
    }
    figures["client_peak_rss_mib"] = peak_rss_mib()
    if args.plot:
        plot(
            args.plot, {**samples, **({"handoff": {"cycle": handoff["cycle"]}} if handoff else {})}
        )
    emit("bench_latency", figures, baseline, {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
