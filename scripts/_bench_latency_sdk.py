"""`scripts/bench_latency.py --client`: the same operations through `aidememo.client`.

Each operation of the request mode (`POST facts`, `GET resource`, `GET search`, `GET changes`)
runs `--requests` times through a `Client` (its standard-library transport, one keep-alive
connection, the answers parsed into the client's typed records) and as many times as raw HTTP
(the request mode's `http.client` calls on one warm connection), interleaved one by one and
alternating which goes first, so both see the same machine. Both warm their connection with one
request that is not counted. With `--receiver-token-file`, `--cycles` handoff cycles (send,
accept, result fact, return) run through two clients and as raw HTTP, alternating. `--cold` and
`--plot` do not apply; `figures` also carries the machine's 1-minute load average, since a
loaded machine stretches every figure.

The last stdout line is `{"name": "bench_latency_client", ...}`: `figures` the client's
`{op}_warm_{p50,p95,p99,max,mean}_ms` (and `handoff_{step}_*` with a receiver), `baseline`
the raw-HTTP figures of the same run under the same names (both with `{op}_client_cpu_us`,
the CPU time this process spent per call: the client's own cost, which a loaded machine
distorts less than wall times), and `targets` per operation
`{op}_p50_overhead_ms`, the client's p50 minus raw HTTP's, goal `<= 0.3` (ms, on loopback).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from _bench_common import emit, latency_summary, note, peak_rss_mib, target
from _bench_latency_client import TIMEOUT_S, read_token

OPERATIONS = ("post_facts", "get_resource", "get_search", "get_changes")
STEPS = ("send", "accept", "fact", "return", "cycle")
OVERHEAD_GOAL = "<= 0.3"


class Side:
    """One side of the comparison: its wall times and the CPU time this process spent."""

    def __init__(self, call: Callable[[int], Any]) -> None:
        self.call = call
        self.wall_ns: list[int] = []
        self.cpu_ns = 0

    def run(self, i: int) -> None:
        cpu, t0 = time.process_time_ns(), time.perf_counter_ns()
        self.call(i)
        self.wall_ns.append(time.perf_counter_ns() - t0)
        self.cpu_ns += time.process_time_ns() - cpu

    def figures(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = latency_summary(self.wall_ns, f"{name}_warm")
        out[f"{name}_warm_n"] = len(self.wall_ns)
        out[f"{name}_client_cpu_us"] = round(self.cpu_ns / len(self.wall_ns) / 1e3, 1)
        return out


def _interleaved(raw: Callable[[int], Any], sdk: Callable[[int], Any], n: int) -> tuple[Side, Side]:
    """`n` timed calls of each, one after the other, alternating which goes first."""
    raw(-1)  # warm both connections; not counted
    sdk(-1)
    a, b = Side(raw), Side(sdk)
    for i in range(n):
        for side in (a, b) if i % 2 == 0 else (b, a):
            side.run(i)
    return a, b


def run_client(
    bench: Any, args: argparse.Namespace, fact_content: Callable[[int, str], str]
) -> int:
    """The `--client` run on `bench` (a set-up `bench_latency.Bench`); `fact_content` is the
    request mode's fact text, so both write the same bytes."""
    try:
        from aidememo.client import AidememoClientError, Client
    except ImportError as exc:
        note(f"--client needs aidememo.client (pip install -e '.[client]'): {exc}")
        return 2
    writer = Client(args.base_url, read_token(args.token_file), args.project, timeout=TIMEOUT_S)
    receiver = (
        Client(args.base_url, read_token(args.receiver_token_file), args.project, timeout=TIMEOUT_S)
        if args.receiver_token_file
        else None
    )
    tag, session = bench.tag, bench.session
    conn = bench.endpoint.connect()
    sdk_facts: list[str] = []

    def sdk_fact(i: int) -> Any:
        written = writer.create_fact(
            session, fact_content(i + 2, tag), fact_id=f"bench-sdk-{tag}-{i + 2}"
        )
        sdk_facts.append(written.id)
        return written

    # Call i of an operation is number i + 2 in both (the warm-up is -1, the set-up fact 0).
    raw_calls: dict[str, Callable[[int], Any]] = {
        "post_facts": lambda i: bench.post_fact(conn, i + 2),
        "get_resource": lambda i: bench.get_resource(conn, i + 2),
        "get_search": lambda i: bench.get_search(conn, i + 2),
        "get_changes": lambda i: bench.get_changes(conn, i + 2),
    }
    epoch = bench.epoch
    sdk_calls: dict[str, Callable[[int], Any]] = {
        "post_facts": sdk_fact,
        "get_resource": lambda i: writer.get_resource(
            "fact", bench.facts[(i + 2) % len(bench.facts)]
        ),
        "get_search": lambda i: writer.search(
            f"rare{tag}{(i + 2) % 7} probe{tag}{(i + 2) % 11}", limit=20
        ),
        "get_changes": lambda i: writer.changes(0, limit=100, project_epoch=epoch),
    }
    figures: dict[str, Any] = {"base_url": args.base_url, "project": args.project}
    baseline: dict[str, Any] = {}
    targets: dict[str, Any] = {}
    try:
        for name in OPERATIONS:
            note(f"  {name}: {args.requests} raw + {args.requests} client, interleaved")
            raw, sdk = _interleaved(raw_calls[name], sdk_calls[name], args.requests)
            figures.update(sdk.figures(name))
            baseline.update(raw.figures(name))
            overhead = figures[f"{name}_warm_p50_ms"] - baseline[f"{name}_warm_p50_ms"]
            targets[f"{name}_p50_overhead_ms"] = target(overhead, OVERHEAD_GOAL)
        if receiver is not None:
            note(f"  handoff: {args.cycles} client + {args.cycles} raw cycles, interleaved")
            sdk_cycles: dict[str, list[int]] = {step: [] for step in STEPS}
            raw_cycles: dict[str, list[int]] = {step: [] for step in STEPS}
            receiver_id = receiver.identity().actor_id
            for i in range(args.cycles):
                for side in ("sdk", "raw") if i % 2 == 0 else ("raw", "sdk"):
                    if side == "sdk":
                        one = _sdk_cycle(writer, receiver, receiver_id, session, f"{tag}-{i}")
                    else:
                        one = bench.handoff_cycles(1, first=i)
                    out = sdk_cycles if side == "sdk" else raw_cycles
                    for step in STEPS:
                        out[step].extend(one[step])
            figures["handoff_cycles"] = args.cycles
            for step in STEPS:
                figures.update(latency_summary(sdk_cycles[step], f"handoff_{step}"))
                baseline.update(latency_summary(raw_cycles[step], f"handoff_{step}"))
    except AidememoClientError as exc:
        note(f"bench_latency --client: {exc}")
        return 1
    finally:
        conn.close()
        writer.close()
        if receiver is not None:
            receiver.close()
    figures["client_peak_rss_mib"] = peak_rss_mib()
    figures["load_average_1m"] = round(os.getloadavg()[0], 2)
    emit("bench_latency_client", figures, baseline, targets)
    return 0


def _sdk_cycle(
    writer: Any, receiver: Any, receiver_id: str, session: str, key: str
) -> dict[str, list[int]]:
    """One cycle through the clients: send (writer), accept, result fact and return
    (receiver); accept and return pass the claim and revision, as the raw cycle does."""
    clock = time.perf_counter_ns
    claim = f"bsc-{key}"
    t0 = clock()
    sent = writer.send_handoff(
        session, receiver_id, focus="latency benchmark handoff", handoff_id=f"bsh-{key}"
    )
    t1 = clock()
    accepted = receiver.accept_handoff(
        sent.id, claim_id=claim, expected_revision=sent.receipt.revision
    )
    t2 = clock()
    fact = receiver.create_fact(session, f"result of benchmark handoff {key}")
    t3 = clock()
    receiver.return_handoff(
        sent.id, fact.id, claim_id=claim, expected_revision=accepted.receipt.revision
    )
    t4 = clock()
    took = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)
    return {step: [value] for step, value in zip(STEPS, took, strict=True)}
