"""Export, import and tenant deletion on every backend (SPEC.md ARC-1..ARC-5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aidememo.conformance.harness import PROJECT, TENANT, Fixture
from aidememo.domain.clock import FixedClock, RandomIds
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.records import parse_create, parse_transition
from aidememo.http.app import HttpApp
from aidememo.http.pipeline import Admission
from aidememo.http.routes import resolve
from aidememo.http.types import Request
from aidememo.ports import Store
from aidememo.service.access import Caller
from aidememo.service.archive import Archive
from aidememo.service.ledger_reads import LedgerReads
from aidememo.service.typed_reads import SearchQuery, TypedReads
from aidememo.service.typed_writes import TypedWrites
from aidememo.stores.sqlite import SqliteStore
from tests import pg
from tests.conformance.conftest import BACKENDS, Backend


def _populate(fx: Fixture) -> None:
    """A history with every kind of row: raw puts and a delete, a session, facts (CJK too),
    and a completed handoff with its context."""
    fx.put("command_create", "a")
    fx.put("command_update", "b", expected=1)
    fx.delete("command_delete", expected=2)
    writes = TypedWrites(fx.ledger, 60_000)
    me, other = fx.actor, fx.other
    writes.create_session(
        me,
        PROJECT,
        parse_create(
            {"command_id": "c_s", "payload": {"session_id": "s1", "source_id": "src", "topic": "t"}}
        ),
    )
    writes.create_fact(
        me,
        PROJECT,
        parse_create(
            {
                "command_id": "c_f1",
                "payload": {"fact_id": "f1", "session_id": "s1", "content": "redis 서버가 멈췄다"},
            }
        ),
    )
    writes.create_context(
        me,
        PROJECT,
        parse_create(
            {
                "command_id": "c_x",
                "payload": {
                    "context_id": "x1",
                    "handoff_id": "h1",
                    "session_id": "s1",
                    "to_actor": other.actor_id,
                    "content": "why",
                },
            }
        ),
    )
    writes.send_handoff(
        me,
        PROJECT,
        parse_create(
            {
                "command_id": "c_h",
                "payload": {
                    "handoff_id": "h1",
                    "session_id": "s1",
                    "to_actor": other.actor_id,
                    "context_id": "x1",
                },
            }
        ),
    )
    writes.transition(
        other,
        PROJECT,
        "h1",
        "accept",
        parse_transition(
            {"command_id": "c_a", "expected_revision": 1, "payload": {"claim_id": "k1"}}
        ),
    )
    writes.create_fact(
        other,
        PROJECT,
        parse_create(
            {
                "command_id": "c_f2",
                "payload": {"fact_id": "f2", "session_id": "s1", "content": "fixed the cluster"},
            }
        ),
    )
    outcome = {"claim_id": "k1", "result_fact_id": "f2", "outcome": "succeeded"}
    request = {"command_id": "c_r", "expected_revision": 2, "payload": outcome}
    writes.transition(other, PROJECT, "h1", "return", parse_transition(request))


def _views(store: Store, caller: Caller) -> tuple[object, ...]:
    """Everything a client can observe, with the epoch taken out."""
    queries, lookups = LedgerReads(store), TypedReads(store, FixedClock(5_000))
    epoch = queries.identity(caller, PROJECT).project_epoch
    snap = queries.snapshot(caller, PROJECT)
    feed = queries.changes(caller, PROJECT, epoch, 0, 10_000)
    records = [(r.seq, r.ref, r.op, r.revision, r.actor_id, r.committed_at_ms, r.body)
               for r in feed.records]  # fmt: skip
    box = lookups.mailbox(caller, PROJECT, box="outbox", source_id=None,
                          include_completed=None, before_seq=None, limit=100)  # fmt: skip
    hits = lookups.search(caller, PROJECT, SearchQuery("서버 cluster", None, 10, None))
    audit = store.read(lambda tx: tx.list_audit(caller.scope(PROJECT)))
    receipts = store.read(lambda tx: tx.list_receipts(caller.scope(PROJECT)))
    return (snap.at_seq, snap.resources, records, feed.next_after_seq, box, hits.results,
            audit, receipts)  # fmt: skip


def _history_lines(lines: list[bytes]) -> list[bytes]:
    """The lines an import must reproduce: all but header, project (new epoch) and manifest."""
    skip = (b'"type":"header"', b'"type":"project"', b'"type":"manifest"')
    return [ln for ln in lines if not any(marker in ln for marker in skip)]


def _archive(store: Store) -> Archive:
    return Archive(store, FixedClock(5_000), RandomIds())


TARGETS = ["memory", "sqlite_file", "do_sql", "postgres_psycopg", "postgres_pg8000"]


@pytest.mark.parametrize("target", TARGETS)
def test_arc1_export_import_round_trip_is_identical_apart_from_epoch(
    backend: Backend, target: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    fx = Fixture.create(backend.open)
    _populate(fx)
    exported = list(_archive(fx.store).export_lines(TENANT, include_tokens=True))
    into = BACKENDS[target](tmp_path_factory.mktemp("into"))
    store = into.open()
    summary = _archive(store).import_lines(exported)
    assert summary.counts["change"] == 10 and set(summary.epochs) == {PROJECT}
    assert _views(store, fx.actor) == _views(fx.store, fx.actor)
    assert LedgerReads(store).identity(fx.actor, PROJECT).project_epoch != "epoch_fixture"
    # And back again: a second export of the import has the same body lines.
    again = list(_archive(store).export_lines(TENANT, include_tokens=True))
    assert _history_lines(again) == _history_lines(exported)
    store.close()
    for cleanup in into.cleanups:
        cleanup()
    fx.store.close()


def test_arc2_cursor_from_before_import_fails_closed(backend: Backend, tmp_path) -> None:  # type: ignore[no-untyped-def]
    fx = Fixture.create(backend.open)
    _populate(fx)
    lines = list(_archive(fx.store).export_lines(TENANT))
    target = SqliteStore.open_file(tmp_path / "t.sqlite")
    _archive(target).import_lines(lines)
    with pytest.raises(AidememoError) as err:
        LedgerReads(target).changes(fx.actor, PROJECT, "epoch_fixture", 0, 10)
    assert err.value.code is ErrorCode.CURSOR_EPOCH_MISMATCH
    # Without token digests the members exist but no token authenticates.
    assert target.read(lambda tx: tx.list_tokens(TENANT)) == []
    target.close()
    fx.store.close()


def test_arc2_import_refuses_tampering_and_existing_scopes(backend: Backend) -> None:
    fx = Fixture.create(backend.open)
    _populate(fx)
    lines = list(_archive(fx.store).export_lines(TENANT))
    tampered = [ln.replace(b'"role":"writer"', b'"role":"owner"') for ln in lines]
    assert tampered != lines
    for bad in (tampered, lines[:-1], lines[1:]):
        with pytest.raises(AidememoError) as err:
            _archive(fx.store).import_lines(bad)
        assert err.value.code is ErrorCode.INVALID_COMMAND
    with pytest.raises(AidememoError) as err:
        _archive(fx.store).import_lines(lines)  # the scope exists already
    assert err.value.code is ErrorCode.RESOURCE_ALREADY_EXISTS
    fx.store.close()


def test_arc3_project_export_carries_only_that_project(backend: Backend, tmp_path) -> None:  # type: ignore[no-untyped-def]
    fx = Fixture.create(backend.open)
    _populate(fx)
    fx.identity.bootstrap(tenant_id=TENANT, project_id="project_two", actor_id="loner")
    lines = list(_archive(fx.store).export_lines(TENANT, PROJECT))
    target = SqliteStore.open_file(tmp_path / "t.sqlite")
    summary = _archive(target).import_lines(lines)
    assert set(summary.epochs) == {PROJECT}
    assert [p.project_id for p in target.read(lambda tx: tx.list_projects(TENANT))] == [PROJECT]
    actors = {a.actor_id for a in target.read(lambda tx: tx.list_actors(TENANT))}
    assert actors == {fx.actor.actor_id, fx.other.actor_id}
    # Importing the other project later, next to the first, works: scopes are per project.
    rest = list(_archive(fx.store).export_lines(TENANT, "project_two"))
    assert _archive(target).import_lines(rest).epochs.keys() == {"project_two"}
    target.close()
    fx.store.close()


def test_arc4_delete_tenant_removes_every_row_and_only_that_tenant(backend: Backend) -> None:
    fx = Fixture.create(backend.open)
    _populate(fx)
    fx.identity.bootstrap(tenant_id="tenant_keep", project_id=PROJECT, actor_id="keeper",
                          token_sha256=bytes([9]) * 32)  # fmt: skip
    keep_before = fx.store.read(lambda tx: tx.count_tenant_rows("tenant_keep"))
    with pytest.raises(AidememoError):
        _archive(fx.store).delete_tenant(TENANT, confirm="tenant_other")
    removed = _archive(fx.store).delete_tenant(TENANT, confirm=TENANT)
    assert removed["changes"] == 10 and removed["fact_search"] == 2
    assert not any(fx.store.read(lambda tx: tx.count_tenant_rows(TENANT)).values())
    assert fx.store.read(lambda tx: tx.count_tenant_rows("tenant_keep")) == keep_before
    assert fx.identity.authenticate(bytes([9]) * 32) == Caller("tenant_keep", "keeper")
    fx.store.close()


def _no_epoch(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_epoch(v) for k, v in value.items() if k != "project_epoch"}
    if isinstance(value, list):
        return [_no_epoch(v) for v in value]
    return value


def _http_views(store: Store, caller: Caller) -> tuple[str, dict[str, Any]]:
    """The project's epoch, and what its members read over HTTP with every epoch taken out:
    snapshot, change feed, materialized feed, mailboxes, search and a handoff."""
    app = HttpApp(store, clock=FixedClock(5_000))
    base = f"/v1/projects/{PROJECT}"

    def get(path: str, query: str = "", as_: Caller = caller) -> Any:
        match = resolve("GET", base + path)
        assert match.route is not None
        admission = Admission(match.route, match.params, as_)
        response = app.serve(admission, Request("GET", base + path, query))
        assert response.status == 200, response.body
        return json.loads(response.body)

    epoch = get("/identity")["project_epoch"]
    feed = f"project_epoch={epoch}&after_seq=0&limit=10000"
    seen = {
        "snapshot": get("/snapshot"),
        "changes": get("/changes", feed),
        "materialized": get("/changes/materialized", feed),
        "outbox": get("/handoffs", "box=outbox"),
        "search": get("/search", "q=%EC%84%9C%EB%B2%84%20cluster"),
        "handoff": get("/handoffs/h1"),
    }
    return epoch, _no_epoch(seen)


@pytest.mark.postgres
@pytest.mark.parametrize("driver", pg.DRIVERS)
def test_arc5_drill_postgres_to_sqlite_and_back_into_a_fresh_postgres(
    driver: str, tmp_path: Path
) -> None:
    """Issue 4 item 6: export from PostgreSQL, import into SQLite, export again and import into
    a fresh PostgreSQL schema; snapshots and materialized feeds are identical apart from the
    epoch at every step, and the last export carries the first one's history."""
    source = BACKENDS[f"postgres_{driver}"](tmp_path / "source")
    back = BACKENDS[f"postgres_{driver}"](tmp_path / "back")
    middle = SqliteStore.open_file(tmp_path / "middle.sqlite")
    try:
        fx = Fixture.create(source.open)
        _populate(fx)
        epoch0, views0 = _http_views(fx.store, fx.actor)
        first = list(_archive(fx.store).export_lines(TENANT, include_tokens=True))
        _archive(middle).import_lines(first)
        epoch1, views1 = _http_views(middle, fx.actor)
        second = list(_archive(middle).export_lines(TENANT, include_tokens=True))
        assert _history_lines(second) == _history_lines(first)
        store = back.open()
        _archive(store).import_lines(second)
        epoch2, views2 = _http_views(store, fx.actor)
        assert views1 == views0 and views2 == views0
        assert views0["materialized"]["entries"] and views0["snapshot"]["resources"]
        assert len({epoch0, epoch1, epoch2}) == 3
        third = list(_archive(store).export_lines(TENANT, include_tokens=True))
        assert _history_lines(third) == _history_lines(first)
        tokens = store.read(lambda tx: tx.list_tokens(TENANT))
        assert tokens == fx.store.read(lambda tx: tx.list_tokens(TENANT))
    finally:
        middle.close()
        for backend in (back, source):
            for cleanup in backend.cleanups:
                cleanup()
