"""The agent CLI as real processes (SPEC.md CLI-2..CLI-6) against the origin on SQLite and
PostgreSQL (`aidememo serve` processes) and the edge double in both storage modes (served on
a loopback port): two agents hand work to each other; refusals; exit statuses; profiles.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aidememo.http.routes import resolve
from tests.cli.agent_support import (
    PROJECT,
    TENANT,
    Cli,
    LosingProxy,
    Server,
    clean_env,
    free_port,
    login,
    provision,
    start_server,
    write_secret,
)

# `fact list` reads `GET .../sessions/{id}/facts` (READS), where this tree serves it.
SESSION_FACTS = resolve("GET", f"/v1/projects/{PROJECT}/sessions/s/facts").route is not None
BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    "edge",
    pytest.param("edge_postgres", marks=pytest.mark.postgres),
]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    home = tmp_path / "agent-home"
    return Cli(home)


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    with start_server(request.param, tmp_path) as served:
        yield served


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[Server]:
    with start_server("sqlite", tmp_path) as served:
        yield served


@pytest.fixture
def team(cli: Cli, sqlite_server: Server) -> dict[str, Path]:
    """Profiles alice and bob (writers) and rita (reader) on a SQLite origin."""
    return logged_in(cli, sqlite_server)


def logged_in(cli: Cli, server: Server) -> dict[str, Path]:
    tokens = {}
    for actor, role in (("alice", "writer"), ("bob", "writer"), ("rita", "reader")):
        tokens[actor] = provision(cli, server, actor, role)
        result = login(cli, server, actor, tokens[actor])
        assert result.code == 0, result
    return tokens


def seq_of(written: dict[str, Any]) -> int:
    return int(written["receipt"]["project_seq"])


# -- the flow of two agents, on every backend ---------------------------------------------


def test_cli2_cli4_cli5_cli6_two_agents_hand_work_over(cli: Cli, server: Server) -> None:
    logged_in(cli, server)
    members = cli.as_("bob", "members")["members"]
    assert [(m["actor_id"], m["role"]) for m in members] == [
        ("alice", "writer"),
        ("bob", "writer"),
        ("rita", "reader"),
    ]
    with cli.watch("bob") as watch:
        session = cli.as_("alice", "session", "new", "checkout is slow", "--id", "s1")
        assert session["receipt"]["resource"] == {"kind": "session", "id": "s1"}
        fact = cli.as_("alice", "fact", "add", "--session", "s1", "p99 went from 80 ms to 2 s")
        sent = cli.as_(
            "alice", "handoff", "send", "--session", "s1", "--to", "bob",
            "--focus", "find the cause", "--done-when", "a fact names it", "--id", "h1",
        )  # fmt: skip
        inbox = cli.as_("bob", "handoff", "inbox")["assignments"]
        assert [(a["record"]["handoff_id"], a["record"]["status"]) for a in inbox] == [
            ("h1", "pending")
        ]
        accepted = cli.as_("bob", "handoff", "accept", "h1")
        assert accepted["recovered"] is False
        # A re-run (as after a lost answer) replays the same claim and command (CLI-5).
        again = cli.as_("bob", "handoff", "accept", "h1")
        assert again["recovered"] is True
        assert again["claim_id"] == accepted["claim_id"]
        assert again["receipt"]["command_id"] == accepted["receipt"]["command_id"]
        beat = cli.as_("bob", "handoff", "heartbeat", "h1")
        assert beat["claim_id"] == accepted["claim_id"] and beat["recovered"] is False
        status = cli.as_("bob", "handoff", "status", "h1")
        assert status["record"]["status"] == "accepted" and status["lease_state"] == "live"
        result = cli.as_("bob", "fact", "add", "--session", "s1", "--id", "f-cause",
                         stdin="the pool has 2 connections\n")  # fmt: skip
        returned = cli.as_("bob", "handoff", "return", "h1", "--result-fact", "f-cause")
        assert returned["recovered"] is False and returned["claim_id"] == accepted["claim_id"]
        rerun = cli.as_("bob", "handoff", "return", "h1", "--result-fact", "f-cause")
        assert rerun["recovered"] is True
        assert rerun["receipt"]["command_id"] == returned["receipt"]["command_id"]
        head = seq_of(returned)
        batches = watch.until_seq(head)
    seen = [e["change"]["seq"] for b in batches for e in b["entries"]]
    assert seen == sorted(set(seen)) and seen[-1] == head
    assert seq_of(session) in seen and seq_of(result) in seen
    done = cli.as_("alice", "handoff", "status", "h1")["record"]
    assert (done["status"], done["result_fact_id"], done["outcome"]) == (
        "completed",
        "f-cause",
        "succeeded",
    )
    found = cli.as_("alice", "search", "pool connections", "--at-least-seq", str(head))
    assert found["results"][0]["fact_id"] == "f-cause"
    assert found["index_seq"] >= head
    got = cli.as_("alice", "get", "fact", "f-cause")
    assert got["state"]["body"]["content"] == "the pool has 2 connections"
    assert got["state"]["body"]["actor_id"] == "bob"
    changes = cli.as_("alice", "changes", "--after-seq", str(seq_of(sent) - 1))
    assert changes["entries"][0]["seq"] == seq_of(sent)
    assert changes["next_cursor"]["after_seq"] == head
    if SESSION_FACTS:
        facts = cli.as_("bob", "fact", "list", "--session", "s1")["facts"]
        assert [f["record"]["fact_id"] for f in facts] == [
            fact["receipt"]["resource"]["id"],
            "f-cause",
        ]
    if server.kind != "sqlite":
        return  # the mailbox and session lists and the human output: once is enough
    outbox = cli.as_("alice", "handoff", "outbox")["assignments"]
    assert [a["record"]["status"] for a in outbox] == ["completed"]
    assert cli.as_("bob", "handoff", "inbox")["assignments"] == []
    sessions = cli.as_("bob", "session", "list")["sessions"]
    assert [s["record"]["session_id"] for s in sessions] == ["s1"]
    # The human-readable form of the same reads.
    text = cli.ok("handoff", "status", "h1", "--profile", "alice").out
    assert "completed" in text and "f-cause" in text
    assert "bob (you)" in cli.ok("members", "--profile", "bob").out


# -- refusals ---------------------------------------------------------------------------


def test_cli4_return_refuses_a_result_fact_that_is_not_the_receivers(
    cli: Cli, team: dict[str, Path]
) -> None:
    cli.as_("alice", "session", "new", "one", "--id", "s1")
    cli.as_("alice", "session", "new", "two", "--id", "s2")
    cli.as_("alice", "fact", "add", "--session", "s1", "--id", "f-alice", "mine")
    cli.as_("bob", "fact", "add", "--session", "s2", "--id", "f-elsewhere", "wrong session")
    cli.as_("alice", "handoff", "send", "--session", "s1", "--to", "bob", "--id", "h1")
    cli.as_("bob", "handoff", "accept", "h1")
    head = cli.as_("alice", "changes")["next_cursor"]["after_seq"]
    for fact, why in (
        ("f-alice", "written by alice, not by you (bob)"),
        ("f-elsewhere", "in session s2, not in the handoff's session s1"),
        ("f-missing", "does not exist"),
    ):
        refused = cli.run("handoff", "return", "h1", "--result-fact", fact, "--profile", "bob")
        assert refused.code == 1, refused
        assert why in refused.err and "nothing was sent" in refused.err
        assert refused.out == ""
    # Nothing was sent: the head did not move and the claim is still live.
    assert cli.as_("alice", "changes")["next_cursor"]["after_seq"] == head
    assert cli.as_("bob", "handoff", "status", "h1")["lease_state"] == "live"
    # Only the receiver returns it.
    refused = cli.run("handoff", "return", "h1", "--result-fact", "f-alice", "--profile", "alice")
    assert refused.code == 1 and "handoff_actor_mismatch" in refused.err


def test_cli2_a_refusal_is_exit_1_with_the_servers_code(cli: Cli, team: dict[str, Path]) -> None:
    cli.as_("alice", "session", "new", "topic", "--id", "s1")
    refused = cli.run("fact", "add", "--session", "s1", "a reader writes", "--profile", "rita")
    assert refused.code == 1 and refused.out == ""
    assert "(project_unauthorized)" in refused.err or "(role" in refused.err, refused.err
    missing = cli.run("get", "fact", "nope", "--profile", "rita")
    assert missing.code == 1 and "(resource_not_found)" in missing.err
    ahead = cli.run("search", "x", "--at-least-seq", "999", "--profile", "rita")
    assert ahead.code == 1 and "(cursor_out_of_range)" in ahead.err
    assert cli.as_("rita", "search", "topic")["results"] == []  # a reader reads


def test_cli2_cli3_usage_is_exit_2(cli: Cli, team: dict[str, Path]) -> None:
    assert cli.run("fact", "add", "text", "--profile", "alice").code == 2  # no --session
    unknown = cli.run("members", "--profile", "nobody")
    assert unknown.code == 2 and "alice" in unknown.err and "bob" in unknown.err
    missing = cli.run("members")
    assert missing.code == 2 and "--profile is required" in missing.err
    assert cli.run("handoff", "return", "h1", "--profile", "bob").code == 2  # no --result-fact
    assert cli.run("search", "q", "--at-least-seq", "-1", "--profile", "bob").code == 2
    no_scheme = cli.run(
        "auth", "login", "--profile", "x", "--url", "127.0.0.1:3030", "--project-id", PROJECT,
        "--token-file", str(team["alice"]),
    )  # fmt: skip
    assert no_scheme.code == 2 and "http://127.0.0.1:3030" in no_scheme.err
    # AIDEMEMO_PROFILE names the profile; no other agent flag comes from the environment.
    leaky = Cli(cli.home, {"AIDEMEMO_PROFILE": "alice", "AIDEMEMO_ID": "s-leak"})
    made = leaky.json("session", "new", "from the environment")
    assert made["receipt"]["actor_id"] == "alice"
    assert made["receipt"]["resource"]["id"] != "s-leak"


def test_cli2_unreachable_is_exit_3(cli: Cli, team: dict[str, Path], sqlite_server: Server) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    refused = cli.run(
        "auth", "login", "--profile", "gone", "--url", dead, "--project-id", PROJECT,
        "--token-file", str(team["alice"]),
    )  # fmt: skip
    assert refused.code == 3 and "(unreachable)" in refused.err
    assert "gone" not in cli.ok("auth", "list").out
    sqlite_server.stop()
    # fact add would queue instead (OUTBOX-1); --no-queue keeps exit 3
    no_queue = ("fact", "add", "--session", "s1", "x", "--no-queue")
    for args in (("members",), no_queue, ("watch",)):
        result = cli.run(*args, "--profile", "alice")
        assert result.code == 3, (args, result)
        assert "cannot reach the server" in result.err


# -- profiles ---------------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_cli3_profiles_file_is_0600_and_no_token_is_printed(
    cli: Cli, sqlite_server: Server, tmp_path: Path
) -> None:
    token_file = provision(cli, sqlite_server, "alice")
    token = token_file.read_text().strip()
    first = login(cli, sqlite_server, "alice", token_file)
    stored = login(cli, sqlite_server, "alice-copy", token_file, "--store-token")
    profiles = cli.home / "profiles.json"
    assert mode(profiles) == 0o600 and mode(cli.home) == 0o700
    copy = cli.home / "tokens" / "alice-copy.token"
    assert mode(copy) == 0o600 and mode(copy.parent) == 0o700
    assert copy.read_text().strip() == token
    assert token not in profiles.read_text()
    listed = cli.ok("auth", "list")
    listed_json = cli.json("auth", "list")
    for output in (first.out, first.err, stored.out, listed.out, listed.err, str(listed_json)):
        assert token not in output
    by_name = {p["name"]: p for p in listed_json["profiles"]}
    assert by_name["alice"] == {
        "name": "alice",
        "url": sqlite_server.url,
        "tenant_id": TENANT,
        "project_id": PROJECT,
        "actor_id": "alice",
        "role": "writer",
        "token_file": str(token_file),
        "stored_token": False,
    }
    assert by_name["alice-copy"]["token_file"] == str(copy)
    # The stored copy serves on its own, and logout removes it with the profile.
    token_file.unlink()
    assert cli.as_("alice-copy", "members")["members"][0]["actor_id"] == "alice"
    cli.ok("auth", "logout", "--profile", "alice-copy")
    assert not copy.exists()
    assert [p["name"] for p in cli.json("auth", "list")["profiles"]] == ["alice"]
    assert mode(profiles) == 0o600
    assert not [p for p in cli.home.iterdir() if p.name.endswith(".tmp")]


def test_cli3_login_refuses_a_token_the_server_refuses(
    cli: Cli, sqlite_server: Server, tmp_path: Path
) -> None:
    bogus = write_secret(tmp_path / "bogus.token", os.urandom(32).hex())
    refused = login(cli, sqlite_server, "alice", bogus)
    assert refused.code == 1 and "(authentication_failed)" in refused.err
    assert not (cli.home / "profiles.json").exists()


def test_cli3_a_profile_acts_as_its_pinned_actor_only(
    cli: Cli, team: dict[str, Path], tmp_path: Path
) -> None:
    cli.as_("alice", "session", "new", "topic", "--id", "s1")
    head = cli.as_("alice", "changes")["next_cursor"]["after_seq"]
    # No flag names another actor.
    assert cli.run("fact", "add", "--session", "s1", "x", "--actor", "bob",
                   "--profile", "alice").code == 2  # fmt: skip
    # Bob's token in alice's token file: refused before anything is sent.
    alice_token = team["alice"].read_text()
    team["alice"].write_text(team["bob"].read_text())
    refused = cli.run("fact", "add", "--session", "s1", "as bob?", "--profile", "alice")
    assert refused.code == 1 and "acts as alice only" in refused.err
    assert "token of bob" in refused.err
    # Logging in again under alice's name with bob's token is refused too.
    relogin = login(cli, team_server_url_holder(cli), "alice", team["bob"])
    assert relogin.code == 1 and "pinned to actor alice" in relogin.err
    team["alice"].write_text(alice_token)
    assert cli.as_("bob", "changes")["next_cursor"]["after_seq"] == head
    assert cli.as_("alice", "fact", "add", "--session", "s1", "as alice")["recovered"] is False


def team_server_url_holder(cli: Cli) -> Server:
    """The server alice's profile names (read back from `auth list`)."""
    profiles = {p["name"]: p for p in cli.json("auth", "list")["profiles"]}
    return Server("sqlite", profiles["alice"]["url"], Path(), None)


def test_cli6_watch_prints_batches_and_ends_with_the_feeds_error_code(
    cli: Cli, team: dict[str, Path], sqlite_server: Server
) -> None:
    with cli.watch("rita") as watch:
        first = watch.until_seq(0)
        assert first[0]["entries"] == [] and first[0]["has_more"] is False
        session = cli.as_("alice", "session", "new", "watched", "--id", "s1")
        pushed = watch.until_seq(seq_of(session))
        assert [e["resource"]["resource"] for b in pushed for e in b["entries"]] == [
            {"kind": "session", "id": "s1"}
        ]
        admin = sqlite_server.admin_token_file.read_text().strip()
        suspended = httpx.post(
            f"{sqlite_server.url}/v1/admin/members",
            headers={"authorization": f"Bearer {admin}"},
            json={
                "tenant_id": TENANT,
                "project_id": PROJECT,
                "actor_id": "rita",
                "status": "suspended",
            },
            timeout=30,
        )
        assert suspended.status_code == 200, suspended.text
        code = watch.proc.wait(timeout=30)
        assert watch.proc.stderr is not None
        err = watch.proc.stderr.read()
    assert code == 1 and "(project_unauthorized)" in err, err
    refused = cli.run("watch", "--profile", "rita")
    assert refused.code == 1 and "(project_unauthorized)" in refused.err


def test_cli8_commands_run_without_httpx_or_pydantic(tmp_path: Path) -> None:
    """The synchronous client needs neither httpx nor pydantic: without them the admin
    commands run and an agent command gets as far as its profile."""
    code = (
        "import sys; sys.modules['httpx'] = None; sys.modules['pydantic'] = None; "
        "from aidememo.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    env = clean_env(tmp_path / "home")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip

    assert run("token", "new", "--out", str(tmp_path / "t.token")).returncode == 0
    missing = run("members", "--profile", "x")
    assert missing.returncode == 2 and "no profile 'x'" in missing.stderr, missing.stderr


def test_cli5_cli2_accept_and_return_rerun_after_lost_answers_recover_the_same_ids(
    cli: Cli, sqlite_server: Server
) -> None:
    """Every answer to the accept (and then the return) is lost: the CLI exits 3 not knowing
    whether it was applied; the re-run finds it applied and reports the same ids."""
    proxy = LosingProxy(sqlite_server.url)
    try:
        behind = Server("sqlite", proxy.url, sqlite_server.admin_token_file, None)
        for actor in ("alice", "bob"):
            assert login(cli, behind, actor, provision(cli, sqlite_server, actor)).code == 0
        cli.as_("alice", "session", "new", "topic", "--id", "s1")
        cli.as_("alice", "handoff", "send", "--session", "s1", "--to", "bob", "--id", "h1")
        cli.as_("bob", "fact", "add", "--session", "s1", "--id", "f1", "done")
        proxy.losing = "/handoffs/h1/accept"
        lost = cli.run("handoff", "accept", "h1", "--profile", "bob")
        assert lost.code == 3 and "(unreachable)" in lost.err, lost
        assert proxy.lost == 2  # the first send and the client's one identical retry
        proxy.losing = None
        status = cli.as_("bob", "handoff", "status", "h1")
        assert status["record"]["status"] == "accepted"  # it was applied after all
        accepted = cli.as_("bob", "handoff", "accept", "h1")
        assert accepted["recovered"] is True
        assert accepted["claim_id"] == status["record"]["claim_id"]
        proxy.losing = "/handoffs/h1/return"
        lost = cli.run("handoff", "return", "h1", "--result-fact", "f1", "--profile", "bob")
        assert lost.code == 3, lost
        proxy.losing = None
        returned = cli.as_("bob", "handoff", "return", "h1", "--result-fact", "f1")
        assert returned["recovered"] is True and returned["claim_id"] == accepted["claim_id"]
        again = cli.as_("bob", "handoff", "return", "h1", "--result-fact", "f1")
        assert again["receipt"]["command_id"] == returned["receipt"]["command_id"]
        done = cli.as_("alice", "handoff", "status", "h1")
        assert done["record"]["status"] == "completed" and done["revision"] == 3
    finally:
        proxy.stop()


def test_sem1_search_mode_and_explain_show_why_each_fact_came_back(
    cli: Cli, team: dict[str, Path]
) -> None:
    cli.as_("alice", "session", "new", "db", "--id", "s1")
    cli.as_("alice", "fact", "add", "--session", "s1", "--id", "f_pool",
            "the pool has 2 connections; raise it to 20")  # fmt: skip
    last = cli.as_("alice", "fact", "add", "--session", "s1", "--id", "f_tabs",
                   "indent with four spaces")  # fmt: skip
    seq = str(seq_of(last))
    found = cli.as_("bob", "search", "requests waiting for the database", "--mode", "semantic",
                    "--at-least-seq", seq)  # fmt: skip
    assert found["mode"] == "semantic" and found["results"][0]["fact_id"] == "f_pool"
    assert found["semantic_model"]["provider"] == "bundled"
    text = cli.ok("search", "pool database", "--mode", "hybrid", "--explain",
                  "--at-least-seq", seq, "--profile", "bob").out  # fmt: skip
    assert "LEXICAL" in text and "SEMANTIC" in text and "f_pool" in text
    assert "hybrid search, index at seq" in text and "bundled/all-MiniLM-L6-v2-int8" in text
    lexical = cli.as_("bob", "search", "pool", "--mode", "lexical")
    assert [r["fact_id"] for r in lexical["results"]] == ["f_pool"]
