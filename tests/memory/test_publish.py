"""`aidememo memory publish`: a memory copied into a team project as a fact, through the agent
client, with ids derived from the memory's id and revision so a retry replays (MEM-15)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aidememo.agent_memory import AgentMemory
from aidememo.cli.memory.publish import published_fact_id
from tests.cli.agent_support import Cli, Server, login, provision, start_server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    with start_server("sqlite", tmp_path) as server:
        yield server


def test_mem15_publish_writes_one_fact_per_revision_and_replays_a_retry(
    tmp_path: Path, served: Server
) -> None:
    cli = Cli(tmp_path / "agent-home")
    token = provision(cli, served, "alice")
    assert login(cli, served, "alice", token).code == 0
    cli.as_("alice", "session", "new", "shared learnings", "--id", "s1")
    store_path = tmp_path / "local" / "memories.sqlite"
    store_path.parent.mkdir()
    with AgentMemory.open(str(store_path), scope="project:local") as store:
        memory = store.remember("Pin the Node version in CI.", kind="instruction")
    base = ["memory", "--store", str(store_path), "publish", memory.id, "--session", "s1"]
    first = cli.as_("alice", *base)
    assert first["fact_id"] == published_fact_id(memory.id, 1)
    assert first["scope"] == "project:local" and first["project_id"] == "p-cli"
    again = cli.as_("alice", *base)
    assert (again["fact_id"], again["command_id"]) == (first["fact_id"], first["command_id"])
    assert again["project_seq"] == first["project_seq"]  # the stored receipt, replayed
    assert again["committed_at_ms"] == first["committed_at_ms"]
    with AgentMemory.open(str(store_path)) as store:
        store.update(memory.id, content="Pin the Node version in CI and locally.")
    newer = cli.as_("alice", *base)
    assert newer["fact_id"] == published_fact_id(memory.id, 2) != first["fact_id"]
    for fact_id, content in (
        (first["fact_id"], "Pin the Node version in CI."),
        (newer["fact_id"], "Pin the Node version in CI and locally."),
    ):
        body = cli.as_("alice", "get", "fact", fact_id)
        assert content in str(body) and "s1" in str(body)
    assert newer["project_seq"] == first["project_seq"] + 1
    missing = cli.run(*base[:4], "mem_missing", "--session", "s1", "--profile", "alice")
    assert missing.code == 1 and missing.err.startswith("MEMORY_NOT_FOUND: ")
    nobody = cli.run(*base)
    assert nobody.code == 2 and "--profile is required" in nobody.err
