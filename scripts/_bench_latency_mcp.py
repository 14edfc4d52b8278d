"""`scripts/bench_latency.py --mcp`: each request operation as an MCP tool call beside its REST
route.

Each operation of the request mode (`POST facts`, `GET resource`, `GET search`, `GET
changes`) runs `--requests` times as its REST route and as many times as the MCP tool that
wraps it (`fact_create`, `resource_get`, `search`, `changes`) on `POST .../mcp`, as a
protocol 2026-07-28 client sends it (the `_meta` version and the `MCP-Protocol-Version`,
`Mcp-Method`, `Mcp-Name` headers, SPEC.md MCP-5), interleaved one by one and alternating which
goes first, each on its own warm keep-alive connection of the stdlib `http.client`.

The last stdout line is `{"name": "bench_latency_mcp", ...}`: `figures` the tool calls'
`{op}_warm_{p50,p95,p99,max,mean}_ms`, `baseline` the REST route's under the same names, and
`targets` per operation `{op}_p50_overhead_ms`, the tool call's p50 minus the route's, goal
`<= 0.5` (ms, on the origin).
"""

from __future__ import annotations

import argparse
import http.client
import json
import time
from collections.abc import Callable
from typing import Any

from _bench_common import emit, latency_summary, note, target
from _bench_latency_client import HttpFailure

OPERATIONS = {
    "post_facts": "fact_create",
    "get_resource": "resource_get",
    "get_search": "search",
    "get_changes": "changes",
}
OVERHEAD_GOAL = "<= 0.5"
VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _tool_call(
    bench: Any, conn: http.client.HTTPConnection, name: str, arguments: dict[str, Any]
) -> Any:
    """One `tools/call` on the MCP endpoint; its `structuredContent` (fails on isError)."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": META},
    }
    headers = {
        **bench.writer.headers,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    path = bench.endpoint.prefix + f"{bench.base}/mcp"
    conn.request("POST", path, json.dumps(message).encode(), headers)
    response = conn.getresponse()
    raw = response.read()
    if response.status != 200:
        raise HttpFailure(f"POST {path}: {response.status} {raw[:300]!r}")
    result = json.loads(raw).get("result") or {}
    if result.get("isError") is not False:
        raise HttpFailure(f"{name}: {raw[:300]!r}")
    return result["structuredContent"]


def run_mcp(bench: Any, args: argparse.Namespace, fact_content: Callable[[int, str], str]) -> int:
    """The `--mcp` run on `bench` (a set-up `bench_latency.Bench` with one fact written)."""
    tag, session = bench.tag, bench.session
    rest_conn, mcp_conn = bench.endpoint.connect(), bench.endpoint.connect()

    def mcp_fact(i: int) -> Any:
        fact_id = f"bench-mcp-{tag}-{i}"
        arguments = {"fact_id": fact_id, "session_id": session, "content": fact_content(i, tag)}
        answer = _tool_call(bench, mcp_conn, "fact_create", arguments)
        bench.facts.append(fact_id)
        return answer

    # Call i of an operation is number i + 2 on both sides (the warm-up is -1).
    rest: dict[str, Callable[[int], Any]] = {
        "post_facts": lambda i: bench.post_fact(rest_conn, i + 2),
        "get_resource": lambda i: bench.get_resource(rest_conn, i + 2),
        "get_search": lambda i: bench.get_search(rest_conn, i + 2),
        "get_changes": lambda i: bench.get_changes(rest_conn, i + 2),
    }
    tools: dict[str, Callable[[int], Any]] = {
        "post_facts": lambda i: mcp_fact(i + 2),
        "get_resource": lambda i: _tool_call(
            bench,
            mcp_conn,
            "resource_get",
            {"kind": "fact", "id": bench.facts[(i + 2) % len(bench.facts)]},
        ),
        "get_search": lambda i: _tool_call(
            bench,
            mcp_conn,
            "search",
            {"q": f"rare{tag}{(i + 2) % 7} probe{tag}{(i + 2) % 11}", "limit": 20},
        ),
        "get_changes": lambda i: _tool_call(
            bench,
            mcp_conn,
            "changes",
            {"project_epoch": bench.epoch, "after_seq": 0, "limit": 100},
        ),
    }
    figures: dict[str, Any] = {"base_url": args.base_url, "project": args.project}
    baseline: dict[str, Any] = {}
    targets: dict[str, Any] = {}
    try:
        for op, tool in OPERATIONS.items():
            note(f"  {op} / {tool}: {args.requests} REST + {args.requests} MCP, interleaved")
            route_ns, tool_ns = _interleaved(rest[op], tools[op], args.requests)
            figures.update(latency_summary(tool_ns, f"{op}_warm"))
            baseline.update(latency_summary(route_ns, f"{op}_warm"))
            figures[f"{op}_tool"] = tool
            overhead = figures[f"{op}_warm_p50_ms"] - baseline[f"{op}_warm_p50_ms"]
            targets[f"{op}_p50_overhead_ms"] = target(overhead, OVERHEAD_GOAL)
    except (HttpFailure, OSError) as exc:
        note(f"bench_latency --mcp: {exc}")
        return 1
    finally:
        rest_conn.close()
        mcp_conn.close()
    emit("bench_latency_mcp", figures, baseline, targets)
    return 0


def _interleaved(
    rest: Callable[[int], Any], tool: Callable[[int], Any], n: int
) -> tuple[list[int], list[int]]:
    """`n` timed calls of each, one after the other, alternating which goes first."""
    rest(-3)  # warm both connections; not counted
    tool(-3)
    times: tuple[list[int], list[int]] = ([], [])
    for i in range(n):
        order = ((0, rest), (1, tool)) if i % 2 == 0 else ((1, tool), (0, rest))
        for side, call in order:
            t0 = time.perf_counter_ns()
            call(i)
            times[side].append(time.perf_counter_ns() - t0)
    return times
