"""The exact-read replica (`aidememo.client.replica`) on every backend (REPLICA-1..REPLICA-4).

The replica is filled through `aidememo.client.Client` over the contract suite's backends;
its reads touch only its file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aidememo.client import Client, Identity, Snapshot
from aidememo.client.replica import Replica, ReplicaInvalid, ReplicaMismatch, pull
from tests.client.transports import Faulty
from tests.contract.support import HERMES, RECEIVER, WRITER, Api

Connect = Callable[..., tuple[Client, Faulty]]


def _cached(replica: Replica) -> list[tuple[str, str, int]]:
    conn = sqlite3.connect(replica.path)
    try:
        rows = conn.execute("SELECT kind, id, revision FROM resources ORDER BY kind, id")
        return [tuple(r) for r in rows.fetchall()]
    finally:
        conn.close()


def test_replica1_replica4_bootstrap_incremental_pull_and_offline_read_are_atomic(
    api: Api, connect: Connect, tmp_path: Path
) -> None:
    writer, _ = connect(WRITER)
    sid = writer.create_session("replica").id
    for n in range(5):
        writer.create_fact(sid, f"fact {n}", fact_id=f"f{n}")
    writer.send_handoff(sid, HERMES, handoff_id="h_hidden")  # not codex-p2's to see
    receiver, _ = connect(RECEIVER)
    path = tmp_path / "r.sqlite"

    # a bootstrap that breaks after its first page writes nothing
    def broken(limit: int | None = None) -> Iterator[Snapshot]:
        pages = receiver.snapshot_pages(limit=2)
        yield next(pages)
        raise ReplicaInvalid("the walk broke")

    with Replica(path) as replica:
        with pytest.raises(ReplicaInvalid):
            replica.bootstrap(receiver.identity(), broken())
        assert not replica.bootstrapped and _cached(replica) == []
        done = pull(receiver, replica, limit=2)  # three snapshot pages of two
        assert done.bootstrapped and done.changes == 0 and done.resources == 6
        assert done.after_seq == api.head()
        assert ("handoff", "h_hidden") not in {(k, i) for k, i, _ in _cached(replica)}
        assert path.stat().st_mode & 0o777 == 0o600

        writer.create_fact(sid, "later", fact_id="f_later")
        writer.send_handoff(sid, RECEIVER, handoff_id="h_mine")
        again = pull(receiver, replica, limit=1)  # one batch per entry
        assert not again.bootstrapped and again.before_seq == done.after_seq
        assert again.changes == 2 and again.after_seq == api.head() == replica.cursor()

    # offline: a new handle on the file answers with no client at all
    with Replica(path) as offline:
        fact = offline.get("fact", "f_later")
        assert fact is not None and fact.body["content"] == "later"
        assert fact.after_seq == again.after_seq
        assert offline.get("handoff", "h_mine") is not None
        assert offline.get("fact", "nope") is None
        assert offline.status()["actor_id"] == RECEIVER


def test_replica2_invalid_materialization_does_not_advance_cursor(
    api: Api, connect: Connect, tmp_path: Path
) -> None:
    writer, _ = connect(WRITER)
    sid = writer.create_session("bad batches").id
    with Replica(tmp_path / "r.sqlite") as replica:
        pull(writer, replica)
        before, cached = replica.cursor(), _cached(replica)
        writer.create_fact(sid, "one", fact_id="g1")
        writer.create_fact(sid, "two", fact_id="g2")
        batch = writer.changes_materialized(before)
        assert len(batch.entries) == 2
        first, second = batch.entries
        wrong_revision = second.model_copy(
            update={"resource": second.resource.model_copy(update={"revision": 7})}
        )
        wrong_kind = second.model_copy(update={"resource": first.resource})
        reordered = [second, first]
        bad_batches = [
            batch.model_copy(update={"entries": [first, wrong_revision]}),
            batch.model_copy(update={"entries": [first, wrong_kind]}),
            batch.model_copy(update={"entries": reordered}),
            batch.model_copy(update={"cursor": batch.cursor.model_copy(update={"after_seq": 0})}),
        ]
        for bad in bad_batches:
            with pytest.raises(ReplicaInvalid):
                replica.apply(bad)
            assert replica.cursor() == before and _cached(replica) == cached
        assert replica.apply(batch) == 2
        assert replica.cursor() == batch.next_cursor.after_seq


def test_replica3_scope_and_epoch_changes_require_explicit_reset(
    api: Api, connect: Connect, tmp_path: Path
) -> None:
    writer, _ = connect(WRITER)
    writer.create_session("pinned")
    who = writer.identity()
    with Replica(tmp_path / "r.sqlite") as replica:
        pull(writer, replica)
        cursor = replica.cursor()
        for what, changed in (
            ("scope", who.model_copy(update={"project_id": "another_project"})),
            ("scope", who.model_copy(update={"tenant_id": "another_tenant"})),
            ("epoch", who.model_copy(update={"project_epoch": "epoch_reimported"})),
            ("actor", who.model_copy(update={"actor_id": RECEIVER})),
        ):
            with pytest.raises(ReplicaMismatch) as refused:
                replica.check_identity(changed)
            assert refused.value.what == what and f"replica {what} mismatch" in str(refused.value)
            assert replica.cursor() == cursor
        receiver, _ = connect(RECEIVER)
        with pytest.raises(ReplicaMismatch):  # another actor's client
            pull(receiver, replica)
        assert replica.reset() > 0 and not replica.bootstrapped
        assert pull(receiver, replica).bootstrapped
        assert replica.status()["actor_id"] == RECEIVER


def test_replica3_legacy_replica_without_actor_requires_reset(
    api: Api, connect: Connect, tmp_path: Path
) -> None:
    writer, _ = connect(WRITER)
    who: Identity = writer.identity()
    path = tmp_path / "legacy.sqlite"
    with Replica(path):
        pass
    conn = sqlite3.connect(path)
    conn.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [("format", "1"), ("tenant_id", who.tenant_id), ("project_id", who.project_id),
         ("project_epoch", who.project_epoch), ("after_seq", "0")],
    )  # fmt: skip
    conn.commit()
    conn.close()
    with Replica(path) as replica:
        with pytest.raises(ReplicaMismatch) as refused:
            pull(writer, replica)
        assert (refused.value.what, refused.value.cached) == ("actor", None)
        replica.reset()
        assert pull(writer, replica).bootstrapped


def test_replica7_offline_search_ranks_as_the_server_at_the_cursor(
    api: Api, connect: Connect, tmp_path: Path
) -> None:
    writer, _ = connect(WRITER)
    sid = writer.create_session("replica search").id
    writer.create_fact(sid, "redis cluster timeout decision", fact_id="f_a")
    writer.create_fact(sid, "redis redis cache fallback", fact_id="f_b")
    writer.create_fact(sid, "nothing to see", fact_id="f_c")
    with Replica(tmp_path / "r.sqlite") as replica:
        pull(writer, replica)
        offline = replica.search("redis timeout")
        server = writer.search("redis timeout", mode="lexical")
        assert offline["index_seq"] == replica.cursor() == server.index_seq
        assert [(r["fact_id"], r["score"]) for r in offline["results"]] == [
            (r.fact_id, r.score) for r in server.results
        ]
        assert replica.search("redis", source_id="elsewhere")["results"] == []
