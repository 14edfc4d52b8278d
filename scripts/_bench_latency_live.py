"""The live-feed round of `scripts/bench_latency.py --live`.

`LiveRound` subscribes `n` WebSocket clients (the `websockets` package, all on one asyncio
loop) at the head of `/v1/projects/{p}/changes/live`, waits for every catch-up page, then has a
writer thread post the round's facts over one warm connection and times each commit from just
before its POST to its delivery to each subscriber; `figures` counts what was lost, duplicated
or out of order. `run_live` runs one round per `--live-subscribers` entry and prints the
`bench_latency_live` JSON line. With `--live-writer-url` the writer posts to another origin
process on the same PostgreSQL database than the one the subscribers listen on, so every
delivery crosses processes (through `LISTEN/NOTIFY`, SPEC.md LIVE-9). Kept apart from the
request benchmark, which never opens a WebSocket; the module docstring of `bench_latency.py`
describes what is measured.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from _bench_common import emit, latency_summary, note, peak_rss_mib, target
from _bench_latency_client import TIMEOUT_S, Endpoint, HttpFailure, plot, read_token

if TYPE_CHECKING:
    from bench_latency import Bench

SEQ_FIELD = re.compile(r'"change":\{[^{}]*?"seq":(\d+)')


class LiveRound:
    """One round: `n` subscribers at the head, `commits` facts, every delivery timed."""

    def __init__(
        self,
        bench: Bench,
        token: str,
        n: int,
        commits: int,
        interval_s: float,
        writer: Endpoint | None = None,
    ) -> None:
        self.bench = bench
        self.writer_endpoint = writer if writer is not None else bench.endpoint
        self.token = token
        self.n = n
        self.commits = commits
        self.interval_s = interval_s
        self.sent_at: dict[int, int] = {}  # seq -> perf_counter_ns just before its POST
        self.acks: list[int] = []
        self.received: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # (seq, ns)
        self.last_seq = 0

    def head(self) -> int:
        conn = self.bench.endpoint.connect()
        try:
            query = urlencode({"q": "head", "limit": 1})
            found = self.bench.writer.request(conn, "GET", f"{self.bench.base}/search?{query}")
        finally:
            conn.close()
        return int(found["index_seq"])

    def ws_url(self, after_seq: int) -> str:
        endpoint = self.bench.endpoint
        scheme = "wss" if endpoint.scheme == "https" else "ws"
        port = f":{endpoint.port}" if endpoint.port else ""
        query = urlencode({"project_epoch": self.bench.epoch, "after_seq": after_seq})
        path = f"{endpoint.prefix}{self.bench.base}/changes/live?{query}"
        return f"{scheme}://{endpoint.host}{port}{path}"

    def write(self) -> None:
        """The writer thread: one fact at a time on a warm connection."""
        bench = self.bench
        clock = time.perf_counter_ns
        conn = self.writer_endpoint.connect()
        try:
            bench.writer.request(conn, "GET", "/health")
            for i in range(self.commits):
                t0 = clock()
                receipt = bench.post_fact_at(conn, f"live{self.n}-{i}", t0, self.sent_at)
                self.acks.append(clock() - t0)
                self.last_seq = int(receipt["project_seq"])
                if self.interval_s:
                    time.sleep(self.interval_s)
        finally:
            conn.close()

    async def run(self) -> None:
        import asyncio

        import websockets

        start = self.head()
        url = self.ws_url(start)
        headers = {"Authorization": f"Bearer {self.token}"}
        clock = time.perf_counter_ns
        ready = asyncio.Event()
        connected = [0]

        async def follow(k: int) -> None:
            got = self.received[k]
            async with websockets.connect(
                url,
                additional_headers=headers,
                max_size=None,
                open_timeout=TIMEOUT_S,
                compression=None,
                ping_interval=None,
            ) as ws:
                first = True
                async for raw in ws:
                    now = clock()
                    text = raw if isinstance(raw, str) else raw.decode()
                    if text.startswith('{"error"'):
                        raise HttpFailure(f"live feed closed: {text}")
                    if first:  # the catch-up page at the head
                        first = False
                        connected[0] += 1
                        if connected[0] == self.n:
                            ready.set()
                        continue
                    # The change's "seq" of each entry (a fact's content cannot produce this
                    # unescaped); cheaper than decoding every message in this one process.
                    got.extend((int(m), now) for m in SEQ_FIELD.findall(text))

        tasks = [asyncio.create_task(follow(k)) for k in range(self.n)]
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({waiter, *tasks}, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        await asyncio.get_running_loop().run_in_executor(None, self.write)
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and any(
            not got or got[-1][0] < self.last_seq for got in self.received
        ):
            await asyncio.sleep(0.01)  # what never arrives is counted as lost
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception) and not isinstance(result, asyncio.CancelledError):
                raise result

    def figures(self) -> tuple[dict[str, Any], list[int], dict[str, int]]:
        expected = sorted(self.sent_at)
        samples: list[int] = []
        lost = duplicated = out_of_order = 0
        for got in self.received:
            seqs = [seq for seq, _ in got]
            duplicated += len(seqs) - len(set(seqs))
            out_of_order += sum(1 for a, b in itertools.pairwise(seqs) if b <= a)
            lost += len(set(expected) - set(seqs))
            for seq, at in got:
                if seq in self.sent_at:
                    samples.append(at - self.sent_at[seq])
        counts = {
            "expected": len(expected) * self.n,
            "received": sum(len(got) for got in self.received),
            "lost": lost,
            "duplicated": duplicated,
            "out_of_order": out_of_order,
        }
        return latency_summary(samples, f"live_{self.n}"), samples, counts


def writer_endpoint(args: argparse.Namespace) -> Endpoint | None:
    """Where the writer posts: `--live-writer-url` (another origin process on the same
    database, with the same path prefix), else None (the subscribers' origin)."""
    url = getattr(args, "live_writer_url", None)
    return Endpoint(url) if url else None


def add_live_writer_argument(parser: argparse.ArgumentParser) -> None:
    """`--live-writer-url`: the writer on another origin process than the subscribers."""
    parser.add_argument(
        "--live-writer-url",
        default=None,
        help="with --live: post the commits to this origin (another process on the same "
        "PostgreSQL database) while the subscribers listen on --base-url",
    )


def run_live(bench: Bench, args: argparse.Namespace) -> int:
    import asyncio

    try:
        import websockets  # noqa: F401
    except ImportError:
        print("--live needs the websockets package: pip install websockets", file=sys.stderr)
        return 2
    token = read_token(args.token_file)
    writer = writer_endpoint(args)
    figures: dict[str, Any] = {
        "base_url": args.base_url,
        "writer_url": getattr(args, "live_writer_url", None) or args.base_url,
        "project": args.project,
        "commits_per_round": args.live_commits,
        "interval_ms": args.live_interval_ms,
    }
    acks: list[int] = []
    targets: dict[str, Any] = {}
    total_bad = 0
    plots: dict[str, dict[str, list[int]]] = {}
    for n in args.live_subscribers:
        note(f"  live: {n} subscriber(s), {args.live_commits} commits")
        rnd = LiveRound(bench, token, n, args.live_commits, args.live_interval_ms / 1000, writer)
        try:
            asyncio.run(rnd.run())
        except (HttpFailure, OSError, TimeoutError) as exc:
            print(f"bench_latency --live: {exc!r}", file=sys.stderr)
            return 1
        summary, samples, counts = rnd.figures()
        figures.update(summary)
        figures[f"live_{n}_samples"] = len(samples)
        for key, value in counts.items():
            figures[f"live_{n}_{key}"] = value
        total_bad += counts["lost"] + counts["duplicated"] + counts["out_of_order"]
        acks += rnd.acks
        plots[f"live_{n}"] = {"delivery": samples}
    figures["client_peak_rss_mib"] = peak_rss_mib()
    baseline = latency_summary(acks, "post_ack")
    baseline["post_ack_n"] = len(acks)
    if 100 in args.live_subscribers:
        targets["live_100_p95_ms"] = target(figures["live_100_p95_ms"], "<= 50")
    targets["lost_or_duplicated"] = target(float(total_bad), "<= 0")
    if args.plot:
        plot(args.plot, plots)
    emit("bench_latency_live", figures, baseline, targets)
    return 0
