#!/usr/bin/env python3
"""Benchmark of the browser console (SPEC.md CONSOLE-1) in headless Chromium against a real
`aidememo serve` on SQLite, all on loopback.

Measured:
- `board_paint_ms`: from navigation start to the frame in which the handoff board accounts for
  all of the project's `--handoffs` handoffs (default 1,000: its column counts include every
  one, and each column shows its newest 100), i.e. the live feed's catch-up received, applied
  and rendered (a `MutationObserver` installed before the page's scripts notes the time of
  that DOM change, made in the frame's animation callback just before its paint). Median and
  worst of `--loads` fresh loads.
- `commit_to_screen_ms`: for `--commits` handoffs sent one by one over HTTP (about 10 a
  second), the time from the acknowledgement's arrival in this process to the card's
  insertion in the open console (same machine clock, ms resolution); p50/p95/max.
- long tasks while `--rate` commits a second (default 100; a mix of handoffs and facts) arrive
  for `--seconds` (default 10): the longest main-thread task the browser reports
  (`longtask` entries, which exist only above 50 ms; 0 when there is none) and their count.
  Beside it, the main thread's busy time over the phase (DevTools `Performance.getMetrics`:
  tasks, script, layout, style; `ThreadTime` is its CPU time) and the machine's load average,
  since a long task is wall time and a starved renderer makes one of a short task.
- the console's files: their bytes, and what they add to a wheel (deflated in a zip).

Baseline, same run: a Python WebSocket subscriber to the same live feed (what `aidememo watch`
does): its catch-up time for the same project, and the ack-to-push latency of the same
commits; so the console's own cost is the difference.

The machine is shared: figures are noisy. The last line of output is the JSON result object
(`_bench_common.emit`); progress goes to stderr. Run from the repository root:
`.venv/bin/python scripts/bench_console.py [--handoffs 1000] [--rate 100]`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from _bench_common import emit, free_port, latency_summary, note, target  # noqa: E402

from aidememo.console import STATIC  # noqa: E402
from tests.console.support import CHROMIUM, CHROMIUM_FLAGS  # noqa: E402

TENANT, PROJECT = "t-bench", "p-bench"
# Installed before the page's own scripts (through DevTools, so the page's CSP does not apply):
# notes when the board first holds `want` cards, every card's insertion time by handoff id,
# and the long tasks.
INIT_SCRIPT = """
window.__bench = {want: WANT, full: null, seen: {}, long: []};
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__bench.long.push(e.duration);
}).observe({type: "longtask", buffered: true});
new MutationObserver((records) => {
  const now = performance.timeOrigin + performance.now();
  for (const r of records) for (const n of r.addedNodes) {
    const id = n.nodeType === 1 && n.dataset ? n.dataset.handoff : undefined;
    if (id && !(id in window.__bench.seen)) window.__bench.seen[id] = now;
  }
  if (window.__bench.full === null) {
    const board = document.querySelector("[data-board-total]");
    if (board && Number(board.dataset.boardTotal) >= window.__bench.want) {
      window.__bench.full = performance.now();
    }
  }
}).observe(document, {childList: true, subtree: true});
"""


class Origin:
    """`aidememo serve` on a temporary SQLite database with two writers."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        admin = "bench-admin-" + os.urandom(8).hex()
        admin_file = folder / "admin.token"
        admin_file.write_text(admin)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
        env["AIDEMEMO_HOME"] = str(folder / "home")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aidememo", "serve", "--port", str(self.port),
             "--database", str(folder / "bench.sqlite"), "--admin-token-file", str(admin_file)],
            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(folder / "serve.log", "ab"),
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        self.tokens = {actor: self._member(admin, actor) for actor in ("alice", "bob")}
        self.client = httpx.Client(base_url=self.url, timeout=30)
        self.session = self.command("alice", "sessions", {"session_id": _id(), "topic": "bench"})

    def _member(self, admin: str, actor: str) -> str:
        token = os.urandom(24).hex()
        answer = httpx.post(
            f"{self.url}/v1/admin/bootstrap",
            headers={"authorization": f"Bearer {admin}"},
            json={"tenant_id": TENANT, "project_id": PROJECT, "actor_id": actor,
                  "role": "writer", "token_sha256": hashlib.sha256(token.encode()).hexdigest()},
            timeout=30,
        )  # fmt: skip
        answer.raise_for_status()
        return token

    def command(self, actor: str, route: str, payload: dict[str, Any]) -> str:
        answer = self.client.post(
            f"/v1/projects/{PROJECT}/{route}",
            headers={"authorization": f"Bearer {self.tokens[actor]}"},
            json={"command_id": _id(), "payload": payload},
        )
        answer.raise_for_status()
        return str(answer.json()["resource"]["id"])

    def handoff(self, focus: str) -> str:
        return self.command(
            "alice",
            "handoffs",
            {"handoff_id": _id(), "session_id": self.session, "to_actor": "bob", "focus": focus},
        )

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=15)


def _id() -> str:
    return uuid.uuid4().hex


def _files() -> dict[str, Any]:
    files = sorted(p for p in STATIC.iterdir() if p.is_file())
    raw = sum(p.stat().st_size for p in files)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        for p in [*files, STATIC.parent / "__init__.py"]:
            wheel.write(p, f"aidememo/console/{p.relative_to(STATIC.parent)}")
    return {
        "console_files": len(files),
        "console_bytes": raw,
        "wheel_bytes": len(buffer.getvalue()),
    }


async def _python_feed(origin: Origin, epoch: str, after: int, want: int | None) -> float:
    """Seconds a Python subscriber takes to receive the catch-up to `want` (baseline)."""
    import websockets

    url = origin.url.replace("http", "ws") + (
        f"/v1/projects/{PROJECT}/changes/live?project_epoch={epoch}&after_seq={after}&limit=10000"
    )
    started = time.perf_counter()
    headers = {"authorization": f"Bearer {origin.tokens['alice']}"}
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        while True:
            batch = json.loads(await ws.recv())
            if want is None or batch["next_cursor"]["after_seq"] >= want:
                return time.perf_counter() - started


def _python_push_latency(origin: Origin, epoch: str, head: int, count: int) -> list[int]:
    """Ack-to-push latencies (ns) of `count` commits seen by a Python subscriber (baseline)."""
    import websockets

    url = origin.url.replace("http", "ws") + (
        f"/v1/projects/{PROJECT}/changes/live?project_epoch={epoch}&after_seq={head}"
    )
    pushed: dict[str, int] = {}
    ready = threading.Event()

    async def listen() -> None:
        headers = {"authorization": f"Bearer {origin.tokens['alice']}"}
        async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
            ready.set()
            while len(pushed) < count:
                batch = json.loads(await ws.recv())
                for entry in batch.get("entries", []):
                    pushed.setdefault(entry["change"]["resource"]["id"], time.time_ns())

    thread = threading.Thread(target=lambda: asyncio.run(listen()), daemon=True)
    thread.start()
    ready.wait(10)
    acked: dict[str, int] = {}
    for n in range(count):
        hid = origin.handoff(f"baseline {n}")
        acked[hid] = time.time_ns()
        time.sleep(0.02)
    thread.join(30)
    return [pushed[h] - acked[h] for h in acked if h in pushed]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handoffs", type=int, default=1000)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--load-page", default="handoffs", help="the console page open while commits arrive"
    )
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    figures: dict[str, Any] = _files()
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        folder = Path(tmp)
        origin = Origin(folder)
        try:
            note(f"sending {args.handoffs} handoffs")
            for n in range(args.handoffs):
                origin.handoff(f"handoff {n}: review part {n % 17}")
            identity = origin.client.get(
                f"/v1/projects/{PROJECT}/identity",
                headers={"authorization": f"Bearer {origin.tokens['alice']}"},
            ).json()
            epoch, head = identity["project_epoch"], args.handoffs + 1
            baseline: dict[str, Any] = {
                "python_feed_catch_up_ms": round(
                    1000 * asyncio.run(_python_feed(origin, epoch, 0, head)), 1
                )
            }
            with sync_playwright() as pw:
                context = pw.chromium.launch_persistent_context(
                    str(folder / "profile"),
                    executable_path=CHROMIUM,
                    headless=True,
                    args=CHROMIUM_FLAGS,
                    viewport={"width": 1280, "height": 860},
                )
                context.add_init_script(INIT_SCRIPT.replace("WANT", str(args.handoffs)))
                page = context.pages[0] if context.pages else context.new_page()
                page.goto(f"{origin.url}/console")
                page.fill("#project", PROJECT)
                page.fill("#token", origin.tokens["alice"])
                page.click("#sign-in-form button[type=submit]")
                page.wait_for_selector("body[data-state='signed-in']")
                paints = []
                for _ in range(args.loads):
                    page.goto("about:blank")
                    page.goto(f"{origin.url}/console#/handoffs")
                    _wait(page, "window.__bench.full !== null", 60)
                    paints.append(float(page.evaluate("window.__bench.full")))
                figures["board_paint_ms_median"] = round(statistics.median(paints), 1)
                figures["board_paint_ms_max"] = round(max(paints), 1)
                note(f"board paint {paints}")

                latencies: list[int] = []
                for n in range(args.commits):
                    hid = origin.handoff(f"latency {n}")
                    acked_ms = time.time() * 1000
                    _wait(page, f"window.__bench.seen[{json.dumps(hid)}] !== undefined", 30)
                    seen = float(page.evaluate(f"window.__bench.seen[{json.dumps(hid)}]"))
                    latencies.append(int((seen - acked_ms) * 1e6))
                    time.sleep(0.1)
                figures.update(latency_summary(latencies, "commit_to_screen"))
                baseline.update(
                    latency_summary(
                        _python_push_latency(origin, epoch, head + args.commits, args.commits),
                        "python_push",
                    )
                )

                note(f"{args.rate} commits/s for {args.seconds} s")
                if args.load_page != "handoffs":
                    page.goto(f"{origin.url}/console#/{args.load_page}")
                    page.wait_for_timeout(500)
                page.evaluate("window.__bench.long = []")
                cdp = context.new_cdp_session(page)
                cdp.send("Performance.enable")
                before = _metrics(cdp)
                figures["load_average_1m"] = round(os.getloadavg()[0], 2)
                sent = _drive(origin, args.rate, args.seconds)
                page.wait_for_timeout(1000)
                after = _metrics(cdp)
                for name in ("TaskDuration", "ScriptDuration", "LayoutDuration",
                             "RecalcStyleDuration", "ThreadTime"):  # fmt: skip
                    if name in before and name in after:
                        key = f"main_thread_{name.lower()}_ms"
                        figures[key] = round(1000 * (after[name] - before[name]), 1)
                long_tasks = [float(x) for x in page.evaluate("window.__bench.long")]
                figures["driven_commits"] = sent
                figures["driven_rate_per_s"] = round(sent / args.seconds, 1)
                figures["long_tasks"] = len(long_tasks)
                figures["longest_task_ms"] = round(max(long_tasks, default=0.0), 1)
                context.close()
        finally:
            origin.stop()
    targets = {
        "board_paint_ms": target(figures["board_paint_ms_median"], "<= 1000"),
        "commit_to_screen_p95_ms": target(figures["commit_to_screen_p95_ms"], "<= 250"),
        "longest_task_ms": target(figures["longest_task_ms"], "<= 200"),
        "wheel_bytes": target(figures["wheel_bytes"], "<= 300000"),
    }
    emit("console", figures, baseline, targets)
    return 0


def _metrics(cdp: Any) -> dict[str, float]:
    """The renderer's cumulative main-thread durations (s) from DevTools' Performance domain."""
    answer = cdp.send("Performance.getMetrics")
    return {m["name"]: float(m["value"]) for m in answer["metrics"]}


def _wait(page: Any, expression: str, timeout_s: float) -> None:
    """Poll `expression` through DevTools until it is true (the page's CSP forbids the
    string evaluation Playwright's own polling would use)."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise TimeoutError(expression)
        time.sleep(0.005)


def _drive(origin: Origin, rate: int, seconds: float) -> int:
    """Commits at `rate` a second for `seconds` from 4 threads (handoffs and facts in turn);
    returns how many were acknowledged."""
    done = [0]
    lock = threading.Lock()
    interval = 4 / rate
    stop_at = time.monotonic() + seconds

    def run(worker: int) -> None:
        client = httpx.Client(base_url=origin.url, timeout=30)
        headers = {"authorization": f"Bearer {origin.tokens['alice']}"}
        next_at = time.monotonic() + worker * interval / 4
        n = 0
        while next_at < stop_at:
            time.sleep(max(0.0, next_at - time.monotonic()))
            if n % 2:
                route = "facts"
                payload = {"fact_id": _id(), "session_id": origin.session, "content": f"f {n}"}
            else:
                route = "handoffs"
                payload = {"handoff_id": _id(), "session_id": origin.session,
                           "to_actor": "bob", "focus": f"load {worker}.{n}"}  # fmt: skip
            client.post(
                f"/v1/projects/{PROJECT}/{route}",
                headers=headers,
                json={"command_id": _id(), "payload": payload},
            ).raise_for_status()
            with lock:
                done[0] += 1
            n += 1
            next_at += interval
        client.close()

    threads = [threading.Thread(target=run, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0]


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
