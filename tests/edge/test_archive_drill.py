"""Export, import and tenant deletion through the edge (ADM-3, ARC-*): edge -> SQLite origin
-> edge, with the same records and the same deletion counts at every step, and the export and
import pages between Worker and objects kept at or under 1 MiB."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from aidememo.http.app import HttpApp
from aidememo.http.types import Request
from aidememo.stores.sqlite import SqliteStore
from aidememo.stores.sqlite.archive import TENANT_TABLES
from tests.contract.support import (
    HERMES,
    OTHER_PROJECT,
    OUTSIDER,
    PROJECT,
    READER,
    RECEIVER,
    TENANT,
    WRITER,
    Api,
    P,
)
from tests.edge.archive_support import (
    ADMIN,
    NDJSON,
    PAGE_LIMIT,
    export_tenant,
    normal,
    runtime,
)
from tests.edge.backend import EdgeIdentity
from tests.edge.runtime import EdgeClient, Runtime
from tests.edge.runtime.streams import StreamAborted


@pytest.fixture
def edge_a(tmp_path: Path, clock: FixedClock) -> Iterator[Runtime]:
    rt = runtime(tmp_path / "a", clock)
    yield rt
    rt.close()


def _populate(rt: Runtime, clock: FixedClock) -> Api:
    """Two projects, five actors, every kind of row, a revoked token."""
    api = Api("edge", EdgeClient(rt), EdgeIdentity(rt), clock)  # type: ignore[arg-type]
    for actor in (WRITER, RECEIVER, HERMES):
        api.provision(actor, Role.WRITER)
    api.provision(READER, Role.READER)
    api.provision(OUTSIDER, Role.WRITER, project_id=OTHER_PROJECT, epoch=None)
    api.session("s1")
    api.fact("f1", "s1", "redis 서버가 멈췄다")
    api.fact("f2", "s1", "cache fallback decided")
    sent = api.send("h1", "s1", RECEIVER).expect(200)
    api.transition("h1", "accept", {"claim_id": "c1"}, sent["revision"]).expect(200)
    api.fact("f3", "s1", "receiver finished", as_=RECEIVER)
    api.transition(
        "h1",
        "return",
        {"claim_id": "c1", "result_fact_id": "f3", "outcome": "succeeded"},
        sent["revision"] + 1,
    ).expect(200)
    api.put_note("n1", {"text": "kept"}).expect(200)
    api.put_note("n2", {"text": "deleted"}).expect(200)
    gone = {
        "command_id": "cmd_del_n2",
        "project_id": PROJECT,
        "expected_revision": 1,
        "operation": "resource.delete",
        "resource": {"kind": "custom.note", "id": "n2"},
        "change": "delete",
        "payload": None,
    }
    api.post("/v1/commands", gone).expect(200)
    clock.advance(1_000)
    api.identity.revoke_token(hashlib.sha256(api.tokens[HERMES].encode()).digest())
    return api


class Origin:
    """A SQLite origin with the admin token: the other side of the drill."""

    def __init__(self, path: Path, clock: FixedClock) -> None:
        self.store = SqliteStore.open_file(path)
        self.app = HttpApp(
            self.store, clock=clock, admin_token_sha256=hashlib.sha256(ADMIN.encode()).digest()
        )

    def call(self, method: str, path: str, query: str = "", body: bytes = b"") -> Any:
        headers = {"authorization": f"Bearer {ADMIN}"}
        if body:
            headers["content-type"] = NDJSON
        response = self.app.dispatch(Request(method, path, query, headers, body))
        assert response.status == 200, response.body
        return response.body


def _tenant_rows(rt: Runtime) -> dict[str, int]:
    """Rows of any tenant left in any object of the deployment, by object and table."""
    left: dict[str, int] = {}
    for binding, ns in rt.namespaces.items():
        for name in ns.names():
            conn = ns.storages[name]._conn
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema")}
            for table in (*TENANT_TABLES, "fact_search"):
                if table in tables:
                    (n,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                    if n:
                        left[f"{binding}:{name}:{table}"] = n
    return left


def test_arc5_drill_edge_to_sqlite_origin_to_edge(
    tmp_path: Path, clock: FixedClock, edge_a: Runtime
) -> None:
    api = _populate(edge_a, clock)
    first = export_tenant(edge_a)
    kinds = {r["type"] for r in normal(first)}
    assert kinds == {
        "header", "actor", "project", "membership", "token", "resource", "change", "receipt",
        "audit",
    }  # fmt: skip

    # edge -> SQLite origin: the same records come back out.
    origin = Origin(tmp_path / "origin.sqlite", clock)
    imported = json.loads(origin.call("POST", "/v1/admin/import", body=first))
    assert imported["tenant_id"] == TENANT
    from_origin = origin.call(
        "GET", f"/v1/admin/tenants/{TENANT}/export", "include_token_digests=true"
    )
    assert normal(from_origin) == normal(first)

    # SQLite origin -> a fresh edge: the same records again, and the data is live there.
    edge_b = runtime(tmp_path / "b", clock)
    try:
        status, _, summary = edge_b.admin("POST", "/v1/admin/import", body=from_origin,
                                          content_type=NDJSON)  # fmt: skip
        assert status == 200, summary
        assert summary["counts"] == imported["counts"]
        assert set(summary["project_epochs"]) == {PROJECT, OTHER_PROJECT}
        assert normal(export_tenant(edge_b)) == normal(first)
        client = EdgeClient(edge_b)
        status, _, found = client.request(
            "GET", f"{P}/search", token=api.tokens[WRITER], query={"q": "redis"}
        )
        assert status == 200 and [r["fact_id"] for r in found["results"]] == ["f1"]
        status, _, inbox = client.request(
            "GET",
            f"{P}/handoffs",
            token=api.tokens[RECEIVER],
            query={"box": "inbox", "include_completed": "true"},
        )
        assert status == 200, inbox
        assert [a["record"]["handoff_id"] for a in inbox["assignments"]] == ["h1"]
        assert client.request("GET", f"{P}/identity", token=api.tokens[HERMES])[0] == 401

        # Importing the same tenant again is refused, and changes nothing.
        status, _, body = edge_b.admin("POST", "/v1/admin/import", body=from_origin,
                                       content_type=NDJSON)  # fmt: skip
        assert (status, body["error"]["code"]) == (409, "resource_already_exists")

        # Deletion: every object emptied, the same counts as the origin's deletion.
        status, _, deleted = edge_b.admin("DELETE", f"/v1/admin/tenants/{TENANT}?confirm={TENANT}")
        assert status == 200, deleted
        origin_deleted = json.loads(
            origin.call("DELETE", f"/v1/admin/tenants/{TENANT}", f"confirm={TENANT}")
        )
        assert deleted == origin_deleted
        assert _tenant_rows(edge_b) == {}
        status, _, body = edge_b.admin("GET", f"/v1/admin/tenants/{TENANT}/export")
        assert (status, body["error"]["code"]) == (404, "resource_not_found")
        clock.advance(30_000)  # past the token cache window
        status, _, body = client.request("GET", f"{P}/identity", token=api.tokens[WRITER])
        assert (status, body["error"]["code"]) == (401, "authentication_failed")
        status, _, body = edge_b.admin("DELETE", f"/v1/admin/tenants/{TENANT}?confirm={TENANT}")
        assert status == 404

        # And the tenant can come back from the same export.
        status, _, _ = edge_b.admin("POST", "/v1/admin/import", body=from_origin,
                                    content_type=NDJSON)  # fmt: skip
        assert status == 200
        assert client.request("GET", f"{P}/identity", token=api.tokens[WRITER])[0] == 200
    finally:
        edge_b.close()


def test_arc1_arc4_project_export_and_deletion_checks(edge_a: Runtime, clock: FixedClock) -> None:
    _populate(edge_a, clock)
    status, _, body = edge_a.admin(
        "GET", f"/v1/admin/tenants/{TENANT}/export?project_id={OTHER_PROJECT}"
    )
    assert status == 200
    records = normal(body)
    assert {r["project_id"] for r in records if r["type"] == "project"} == {OTHER_PROJECT}
    assert {r["actor_id"] for r in records if r["type"] == "actor"} == {OUTSIDER}
    status, _, body = edge_a.admin("GET", f"/v1/admin/tenants/{TENANT}/export?project_id=nope")
    assert (status, body["error"]["code"]) == (404, "resource_not_found")
    status, _, body = edge_a.admin("DELETE", f"/v1/admin/tenants/{TENANT}?confirm=other")
    assert (status, body["error"]["code"]) == (400, "invalid_command")
    status, _, body = edge_a.admin("DELETE", "/v1/admin/tenants/nobody?confirm=nobody")
    assert (status, body["error"]["code"]) == (404, "resource_not_found")


def test_arc7_pages_between_worker_and_objects_stay_under_1_mib(
    tmp_path: Path, clock: FixedClock, edge_a: Runtime
) -> None:
    api = Api("edge", EdgeClient(edge_a), EdgeIdentity(edge_a), clock)  # type: ignore[arg-type]
    api.provision(WRITER, Role.WRITER)
    api.session("s1")
    for n in range(40):
        api.fact(f"f{n}", "s1", f"fact {n} " + "x" * 60_000)
    pages: list[int] = []
    projects = edge_a.namespaces["PROJECTS"]
    original = projects.cls.export_page

    async def spy(self: Any, export_id: Any, number: Any) -> Any:
        answer = await original(self, export_id, number)
        pages.append(sum(len(text.encode()) for _, _, text in answer["ok"]))
        return answer

    projects.cls.export_page = spy
    export = export_tenant(edge_a)
    assert len(export) > 4 * PAGE_LIMIT
    assert len(pages) >= 4 and max(pages) <= PAGE_LIMIT

    edge_b = runtime(tmp_path / "b", clock)
    try:
        received: list[int] = []
        ns = edge_b.namespaces["PROJECTS"]
        original_import = ns.cls.import_page

        async def spy_import(self: Any, import_id: Any, text: Any) -> Any:
            received.append(len(str(text).encode()))
            return await original_import(self, import_id, text)

        ns.cls.import_page = spy_import
        status, _, _ = edge_b.admin("POST", "/v1/admin/import", body=export, content_type=NDJSON)
        assert status == 200
        assert len(received) >= 4 and max(received) <= PAGE_LIMIT
        assert normal(export_tenant(edge_b)) == normal(export)
    finally:
        edge_b.close()


def test_arc8_abandoned_export_snapshot_is_dropped_by_the_alarm(
    edge_a: Runtime, clock: FixedClock
) -> None:
    _populate(edge_a, clock)
    stub = edge_a.env.PROJECTS.getByName(f"{TENANT}/{PROJECT}")
    begun = edge_a.run(stub.export_begin({"tenant_id": TENANT, "project_id": PROJECT}))["ok"]
    assert begun["pages"] == 1
    assert edge_a.fire_alarms() == 0  # not yet due
    clock.advance(10 * 60 * 1000)
    assert edge_a.fire_alarms() == 1
    answer = edge_a.run(stub.export_page(begun["export_id"], 0))
    assert answer["error"]["code"] == "storage_failure"


def test_arc7_export_failing_after_its_status_aborts_the_stream(
    edge_a: Runtime, clock: FixedClock
) -> None:
    """A page that cannot be read once the 200 went out aborts the body: the client sees a
    read error, never a short export that looks whole (it would lack the manifest)."""
    _populate(edge_a, clock)
    projects = edge_a.namespaces["PROJECTS"]

    async def gone(self: Any, export_id: Any, number: Any) -> Any:
        return {"error": {"code": "storage_failure", "message": "export snapshot is gone"}}

    projects.cls.export_page = gone
    with pytest.raises(StreamAborted, match="export snapshot is gone"):
        edge_a.admin("GET", f"/v1/admin/tenants/{TENANT}/export")
