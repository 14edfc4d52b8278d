"""Recall across tiers (MEM-24): the project store's scope, then the user-level store's global
scope, then the team's shared project on a real `aidememo serve`, through a saved profile."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from aidememo.agent_memory import AgentMemory, paths
from aidememo.agent_memory.model import RecallResult
from aidememo.agent_memory.scope_policy import ScopePolicy
from aidememo.agent_memory.tiers import TeamFact, share, tiered_recall
from tests.cli.agent_support import AIDEMEMO, Cli, login, provision, start_server


def test_mem24_tiers_share_the_limit_by_precedence_with_a_reserved_place() -> None:
    assert share([[1] * 8, [1] * 3, [1] * 2], 8) == [6, 1, 1]
    assert share([[1] * 2, [1] * 9, [1] * 9], 8) == [2, 5, 1]
    assert share([[], [1] * 9, []], 8) == [0, 8, 0]
    assert share([[1] * 9, [], [1]], 1) == [1, 0, 0]
    assert share([[1] * 9, [1], [1]], 2) == [1, 1, 0]


class NeverRead:
    """A team tier a restricted session must not read."""

    name, scope = "never", "team:p-other"

    def search(self, query: str, limit: int) -> list[TeamFact]:
        raise AssertionError("a scope outside the allowlist was read")


def test_mem24_a_restricted_session_reads_no_tier_outside_its_allowlist(
    tmp_path: Path,
) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "u").mkdir()
    project = AgentMemory.open(str(tmp_path / "p" / "memories.sqlite"), scope="project:a")
    user = AgentMemory.open(str(tmp_path / "u" / "memories.sqlite"))
    try:
        project.remember("Deploys use the blue-green switch.", kind="note")
        user.remember("Deploys are announced in the ops channel.", kind="note")
        answer = tiered_recall(
            "deploys",
            project=project,
            user=user,
            team=NeverRead(),
            include_global=True,
            policy=ScopePolicy(["project:a"]),
        )
        rows = [r for r in answer.results if isinstance(r, RecallResult)]
        assert len(rows) == len(answer.results)
        assert [(r.tier, r.memory.scope) for r in rows] == [("project", "project:a")]
        assert [(t.tier, t.status) for t in answer.tiers] == [
            ("project", "searched"),
            ("user", "skipped"),
            ("team", "skipped"),
        ]
        both = tiered_recall("deploys", project=project, user=user, team=None, include_global=True)
        assert [r.tier for r in both.results if isinstance(r, RecallResult)] == ["project", "user"]
    finally:
        project.close()
        user.close()


def _memory(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIDEMEMO, "memory", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _recall(env: dict[str, str], cwd: Path, *args: str) -> dict[str, Any]:
    done = _memory(env, cwd, "recall", *args, "--json")
    assert done.returncode == 0, done
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def test_mem24_three_tiers_with_project_and_user_stores_and_a_real_server(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path / "agent-home")
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir(exist_ok=True)
    project.mkdir()
    env = cli.env() | {"HOME": str(home)}
    for name in list(env):
        if name.startswith("NUZO_"):
            del env[name]
    assert _memory(env, project, "init").returncode == 0
    user_note = _memory(
        env, project, "remember", "Rollbacks need a second reviewer.", "--kind", "instruction"
    )
    assert _memory(env, project, "init", "--project").returncode == 0
    project_note = _memory(
        env, project, "remember", "Rollbacks here run scripts/rollback.", "--kind", "fact"
    )
    assert user_note.returncode == project_note.returncode == 0
    with start_server("sqlite", tmp_path) as server:
        assert login(cli, server, "alice", provision(cli, server, "alice")).code == 0
        cli.as_("alice", "session", "new", "incident review", "--id", "s1")
        cli.as_("alice", "fact", "add", "--session", "s1", "Rollbacks were slow last quarter.")
        deadline = time.monotonic() + 30
        while True:
            answer = _recall(env, project, "rollbacks", "--team-profile", "alice")
            if len(answer["results"]) == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        scope = paths.project_scope(str(project))
        assert [r["tier"] for r in answer["results"]] == ["project", "user", "team"]
        assert answer["results"][0]["memory"]["scope"] == scope
        assert answer["results"][1]["memory"]["scope"] == "user:default"
        assert answer["results"][2]["fact"]["scope"] == "team:p-cli"
        assert answer["results"][2]["fact"]["content"] == "Rollbacks were slow last quarter."
        assert [(t["tier"], t["status"], t["found"]) for t in answer["tiers"]] == [
            ("project", "searched", 1),
            ("user", "searched", 1),
            ("team", "searched", 1),
        ]
        assert answer["tiers"][1]["store"] == paths.user_store_path(str(home))
        text = _memory(env, project, "recall", "rollbacks", "--team-profile", "alice")
        rows = [line.split("\t") for line in text.stdout.splitlines()]
        assert [row[3:] for row in rows] == [
            [f"scope={scope}", "tier=project"],
            ["scope=user:default", "tier=user"],
            ["scope=team:p-cli", "tier=team"],
        ]
        limited = _recall(env, project, "rollbacks", "--team-profile", "alice", "--limit", "2")
        assert [r["tier"] for r in limited["results"]] == ["project", "user"]
    # The server is gone: the local tiers still answer and the team tier says it was skipped.
    offline = _memory(env, project, "recall", "rollbacks", "--team-profile", "alice")
    assert offline.returncode == 0, offline
    assert [line.split("\t")[-1] for line in offline.stdout.splitlines()] == [
        "tier=project",
        "tier=user",
    ]
    assert offline.stderr.startswith("Tier team skipped: ")
    single = _memory(env, project, "recall", "rollbacks", "--single-store")
    assert [line.split("\t")[2] for line in single.stdout.splitlines()] == [
        "Rollbacks here run scripts/rollback."
    ]


@pytest.mark.parametrize("flag", ["--single-store", "--no-include-global"])
def test_mem24_one_store_when_asked(tmp_path: Path, flag: str) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir(exist_ok=True)
    project.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    assert _memory(env, project, "init").returncode == 0
    _memory(env, project, "remember", "Global tip about caching.", "--kind", "note")
    assert _memory(env, project, "init", "--project").returncode == 0
    _memory(env, project, "remember", "Project caching uses redis.", "--kind", "note")
    done = _memory(env, project, "recall", "caching", flag)
    assert [line.split("\t")[2] for line in done.stdout.splitlines()] == [
        "Project caching uses redis."
    ]


def test_mem24_mcp_recall_names_tiers_and_keeps_the_allowlist(tmp_path: Path) -> None:
    from aidememo.agent_memory.mcp_tools import MemoryToolProvider

    (tmp_path / "p").mkdir()
    (tmp_path / "u").mkdir()
    project = AgentMemory.open(str(tmp_path / "p" / "memories.sqlite"), scope="project:a")
    user = AgentMemory.open(str(tmp_path / "u" / "memories.sqlite"))
    try:
        project.remember("Deploys use the blue-green switch.", kind="note")
        user.remember("Deploys are announced in the ops channel.", kind="note")
        provider = MemoryToolProvider(project, allowed_scopes=["project:a", "user:default"])
        provider.user_store, provider.team = user, NeverRead()
        out = provider.call("memory.recall", {"query": "deploys", "include_global": True})
        assert [(r["tier"], r["scope"]) for r in out["results"]] == [
            ("project", "project:a"),
            ("user", "user:default"),
        ]
        assert [(t["tier"], t["status"]) for t in out["tiers"]] == [
            ("project", "searched"),
            ("user", "searched"),
            ("team", "skipped"),
        ]
        alone = MemoryToolProvider(project, allowed_scopes=["project:a"])
        alone.user_store, alone.team = user, NeverRead()
        out = alone.call("memory.recall", {"query": "deploys", "include_global": False})
        assert [r["tier"] for r in out["results"]] == ["project"]
    finally:
        project.close()
        user.close()
