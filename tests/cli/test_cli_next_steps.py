"""Errors that say what to do next (SPEC.md CLI-7) and `watch` lines that say what changed
(CLI-6), as real `aidememo` processes against a real `aidememo serve` on SQLite."""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.agent_support import (
    AIDEMEMO,
    PROJECT,
    Cli,
    Server,
    free_port,
    login,
    provision,
    start_server,
    write_secret,
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with start_server("sqlite", tmp_path) as served:
        yield served


@pytest.fixture
def cli(tmp_path: Path, server: Server) -> Cli:
    cli = Cli(tmp_path / "agent-home")
    for actor in ("alice", "bob"):
        assert login(cli, server, actor, provision(cli, server, actor)).code == 0
    return cli


def test_cli7_a_bad_token_names_the_token_file_and_the_login_that_fixes_it(
    cli: Cli, server: Server
) -> None:
    stranger = write_secret(cli.home.parent / "stranger.token", "s" * 40)
    done = login(cli, server, "carol", stranger)
    assert done.code == 1 and done.err.rstrip().endswith("(authentication_failed)")
    assert "unknown or revoked token" in done.err and str(stranger) in done.err
    assert f"auth login --profile carol --url {server.url} --project-id {PROJECT}" in done.err
    assert len(done.err.strip().splitlines()) == 1


def test_cli7_a_project_typo_names_the_project(cli: Cli, server: Server) -> None:
    token = cli.home.parent / "alice.token"
    done = cli.run("auth", "login", "--profile", "typo", "--url", server.url,
                   "--project-id", "p-clii", "--token-file", str(token))  # fmt: skip
    assert done.code == 1 and done.err.rstrip().endswith("(project_unauthorized)")
    assert "project 'p-clii'" in done.err and "check --project-id" in done.err


def test_cli7_a_receiver_typo_names_the_receiver_and_the_members_command(cli: Cli) -> None:
    cli.as_("alice", "session", "new", "one", "--id", "s1")
    done = cli.run("handoff", "send", "--session", "s1", "--to", "bobb", "--profile", "alice")
    assert done.code == 1 and done.err.rstrip().endswith("(invalid_command)")
    assert "receiver bobb must be an active writer" in done.err
    assert "aidememo members --profile alice" in done.err


def test_cli7_a_mistyped_subcommand_gets_the_closest_names(cli: Cli) -> None:
    top = cli.run("fatc", "add")
    assert top.code == 2 and "did you mean 'fact'" in top.err
    nested = cli.run("handoff", "acept", "h1")
    assert nested.code == 2 and "did you mean 'accept'" in nested.err


def test_cli7_a_read_with_the_server_down_points_at_serve_and_the_replica(
    cli: Cli, server: Server
) -> None:
    server.stop()
    done = cli.run("get", "fact", "f1", "--profile", "alice")
    assert done.code == 3 and done.err.rstrip().endswith("(unreachable)")
    assert "scripts/serve" in done.err and f"nothing answers at {server.url}" in done.err
    assert "aidememo replica get KIND ID --profile alice" in done.err
    gone = f"http://127.0.0.1:{free_port()}"
    login_down = cli.run("auth", "login", "--profile", "x", "--url", gone, "--project-id",
                         PROJECT, "--token-file", str(cli.home.parent / "alice.token"))  # fmt: skip
    assert login_down.code == 3 and f"nothing answers at {gone}" in login_down.err


class _Lines:
    """A running human-readable `aidememo watch`: its stdout lines as they come."""

    def __init__(self, cli: Cli, *args: str) -> None:
        self.proc = subprocess.Popen(
            [AIDEMEMO, "watch", "--profile", "bob", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli.env(),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def until(self, needle: str) -> list[str]:
        seen: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=30)
            except queue.Empty:
                raise AssertionError(f"no line with {needle!r}: {seen}") from None
            seen.append(line)
            if needle in line:
                return seen

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=15)
        for stream in (self.proc.stdout, self.proc.stderr):
            assert stream is not None
            stream.close()


def test_cli6_watch_shows_content_and_focus_and_starts_from_now_or_since(cli: Cli) -> None:
    cli.as_("alice", "session", "new", "old topic", "--id", "s1")
    long = "the pool has 2 connections; " + "x" * 100
    fact = cli.as_("alice", "fact", "add", "--session", "s1", "--id", "f1", long)
    since = fact["receipt"]["project_seq"]
    now = _Lines(cli, "--from-now")
    try:
        assert now.until("watching")[-1].endswith(f"after seq {since}")
        cli.as_("alice", "handoff", "send", "--session", "s1", "--to", "bob",
                "--focus", "find why p99 doubled", "--id", "h1")  # fmt: skip
        line = now.until("handoff/h1")[-1]
        assert "alice -> bob pending, focus: find why p99 doubled" in line
    finally:
        now.stop()
    replay = _Lines(cli, "--since", str(since))
    try:
        seen = replay.until("handoff/h1")
        assert not any("session/s1" in line for line in seen)  # before --since
        fact_line = next(line for line in seen if "fact/f1" in line)
        assert fact_line.endswith("…") and "the pool has 2 connections;" in fact_line
        assert len(fact_line) < 140
    finally:
        replay.stop()
