"""`/health` under hostile search load (SRCH-7): a soak behind the `slow` marker.

`aidememo serve` on SQLite holds 10,500 facts that each hold the words z0..z399; eight
clients send 400-term queries (each capped at 32 distinct terms and the postings budget, and
answered off the event loop) while `/health` is sampled. The figures go to stdout as one JSON
line; the assertion is the issue's bound, p99 within 50 ms, on a machine that may be shared.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.origin.test_serve_process import ServeProcess

FACTS = 10_500
WORDS = " ".join(f"z{n}" for n in range(400))
CLIENTS = 8
LOAD_S = 15.0


def _seed(url: str, auth: dict[str, str]) -> None:
    with httpx.Client(base_url=url, headers=auth, timeout=30) as client:
        body = {"command_id": "cmd_s", "payload": {"session_id": "s1", "topic": "soak"}}
        client.post("/v1/projects/demo/sessions", json=body).raise_for_status()
        for n in range(FACTS):
            payload = {"fact_id": f"f{n}", "session_id": "s1", "content": WORDS}
            fact = {"command_id": f"cmd_f{n}", "payload": payload}
            client.post("/v1/projects/demo/facts", json=fact).raise_for_status()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_srch7_health_p99_stays_within_50_ms_under_hostile_searches(
    tmp_path: Path, home: Path, token: str
) -> None:
    server = ServeProcess(home, tmp_path / "serve.log")
    auth = {"authorization": f"Bearer {token}"}
    try:
        _seed(server.url, auth)
        stop = threading.Event()
        searches: list[float] = []
        answers: list[dict[str, object]] = []

        def hostile() -> None:
            with httpx.Client(base_url=server.url, headers=auth, timeout=60) as client:
                while not stop.is_set():
                    t0 = time.perf_counter()
                    reply = client.get("/v1/projects/demo/search", params={"q": WORDS})
                    searches.append(time.perf_counter() - t0)
                    answers.append(reply.json())

        workers = [threading.Thread(target=hostile) for _ in range(CLIENTS)]
        for w in workers:
            w.start()
        time.sleep(1.0)  # the load is running
        health: list[float] = []
        with httpx.Client(base_url=server.url, timeout=30) as probe:
            end = time.monotonic() + LOAD_S
            while time.monotonic() < end:
                t0 = time.perf_counter()
                assert probe.get("/health").status_code == 200
                health.append((time.perf_counter() - t0) * 1000.0)
                time.sleep(0.02)
        stop.set()
        for w in workers:
            w.join()
        health.sort()
        p99 = health[int(len(health) * 0.99) - 1]
        figures = {
            "facts": FACTS,
            "clients": CLIENTS,
            "health_samples": len(health),
            "health_p50_ms": round(statistics.median(health), 2),
            "health_p99_ms": round(p99, 2),
            "health_max_ms": round(health[-1], 2),
            "searches": len(searches),
            "search_p50_ms": round(statistics.median(searches) * 1000.0, 1),
            "terms_dropped": answers[0].get("terms_dropped"),
            "exhaustive": answers[0].get("exhaustive"),
        }
        print(json.dumps(figures))
        assert answers[0]["terms_dropped"] == 400 - 32
        assert p99 <= 50.0, figures
    finally:
        server.kill()
