"""The origin's deployment features, as `aidememo serve` processes and as units: the per-token
rate limit (RATE-1..3), the Prometheus listener (METRICS-1..3), JSON log lines (DEPLOY-4) and
configuration from the environment alone (DEPLOY-7)."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aidememo import metrics
from aidememo.cli.errors import CliError
from aidememo.cli.main import main
from aidememo.stores.sqlite import SqliteStore
from origin.logjson import access_fields
from origin.metrics import NAMES, parse_bind
from origin.rate_limit import RateLimiter, RateSetting, parse_rate
from origin.serve_command import _rate_limiter
from tests.origin.test_serve_process import REPO, ServeProcess, free_port

TOKEN_PATH = "/v1/projects/demo/identity"


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- RATE ---------------------------------------------------------------------------------------


def test_rate1_a_token_past_its_limit_waits_for_its_window() -> None:
    clock = Clock(1000.0)  # windows of 60 s: [960, 1020)
    limiter = RateLimiter(RateSetting(3, 60), clock=clock)
    one, two = b"\x01" * 32, b"\x02" * 32
    assert [limiter.hit(one) for _ in range(3)] == [None, None, None]
    assert limiter.hit(one) == 20  # whole seconds left in the window
    assert limiter.hit(two) is None  # another token has its own count
    clock.now = 1019.2
    assert limiter.hit(one) == 1
    clock.now = 1020.0  # a new window
    assert limiter.hit(one) is None
    limiter.close()


def test_rate1_many_tokens_fill_the_table_and_an_idle_one_is_never_refused() -> None:
    clock = Clock()
    limiter = RateLimiter(RateSetting(1, 60), slots=8, clock=clock)
    tokens = [bytes([n]) * 32 for n in range(40)]
    assert all(limiter.hit(t) is None for t in tokens)  # more tokens than slots: let through
    limiter.close()


def test_rate1_slots_of_past_windows_are_reused_for_new_tokens() -> None:
    """A full table of tokens from a past window: a new token takes a stale slot and is
    limited like any other (were stale slots never reused, it would never be)."""
    clock = Clock()
    limiter = RateLimiter(RateSetting(2, 60), slots=8, clock=clock)
    for n in range(8):  # every slot held in this window
        assert limiter.hit(bytes([n]) * 32) is None
    clock.now += 60  # the next window: all eight are stale now
    fresh = b"\xaa" * 32
    assert [limiter.hit(fresh) for _ in range(3)] == [None, None, 20]
    limiter.close()


def test_rate1_serve_answers_429_rate_limited_with_retry_after(
    tmp_path: Path, home: Path, token: str
) -> None:
    server = ServeProcess(home, tmp_path / "serve.log", "--rate-limit", "2/60")
    try:
        auth = {"authorization": f"Bearer {token}"}
        answers = [httpx.get(server.url + TOKEN_PATH, headers=auth) for _ in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 429]
        refused = answers[2]
        assert refused.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert httpx.get(server.url + "/health").status_code == 200  # public: not counted
    finally:
        server.kill()


def test_rate2_default_is_600_per_60_off_loopback_and_off_on_loopback() -> None:
    assert _rate_limiter(None, "127.0.0.1") is None
    assert _rate_limiter(None, "::1") is None
    limiter = _rate_limiter(None, "0.0.0.0")
    assert limiter is not None and limiter.setting == RateSetting(600, 60)
    limiter.close()
    assert _rate_limiter("off", "0.0.0.0") is None
    assert parse_rate("5/10") == RateSetting(5, 10)
    for bad in ("600", "0/60", "6/0", "a/b", "-1/60"):
        with pytest.raises(CliError):
            _rate_limiter(bad, "0.0.0.0")


def _hits(limiter: RateLimiter, count: int, answers: multiprocessing.Queue[int]) -> None:
    answers.put(sum(limiter.hit(b"\x07" * 32) is None for _ in range(count)))


def test_rate3_forked_workers_count_against_one_window() -> None:
    limiter = RateLimiter(RateSetting(10, 60))
    context = multiprocessing.get_context("fork")
    answers: multiprocessing.Queue[int] = context.Queue()
    children = [context.Process(target=_hits, args=(limiter, 6, answers)) for _ in range(2)]
    for child in children:
        child.start()
    allowed = [answers.get(timeout=30) for _ in children]
    for child in children:
        child.join(30)
    assert sum(allowed) == 10  # 12 requests from two processes, 10 allowed in all
    limiter.close()


# -- METRICS ------------------------------------------------------------------------------------


def _scrape(port: int) -> str:
    return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text


def _value(text: str, pattern: str) -> float:
    total = 0.0
    for match in re.finditer(rf"^{pattern} ([0-9.e+]+)$", text, re.M):
        total += float(match.group(1))
    return total


def test_metrics1_metrics2_serve_exposes_the_metrics_on_a_listener_of_its_own(
    tmp_path: Path, home: Path, token: str
) -> None:
    port = free_port()
    server = ServeProcess(home, tmp_path / "serve.log", "--metrics-bind", f"127.0.0.1:{port}")
    try:
        auth = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        body = {"command_id": "c-s1", "payload": {"session_id": "s1", "topic": "metrics"}}
        reply = httpx.post(server.url + "/v1/projects/demo/sessions", json=body, headers=auth)
        assert reply.status_code == 200, reply.text
        assert httpx.get(server.url + "/nope").status_code == 404
        assert httpx.get(server.url + "/metrics").status_code == 404  # not on the API port
        text = _scrape(port)
        for name in NAMES:
            assert f"# TYPE {name} " in text, name
        line = r'aidememo_http_requests_total\{method="POST",route="create_session",status="200"\}'
        assert _value(text, line) == 1
        assert _value(text, r'aidememo_http_requests_total\{[^}]*route="unmatched"[^}]*\}') >= 1
        assert _value(text, "aidememo_commit_duration_seconds_count") >= 1
        assert _value(text, "aidememo_group_commit_batch_size_count") >= 1
    finally:
        server.kill()


def test_metrics1_a_bad_metrics_bind_is_a_usage_error(home: Path) -> None:
    assert main(["serve", "--metrics-bind", "nowhere"]) == 2
    for bad in ("9090", "host:", ":80", "h:70000"):
        with pytest.raises(ValueError):
            parse_bind(bad)
    assert parse_bind("[::1]:9090") == ("::1", 9090)


class Recorder:
    def __init__(self) -> None:
        self.commits: list[float] = []
        self.batches: list[int] = []

    def commit(self, seconds: float) -> None:
        self.commits.append(seconds)

    def group_commit(self, size: int) -> None:
        self.batches.append(size)

    def live_subscribers(self, delta: int) -> None:
        raise RuntimeError("a sink's failure never reaches the caller")

    def live_dropped(self) -> None:
        raise RuntimeError("a sink's failure never reaches the caller")

    def semantic_lag(self, sequences: int) -> None:
        pass

    def artifact_gc(self, pending: int | None, failed: int) -> None:
        raise RuntimeError("a sink's failure never reaches the caller")


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    sink = Recorder()
    previous = metrics.install(sink)
    yield sink
    metrics.install(previous)


def test_metrics2_the_core_hook_reports_sqlite_commits(tmp_path: Path, recorder: Recorder) -> None:
    store = SqliteStore.open_file(str(tmp_path / "m.sqlite"))
    try:
        store.transaction(lambda tx: None)
    finally:
        store.close()
    assert recorder.commits and recorder.batches[-1] == 1
    metrics.live_subscribers(1)  # the recorder raises; the hook swallows it
    metrics.live_dropped()


@pytest.mark.postgres
def test_metrics3_workers_sum_their_samples_in_multiprocess_mode(tmp_path: Path) -> None:
    from tests import pg

    with pg.fresh_database() as db:
        token_file = tmp_path / "t.token"
        assert main(["token", "new", "--out", str(token_file)]) == 0
        boot = ["bootstrap", "--database", db.url, "--tenant-id", "local", "--project-id"]
        boot += ["demo", "--actor-id", "demo-agent", "--token-file", str(token_file)]
        assert main(boot) == 0
        token = token_file.read_text().strip()
        port = free_port()
        server = ServeProcess(
            tmp_path / "home",
            tmp_path / "serve.log",
            *("--database", db.url, "--workers", "2", "--metrics-bind", f"127.0.0.1:{port}"),
        )
        try:
            auth = {"authorization": f"Bearer {token}"}
            for _ in range(20):  # new connections: the kernel spreads them over the workers
                with httpx.Client() as client:
                    assert client.get(server.url + TOKEN_PATH, headers=auth).status_code == 200
            text = _scrape(port)
            total = _value(text, r'aidememo_http_requests_total\{[^}]*route="identity"[^}]*\}')
            assert total == 20
        finally:
            server.kill()


# -- DEPLOY -------------------------------------------------------------------------------------


def test_deploy4_log_format_json_writes_one_object_per_line(
    tmp_path: Path, home: Path, token: str
) -> None:
    log = tmp_path / "serve.log"
    server = ServeProcess(home, log, "--log-format", "json")
    try:
        auth = {"authorization": f"Bearer {token}", "x-request-id": "rid_json_1"}
        status = httpx.get(server.url + TOKEN_PATH + "?q=secret", headers=auth).status_code
    finally:
        code, _ = server.terminate()
    assert code == 0
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert all({"ts", "level", "logger", "pid"} <= set(line) for line in lines)
    (access,) = [line for line in lines if line.get("request_id") == "rid_json_1"]
    assert access["method"] == "GET" and access["path"] == TOKEN_PATH
    assert access["status"] == status and isinstance(access["duration_ms"], float)
    assert token not in log.read_text() and "secret" not in log.read_text()


def test_deploy4_access_fields_decode_quoted_values() -> None:
    fields = access_fields('request_id=r1 method=GET path="/a b" status=404 duration_ms=1.50')
    assert fields == {
        "request_id": "r1",
        "method": "GET",
        "path": "/a b",
        "status": 404,
        "duration_ms": 1.5,
    }


def test_deploy7_allow_insecure_http_comes_from_the_environment(
    tmp_path: Path, home: Path, token: str
) -> None:
    env = {"AIDEMEMO_HOME": str(home), "AIDEMEMO_HOST": "0.0.0.0"}
    refused = subprocess.run(
        [sys.executable, "-m", "aidememo", "serve", "--port", str(free_port())],
        cwd=REPO,
        env={"PATH": os.environ.get("PATH", ""), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2 and "refusing plain HTTP" in refused.stderr
    server = ServeProcess(
        home, tmp_path / "serve.log", environ={**env, "AIDEMEMO_ALLOW_INSECURE_HTTP": "1"}
    )
    try:
        assert httpx.get(server.url + "/health").status_code == 200
    finally:
        server.kill()
