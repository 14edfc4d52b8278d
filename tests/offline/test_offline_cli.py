"""`aidememo replica` and `aidememo outbox` as real CLI processes against `aidememo serve` on
SQLite behind `FaultProxy` (REPLICA-3..5, OUTBOX-1..6). One server and two profiles serve the
module; each test starts with the switches off and empty outboxes. Writes the tests make
beside the CLI go to the server directly through `aidememo.client`.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from aidememo.client import AidememoClientError, Client
from tests.cli.agent_support import AIDEMEMO, PROJECT, TENANT
from tests.offline.support import Team, team

WAIT_S = 60.0


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    tmp = tmp_path_factory.mktemp("offline")
    with team("sqlite", tmp, (("codex-a", "writer"), ("codex-b", "writer"))) as crew:
        yield crew


@pytest.fixture
def crew(shared: Team) -> Iterator[Team]:
    shared.proxy.set_outage(False)
    shared.proxy.lose_next_handoff = False
    for path in (shared.cli.home / "outbox").glob("*.sqlite"):
        path.unlink()
    yield shared


def direct(crew: Team, actor: str) -> Client:
    return Client(crew.server.url, crew.tokens[actor], PROJECT)


def test_replica3_replica4_pin_status_offline_get_and_reset(crew: Team) -> None:
    with direct(crew, "codex-a") as a, direct(crew, "codex-b") as b:
        a.create_session("replica round trip", session_id="s_rep")
        a.send_handoff("s_rep", "codex-b", handoff_id="h_rep")
        b.accept_handoff("h_rep")
        b.create_fact("s_rep", "done", fact_id="f_rep")
        b.return_handoff("h_rep", "f_rep")
    pulled = crew.json("codex-a", "replica", "pull")
    assert pulled["bootstrapped"] is True and pulled["changes"] == 0
    path = pulled["path"]
    assert Path(path).stat().st_mode & 0o777 == 0o600
    assert crew.json("codex-a", "replica", "status")["actor_id"] == "codex-a"
    reused = crew.run("codex-b", "replica", "pull", "--path", path)
    assert reused.code == 1 and "replica actor mismatch" in reused.err, reused
    crew.proxy.set_outage(True)
    cached = crew.json("codex-a", "replica", "get", "handoff", "h_rep")
    assert cached["state"]["body"]["status"] == "completed"
    assert cached["cursor"]["after_seq"] == pulled["after_seq"]
    missing = crew.run("codex-a", "replica", "get", "fact", "nope")
    assert missing.code == 1 and "(resource_not_found)" in missing.err
    refused = crew.run("codex-a", "replica", "reset")
    assert refused.code == 2 and "pass --force" in refused.err
    reset = crew.json("codex-a", "replica", "reset", "--force")
    assert reset["reset"] is True and reset["resources"] == pulled["resources"]
    assert "no replica" in crew.ok("codex-a", "replica", "status").out


def test_sem9_replica_search_by_meaning_with_the_server_down(crew: Team) -> None:
    with direct(crew, "codex-a") as a:
        a.create_session("replica meaning", session_id="s_mean")
        a.create_fact("s_mean", "the pool holds 2 connections; raise it to 20", fact_id="f_m1")
        a.create_fact("s_mean", "the team lunch moved to Thursday", fact_id="f_m2")
    path = str(crew.cli.home / "meaning.sqlite")
    pulled = crew.json("codex-a", "replica", "pull", "--path", path)
    crew.proxy.set_outage(True)
    asked = "why is the database saturated?"
    found = crew.json("codex-a", "replica", "search", asked, "--mode", "semantic", "--path", path)
    assert found["mode"] == "semantic" and found["index_seq"] == pulled["after_seq"]
    assert found["results"][0]["fact_id"] == "f_m1"
    human = crew.ok("codex-a", "replica", "search", asked, "--path", path).out
    assert f"hybrid search of the replica at seq {pulled['after_seq']}" in human


class Lines:
    """A stream's lines, read as they come."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)
        self.lines.put(None)

    def until(self, found: Any) -> str:
        while True:
            line = self.lines.get(timeout=WAIT_S)
            assert line is not None, "the stream ended"
            if found(line):
                return line


def test_replica5_watch_follows_the_live_feed_and_reconnects_from_its_cursor(crew: Team) -> None:
    watch_round_trip(crew)


def test_replica5_watch_reconnects_at_the_edge_double(tmp_path: Path) -> None:
    with team("edge", tmp_path, (("codex-b", "writer"),)) as crew:
        watch_round_trip(crew)


def watch_round_trip(crew: Team) -> None:
    """`replica pull --watch` applies a pushed commit, loses the feed in an outage, and
    reconnects from its cursor to apply what was committed meanwhile."""
    with direct(crew, "codex-b") as b:
        b.create_session("watched", session_id="s_watch")
    proc = subprocess.Popen(
        [AIDEMEMO, "replica", "pull", "--watch", "--json", "--profile", "codex-b"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=crew.cli.env(),
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    try:
        json.loads(out.until(lambda line: "bootstrapped" in line))
        with direct(crew, "codex-b") as b:
            seq = b.create_fact("s_watch", "pushed", fact_id="f_w1").receipt.project_seq

            def reached(target: int) -> Any:
                return lambda line: json.loads(line).get("after_seq", -1) >= target

            out.until(reached(seq))
            crew.proxy.set_outage(True)  # the tunnel is cut; reconnecting gets 503
            err.until(lambda line: "reconnecting from seq" in line)
            later = b.create_fact("s_watch", "while cut off", fact_id="f_w2")
            crew.proxy.set_outage(False)
            out.until(reached(later.receipt.project_seq))
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        proc.stdout.close()
        proc.stderr.close()
    crew.proxy.set_outage(True)
    cached = crew.json("codex-b", "replica", "get", "fact", "f_w2")
    assert cached["state"]["body"]["content"] == "while cut off"


def test_outbox1_no_queue_exits_3_and_refusals_are_not_queued(crew: Team) -> None:
    crew.proxy.set_outage(True)
    stopped = crew.run("codex-a", "fact", "add", "--session", "s_any", "x", "--no-queue")
    assert stopped.code == 3 and stopped.err.rstrip().endswith("(unreachable)"), stopped
    crew.proxy.set_outage(False)
    refused = crew.run("codex-a", "fact", "add", "--session", "no_such_session", "x")
    assert refused.code == 1 and "queued" not in refused.out
    assert crew.json("codex-a", "outbox", "list")["count"] == 0


def test_outbox2_outbox6_queued_send_is_reused_by_a_later_process(crew: Team) -> None:
    with direct(crew, "codex-a") as a:
        a.create_session("reuse", session_id="s_reuse")
    crew.proxy.set_outage(True)
    args = ("handoff", "send", "--session", "s_reuse", "--to", "codex-b", "--focus", "once")
    first = crew.json("codex-a", *args)
    again = crew.json("codex-a", *args)
    assert first["queued"] and again["queued"] and again["reason"].startswith("already queued")
    assert (again["handoff_id"], again["item"]) == (first["handoff_id"], first["item"])
    other = crew.run("codex-a", "handoff", "send", "--session", "s_reuse", "--to", "codex-b",
                     "--id", first["handoff_id"], "--focus", "something else")  # fmt: skip
    assert other.code == 1 and "with another request" in other.err
    crew.proxy.set_outage(False)
    with direct(crew, "codex-a") as a:
        with pytest.raises(AidememoClientError):  # nothing was published implicitly
            a.handoff_status(first["handoff_id"])
    assert "published 1, failed 0, conflicts 0" in crew.ok("codex-a", "outbox", "publish").out


def test_outbox5_publish_keeps_order_and_stops_at_an_outage(crew: Team) -> None:
    crew.proxy.set_outage(True)
    crew.ok("codex-a", "session", "new", "queued topic", "--id", "s_order")
    crew.ok("codex-a", "fact", "add", "--session", "s_order", "--id", "f_order", "after it")
    down = crew.run("codex-a", "outbox", "publish")
    assert down.code == 3 and "published 0, failed 2, conflicts 0" in down.out
    listed = crew.json("codex-a", "outbox", "list")
    assert [i["state"] for i in listed["items"]] == ["queued", "queued"]
    crew.proxy.set_outage(False)
    up = crew.ok("codex-a", "outbox", "publish").out.splitlines()
    assert up[-1] == "published 2, failed 0, conflicts 0"
    assert "s_order" in up[0] and "f_order" in up[1]


def test_outbox5_conflict_is_reported_and_held_until_dropped(crew: Team) -> None:
    with direct(crew, "codex-a") as a:
        a.create_session("conflicts", session_id="s_conf")
    crew.proxy.set_outage(True)
    queued = crew.json("codex-a", "fact", "add", "--session", "s_conf", "--id", "f_conf", "mine")
    crew.proxy.set_outage(False)
    with direct(crew, "codex-a") as a:
        a.create_fact("s_conf", "written elsewhere meanwhile", fact_id="f_conf")
    first = crew.run("codex-a", "outbox", "publish")
    assert first.code == 1 and "published 0, failed 0, conflicts 1" in first.out
    assert "(command_conflict)" in first.out
    second = crew.ok("codex-a", "outbox", "publish").out
    assert "held item" in second and "published 0, failed 0, conflicts 0" in second
    assert crew.json("codex-a", "outbox", "list")["items"][0]["state"] == "conflict"
    rerun = crew.run("codex-a", "fact", "add", "--session", "s_conf", "--id", "f_conf", "mine")
    assert rerun.code == 1 and "held in the outbox" in rerun.err
    crew.ok("codex-a", "outbox", "drop", str(queued["item"]))
    assert crew.json("codex-a", "outbox", "list")["count"] == 0


def test_outbox4_changed_profile_fails_closed_at_publish(crew: Team, tmp_path: Path) -> None:
    with direct(crew, "codex-a") as a:
        a.create_session("rebound", session_id="s_bound")
    crew.proxy.set_outage(True)
    queued = crew.json("codex-a", "handoff", "send", "--session", "s_bound", "--to", "codex-b")
    crew.proxy.set_outage(False)
    token = tmp_path / "a.token"
    token.write_text(crew.tokens["codex-a"] + "\n")
    token.chmod(0o600)
    crew.cli.ok("auth", "login", "--profile", "codex-a", "--url", crew.server.url,
                "--project-id", PROJECT, "--token-file", str(token))  # fmt: skip
    try:
        published = crew.run("codex-a", "outbox", "publish")
        assert published.code == 1 and "published 0, failed 1, conflicts 0" in published.out
        assert "the profile changed since it was queued (url" in published.out
        with direct(crew, "codex-a") as a, pytest.raises(AidememoClientError):
            a.handoff_status(queued["handoff_id"])
    finally:
        crew.cli.ok("auth", "login", "--profile", "codex-a", "--url", crew.proxy.url,
                    "--project-id", PROJECT, "--token-file", str(token))  # fmt: skip


def test_replica3_reimported_project_epoch_fails_closed_until_reset(tmp_path: Path) -> None:
    """A real epoch change: the tenant exported (with token digests), deleted and imported
    again through the admin routes gets a new epoch, which the replica refuses."""
    with team("sqlite", tmp_path, (("codex-a", "writer"),)) as crew:
        with direct(crew, "codex-a") as a:
            a.create_session("before the import", session_id="s_epoch")
        first = crew.json("codex-a", "replica", "pull")
        admin = ("--url", crew.server.url, "--admin-token-file", str(crew.server.admin_token_file))
        dump = tmp_path / "tenant.jsonl"
        crew.cli.ok("admin", "export", *admin, "--tenant-id", TENANT, "--include-token-digests",
                    "--out", str(dump))  # fmt: skip
        crew.cli.ok("admin", "delete-tenant", *admin, "--tenant-id", TENANT, "--confirm", TENANT)
        crew.cli.ok("admin", "import", *admin, "--in", str(dump))
        refused = crew.run("codex-a", "replica", "pull")
        assert refused.code == 1 and "replica epoch mismatch" in refused.err, refused
        assert crew.json("codex-a", "replica", "status")["after_seq"] == first["after_seq"]
        crew.ok("codex-a", "replica", "reset", "--force")
        again = crew.json("codex-a", "replica", "pull")
        assert again["bootstrapped"] is True and again["resources"] == first["resources"]
