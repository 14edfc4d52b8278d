"""A project object's export and import stages live in its own SQLite, not in its memory
(SPEC.md ARC-8, with ARC-1, ARC-2 and ARC-4 at the edge).

The object's table `aidememo_staging` (`durable_objects.staging`) holds a snapshot's pages and
a staged import's spec and pages between the RPC calls of a transfer; the object holds about
one page at a time, whatever the project's size. These tests run through the edge runtime
double: a multi-page project exported and imported with the object evicted between calls
(so every page comes from the table), the Python memory an export and a commit take, a
refused commit, `import_abort`, the alarm and tenant deletion.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.model import Role
from aidememo.stores.sqlite.archive import TENANT_TABLES
from aidememo.stores.sqlite.schema import SCHEMA_VERSION
from tests.contract.support import PROJECT, RECEIVER, TENANT, WRITER, Api
from tests.edge.archive_support import (
    NDJSON,
    PAGE_LIMIT,
    STAGING,
    START_MS,
    export_tenant,
    normal,
)
from tests.edge.backend import EdgeIdentity
from tests.edge.runtime import EdgeClient, Runtime
from tests.edge.runtime.objects import Namespace

STAGE_TTL_MS = 10 * 60 * 1000  # durable_objects.project.STAGE_TTL_MS
NAME = f"{TENANT}/{PROJECT}"
FACTS = 64
FACT_BYTES = 60_000  # close to the 64 KiB content limit: several MiB in all
NOTES = 48
NOTE_BYTES = 100_000


def _api(rt: Runtime, clock: FixedClock) -> Api:
    api = Api("edge", EdgeClient(rt), EdgeIdentity(rt), clock)  # type: ignore[arg-type]
    api.provision(WRITER, Role.WRITER)
    api.provision(RECEIVER, Role.WRITER)
    return api


def _small(rt: Runtime, clock: FixedClock) -> Api:
    """A project with a session, a fact and a handoff (one page)."""
    api = _api(rt, clock)
    api.session("s1")
    api.fact("f1", "s1", "redis 서버가 멈췄다")
    api.send("h1", "s1", RECEIVER).expect(200)
    return api


def _large(rt: Runtime, clock: FixedClock) -> Api:
    """A project of several MiB: big facts (search rows), a handoff taken and returned
    (mailbox rows), a deleted note (a tombstone)."""
    api = _small(rt, clock)
    for n in range(FACTS):
        api.fact(f"big{n:03}", "s1", f"fact {n} " + "x" * FACT_BYTES)
    api.transition("h1", "accept", {"claim_id": "c1"}, 1).expect(200)
    api.put_note("n1", {"text": "kept"}).expect(200)
    return api


def _stub(rt: Runtime) -> Any:
    return rt.env.PROJECTS.getByName(NAME)


def _projects(rt: Runtime) -> Namespace:
    return rt.namespaces["PROJECTS"]


def _conn(rt: Runtime, name: str = NAME) -> sqlite3.Connection:
    conn: sqlite3.Connection = _projects(rt).storages[name]._conn
    return conn


def _tables(rt: Runtime, name: str = NAME) -> set[str]:
    rows = _conn(rt, name).execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
    return {r[0] for r in rows}


def _staged(rt: Runtime, name: str = NAME) -> list[tuple[str, int]]:
    """The staging table's rows as (kind, page number), or [] when the table is gone."""
    if STAGING not in _tables(rt, name):
        return []
    rows = _conn(rt, name).execute(f"SELECT kind, number FROM {STAGING} ORDER BY kind, number")
    return [(str(kind), int(number)) for kind, number in rows]


def _tenant_rows(rt: Runtime, name: str = NAME) -> int:
    tables = _tables(rt, name)
    conn = _conn(rt, name)
    return sum(
        conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in (*TENANT_TABLES, "fact_search")
        if t in tables
    )


def _wrap(
    ns: Namespace,
    method: str,
    after: Callable[[Any, tuple[Any, ...]], None] | None = None,
    around: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]] | None = None,
) -> None:
    """Replace an RPC method of the namespace's class: `around` runs the call, `after` sees
    its answer."""
    original = getattr(ns.cls, method)

    async def spy(self: Any, *args: Any) -> Any:
        def call() -> Awaitable[Any]:
            result: Awaitable[Any] = original(self, *args)
            return result

        answer = await (around(call) if around is not None else call())
        if after is not None:
            after(answer, args)
        return answer

    setattr(ns.cls, method, spy)


async def _traced(call: Callable[[], Awaitable[Any]], peaks: list[int]) -> Any:
    """Run an RPC call under tracemalloc and record the peak of Python memory it took."""
    tracemalloc.start()
    try:
        return await call()
    finally:
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


def test_arc8_multi_page_project_moves_through_the_staging_table(
    rt: Runtime, other: Runtime, clock: FixedClock
) -> None:
    """Export: the snapshot's pages wait in the object's SQLite (the object is evicted after
    `export_begin` and after every page, so each page is read from the table there) and the
    last page drops them. Import: each page is appended to the table, the object is evicted
    after every page, and the commit reads them back; the data arrives whole."""
    api = _large(rt, clock)
    projects = _projects(rt)
    staged_pages: list[int] = []

    def evict_after_begin(answer: Any, args: tuple[Any, ...]) -> None:
        staged_pages.append(len([n for kind, n in _staged(rt) if kind == "export" and n >= 0]))
        projects.evict(NAME)

    _wrap(projects, "export_begin", after=evict_after_begin)
    _wrap(projects, "export_page", after=lambda answer, args: projects.evict(NAME))
    export = export_tenant(rt)
    assert len(export) > 6 * PAGE_LIMIT
    assert staged_pages[0] >= 6  # the pages were in the table before the first page call
    assert _staged(rt) == [] and STAGING not in _tables(rt)  # the last page dropped them

    target = _projects(other)
    pages: list[int] = []

    def evict_after_page(answer: Any, args: tuple[Any, ...]) -> None:
        assert "ok" in answer, answer
        pages.append(len([n for kind, n in _staged(other) if kind == "import" and n >= 0]))
        target.evict(NAME)

    _wrap(target, "import_page", after=evict_after_page)
    status, _, summary = other.admin("POST", "/v1/admin/import", body=export, content_type=NDJSON)
    assert status == 200, summary
    assert len(pages) >= 6 and pages == list(range(1, len(pages) + 1))
    assert _staged(other) == [] and STAGING not in _tables(other)  # the commit dropped them
    assert normal(export_tenant(other)) == normal(export)
    # The rebuilt index rows work: search and the receiver's inbox, with the exported tokens.
    client = EdgeClient(other)
    status, _, found = client.request(
        "GET", f"/v1/projects/{PROJECT}/search", token=api.tokens[WRITER], query={"q": "redis"}
    )
    assert status == 200 and [r["fact_id"] for r in found["results"]] == ["f1"]
    status, _, inbox = client.request(
        "GET", f"/v1/projects/{PROJECT}/handoffs", token=api.tokens[RECEIVER],
        query={"box": "inbox"},
    )  # fmt: skip
    assert status == 200 and [a["record"]["handoff_id"] for a in inbox["assignments"]] == ["h1"]


def test_arc8_export_and_commit_memory_stays_near_one_page(
    rt: Runtime, other: Runtime, clock: FixedClock
) -> None:
    """The Python memory `export_begin` and `import_commit` allocate stays near one page
    (the page, its lines and one read of rows) while the project's rows are far larger; the
    snapshot and the staged import used to be held whole. Notes, not facts: the tokenizer's
    own transient memory per fact (several MiB for 60 KB of text) would hide the pages'."""
    api = _api(rt, clock)
    for n in range(NOTES):
        api.put_note(f"note{n:03}", {"text": f"note {n} " + "y" * NOTE_BYTES}).expect(200)
    peaks: dict[str, list[int]] = {"export_begin": [], "import_commit": []}
    for ns in (_projects(rt), _projects(other)):
        for method, seen in peaks.items():
            _wrap(ns, method, around=lambda call, seen=seen: _traced(call, seen))  # type: ignore[misc]
    export = export_tenant(rt)
    status, _, summary = other.admin("POST", "/v1/admin/import", body=export, content_type=NDJSON)
    assert status == 200, summary
    assert normal(export_tenant(other)) == normal(export)
    rows = sum(len(line) for line in export.splitlines() if b'"project_id"' in line)
    assert rows > 8 * PAGE_LIMIT
    assert len(peaks["export_begin"]) == 2 and len(peaks["import_commit"]) == 1
    for method, seen in peaks.items():
        assert max(seen) < 5 * PAGE_LIMIT, (method, seen, rows)


def _identity(head: int) -> list[dict[str, Any]]:
    return [
        {"type": "actor", "actor_id": WRITER, "kind": "agent"},
        {"type": "project", "project_id": PROJECT, "project_epoch": "e0", "head_seq": head},
        {
            "type": "membership",
            "project_id": PROJECT,
            "actor_id": WRITER,
            "role": "writer",
            "status": "active",
        },
    ]


def _change(seq: int) -> str:
    record = {
        "type": "change",
        "project_id": PROJECT,
        "seq": seq,
        "kind": "custom.note",
        "id": f"n{seq}",
        "operation": "upsert",
        "revision": 1,
        "actor_id": WRITER,
        "committed_at_ms": START_MS + seq,
        "body": {"text": seq},
    }
    return json.dumps(record) + "\n"


def _begin(rt: Runtime, import_id: str, head: int) -> None:
    spec = {
        "import_id": import_id,
        "tenant_id": TENANT,
        "project_id": PROJECT,
        "project_epoch": "epoch_imported",
        "identity": _identity(head),
    }
    assert rt.run(_stub(rt).import_begin(spec)) == {"ok": None}


def test_arc2_refused_commit_writes_nothing_and_drops_the_stage(rt: Runtime) -> None:
    """A change log with a gap (1, 3 of head 3) is refused at the commit: no row of the
    project is written, the stage is gone, and a second commit finds nothing."""
    _begin(rt, "imp1", 3)
    stub = _stub(rt)
    assert rt.run(stub.import_page("imp1", _change(1))) == {"ok": None}
    assert rt.run(stub.import_page("imp1", _change(3))) == {"ok": None}
    assert _staged(rt) == [("import", -1), ("import", 0), ("import", 1)]
    answer = rt.run(stub.import_commit("imp1"))
    assert answer["error"]["code"] == "invalid_command"
    assert "not dense" in answer["error"]["message"]
    assert _tenant_rows(rt) == 0
    assert STAGING not in _tables(rt)
    answer = rt.run(stub.import_commit("imp1"))
    assert answer["error"] == {
        "code": "storage_failure",
        "message": "staged import is gone; start again",
    }
    # The same project, staged right, commits.
    _begin(rt, "imp2", 2)
    assert rt.run(stub.import_page("imp2", _change(1) + _change(2))) == {"ok": None}
    assert rt.run(stub.import_commit("imp2")) == {"ok": {"head_seq": 2}}
    assert _tenant_rows(rt) > 0 and STAGING not in _tables(rt)


def test_arc8_a_page_over_one_mib_is_staged_in_parts(rt: Runtime) -> None:
    """workerd caps a value at 2 MB; a page of one line longer than 1 MiB (ARC-6 allows lines
    up to 8 MiB) is kept in parts of at most 1 MiB and read back whole."""
    stub = _stub(rt)
    _begin(rt, "imp1", 1)
    line = json.loads(_change(1))
    line["body"] = {"text": "서" * 600_000}  # 1.8 MB of UTF-8 in one line
    text = json.dumps(line, ensure_ascii=False) + "\n"
    assert rt.run(stub.import_page("imp1", text)) == {"ok": None}
    sizes = _conn(rt).execute(
        f"SELECT part, length(body) FROM {STAGING} WHERE number = 0 ORDER BY part"
    )
    parts = list(sizes)
    assert [p for p, _ in parts] == [0, 1] and all(n <= PAGE_LIMIT for _, n in parts)
    assert rt.run(stub.import_commit("imp1")) == {"ok": {"head_seq": 1}}
    body = _conn(rt).execute("SELECT body FROM changes WHERE seq = 1").fetchone()[0]
    assert json.loads(body) == line["body"]


def test_arc8_import_abort_drops_the_stage_and_is_idempotent(rt: Runtime) -> None:
    stub = _stub(rt)
    _begin(rt, "imp1", 1)
    assert rt.run(stub.import_page("imp1", _change(1))) == {"ok": None}
    assert _staged(rt) == [("import", -1), ("import", 0)]
    assert rt.run(stub.import_abort("imp1")) == {"ok": None}
    assert _tables(rt) == set()  # a fresh object: nothing left, not even the table
    assert rt.run(stub.import_abort("imp1")) == {"ok": None}
    assert rt.run(stub.import_abort("never-staged")) == {"ok": None}
    for answer in (
        rt.run(stub.import_page("imp1", _change(1))),
        rt.run(stub.import_commit("imp1")),
    ):
        assert answer["error"] == {
            "code": "storage_failure",
            "message": "staged import is gone; start again",
        }
    assert _tables(rt) == set()


def test_arc8_import_begin_checks_its_spec(rt: Runtime) -> None:
    stub = _stub(rt)
    spec = {
        "import_id": "imp1",
        "tenant_id": TENANT,
        "project_id": PROJECT,
        "project_epoch": "e1",
        "identity": _identity(0),
    }
    for bad in ({**spec, "import_id": "a b"}, {**spec, "identity": "x"}, {}):
        answer = rt.run(stub.import_begin(bad))
        assert answer["error"]["code"] in ("invalid_identifier", "invalid_command"), answer
    assert _tables(rt) == set()


def test_arc8_alarm_drops_stages_left_behind(rt: Runtime, clock: FixedClock) -> None:
    """A Worker that gave up leaves a snapshot and a staged import; they survive an eviction,
    and the alarm drops them once they are `STAGE_TTL_MS` old."""
    _large(rt, clock)
    stub = _stub(rt)
    begun = rt.run(stub.export_begin({"tenant_id": TENANT, "project_id": PROJECT}))["ok"]
    assert begun["pages"] >= 3
    _begin(rt, "imp1", 1)
    assert rt.run(stub.import_page("imp1", _change(1))) == {"ok": None}
    rows_before = _tenant_rows(rt)
    _projects(rt).evict(NAME)
    clock.advance(STAGE_TTL_MS - 1)
    assert rt.fire_alarms() == 0  # not yet due
    page = rt.run(stub.export_page(begun["export_id"], 1))["ok"]  # read after the eviction
    assert page[0][0] in ("resource", "change")
    clock.advance(1)
    assert rt.fire_alarms() == 1
    assert STAGING not in _tables(rt)
    assert _tenant_rows(rt) == rows_before  # only the stages went
    answer = rt.run(stub.export_page(begun["export_id"], 2))
    assert answer["error"] == {
        "code": "storage_failure",
        "message": "export snapshot is gone; start again",
    }
    assert rt.run(stub.import_commit("imp1"))["error"]["code"] == "storage_failure"


def test_arc1_export_begin_failing_half_way_stages_nothing(
    rt: Runtime, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot is staged in one transaction: a failure after some pages leaves no stage
    (and no table), and the next export works."""
    _large(rt, clock)
    project = sys.modules["durable_objects.project"]
    packed = project.iter_packed

    def failing(lines: Any) -> Iterator[Any]:
        pages = packed(lines)
        yield next(pages)
        yield next(pages)
        raise fail(ErrorCode.STORAGE_FAILURE, "disk full")

    monkeypatch.setattr(project, "iter_packed", failing)
    answer = rt.run(_stub(rt).export_begin({"tenant_id": TENANT, "project_id": PROJECT}))
    assert answer["error"] == {"code": "storage_failure", "message": "disk full"}
    assert STAGING not in _tables(rt)
    monkeypatch.setattr(project, "iter_packed", packed)
    assert b'"type":"manifest"' in export_tenant(rt)
    assert STAGING not in _tables(rt)


def test_arc8_empty_project_export_stages_nothing(rt: Runtime) -> None:
    EdgeIdentity(rt).bootstrap(
        tenant_id=TENANT, project_id=PROJECT, actor_id=WRITER, token_sha256=bytes(32)
    )
    begun = rt.run(_stub(rt).export_begin({"tenant_id": TENANT, "project_id": PROJECT}))["ok"]
    assert (begun["pages"], begun["head_seq"]) == (0, 0)
    assert STAGING not in _tables(rt)


def test_arc4_delete_tenant_drops_staged_rows(rt: Runtime, clock: FixedClock) -> None:
    """Tenant deletion drops the project's stages too (they are not counted: staged rows are
    not tenant rows), and so does the deletion RPC on an object that was never provisioned
    but holds a staged import."""
    _small(rt, clock)
    stub = _stub(rt)
    rt.run(stub.export_begin({"tenant_id": TENANT, "project_id": PROJECT}))
    _begin(rt, "imp1", 1)
    assert {kind for kind, _ in _staged(rt)} == {"export", "import"}
    status, _, deleted = rt.admin("DELETE", f"/v1/admin/tenants/{TENANT}?confirm={TENANT}")
    assert status == 200, deleted
    assert STAGING not in _tables(rt) and _tenant_rows(rt) == 0
    assert STAGING not in deleted["removed"]

    fresh = rt.env.PROJECTS.getByName(f"{TENANT}/fresh")
    spec = {
        "import_id": "imp2",
        "tenant_id": TENANT,
        "project_id": "fresh",
        "project_epoch": "e1",
        "identity": [],
    }
    assert rt.run(fresh.import_begin(spec)) == {"ok": None}
    assert _tables(rt, f"{TENANT}/fresh") == {STAGING}
    assert rt.run(fresh.delete_tenant(TENANT)) == {"ok": {"removed": {}, "left": {}}}
    assert _tables(rt, f"{TENANT}/fresh") == set()


def test_arc8_staging_table_is_outside_the_schema(rt: Runtime, clock: FixedClock) -> None:
    """While something is staged the object still wakes on its schema (version check,
    migrations) and answers requests; its name is one workerd allows."""
    api = _small(rt, clock)
    rt.run(_stub(rt).export_begin({"tenant_id": TENANT, "project_id": PROJECT}))
    assert STAGING in _tables(rt) and not STAGING.startswith(("_cf_", "sqlite_"))
    assert STAGING not in TENANT_TABLES
    _projects(rt).evict(NAME)
    assert api.get(f"/v1/projects/{PROJECT}/identity").expect(200)["project_id"] == PROJECT
    versions = _conn(rt).execute("SELECT version FROM aidememo_schema").fetchall()
    assert versions == [(SCHEMA_VERSION,)]
