"""The Worker streams export and import bodies (SPEC.md ARC-6, ARC-7).

An isolate has 128 MB and a body may be 256 MiB, so the Worker reads an import chunk by chunk
and stages each project's rows in its object before anything is written, and writes an export
to the response as the objects' pages arrive. These tests run through the edge runtime
double: the Python memory a whole export and a whole import take stays near a page while the
body is many pages; a refused import (its manifest, or a check at the end) writes nothing and
leaves no stage in any object; a body cut into chunks of any size imports the same.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from tests.contract.support import OTHER_PROJECT, PROJECT, RECEIVER, TENANT, WRITER, Api
from tests.edge.archive_support import (
    ADMIN,
    NDJSON,
    PAGE_LIMIT,
    STAGING,
    export_tenant,
    normal,
    runtime,
)
from tests.edge.backend import EdgeIdentity
from tests.edge.runtime import EdgeClient, Runtime, streams
from tests.edge.runtime.harness import BASE_URL, Context
from tests.edge.runtime.workers_module import Request

NOTES = 64
NOTE_BYTES = 100_000  # with its change line, about 200 KB of export per note


def _api(rt: Runtime, clock: FixedClock) -> Api:
    api = Api("edge", EdgeClient(rt), EdgeIdentity(rt), clock)  # type: ignore[arg-type]
    api.provision(WRITER, Role.WRITER)
    api.provision(RECEIVER, Role.WRITER)
    api.session("s1")
    api.fact("f1", "s1", "redis 서버가 멈췄다")
    return api


def _import(rt: Runtime, body: bytes) -> tuple[int, Any]:
    status, _, answer = rt.admin("POST", "/v1/admin/import", body=body, content_type=NDJSON)
    return status, answer


def _stages(rt: Runtime) -> int:
    """Staged rows left in every project object of the runtime."""
    ns = rt.namespaces["PROJECTS"]
    left = 0
    for name in ns.names():
        conn: sqlite3.Connection = ns.storages[name]._conn
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")}
        if STAGING in tables:
            left += conn.execute(f"SELECT count(*) FROM {STAGING}").fetchone()[0]
    return int(left)


def _fetch_streamed(rt: Runtime, method: str, path: str, body: bytes) -> tuple[int, str, int]:
    """One admin request whose answer is read chunk by chunk, as a client would, keeping
    none of it: `(status, SHA-256 of the body, peak Python memory of the whole request)`.
    The request body was allocated before tracing starts, as the runtime holds it."""
    headers = {"authorization": f"Bearer {ADMIN}"}
    if body:
        headers["content-type"] = NDJSON
    request = Request(BASE_URL + path, method, headers, body)
    worker = rt.Default(Context(), rt.env)
    digest = hashlib.sha256()

    async def run() -> int:
        response = await worker.fetch(request)
        if response.stream is not None:
            async for chunk in response.stream:
                digest.update(chunk.to_bytes())
        else:
            digest.update(response.body)
        return int(response.status)

    tracemalloc.start()
    try:
        status = rt.run(run())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return status, digest.hexdigest(), peak


def _transfer_peaks(tmp: Path, clock: FixedClock, notes: int) -> tuple[int, int, int]:
    """`(export size, export peak, import peak)` of a tenant with `notes` large notes."""
    source = runtime(tmp / f"source{notes}", clock)
    target = runtime(tmp / f"target{notes}", clock)
    try:
        api = _api(source, clock)
        for n in range(notes):
            api.put_note(f"note{n:03}", {"text": f"note {n} " + "z" * NOTE_BYTES}).expect(200)
        export = export_tenant(source)
        path = f"/v1/admin/tenants/{TENANT}/export?include_token_digests=true"
        status, digest, export_peak = _fetch_streamed(source, "GET", path, b"")
        assert status == 200 and digest == hashlib.sha256(export).hexdigest()
        status, _, import_peak = _fetch_streamed(target, "POST", "/v1/admin/import", export)
        assert status == 200
        assert normal(export_tenant(target)) == normal(export)
        assert _stages(source) == 0 and _stages(target) == 0
        return len(export), export_peak, import_peak
    finally:
        source.close()
        target.close()


def test_arc7_transfer_memory_follows_the_page_not_the_body(
    tmp_path: Path, clock: FixedClock
) -> None:
    """The Python memory of a whole export and a whole import (Worker and objects together,
    one process here) stays the same when the body doubles, and well under the body: a few
    copies of one page in flight, never the body (notes, not facts: the search tokenizer's
    own transient memory for a large fact would hide what this measures)."""
    size, export_peak, import_peak = _transfer_peaks(tmp_path, clock, NOTES)
    size2, export_peak2, import_peak2 = _transfer_peaks(tmp_path, clock, 2 * NOTES)
    assert size > 10 * PAGE_LIMIT and size2 > 1.9 * size
    for small, large in ((export_peak, export_peak2), (import_peak, import_peak2)):
        assert large < 1.25 * small + PAGE_LIMIT, (small, large)
        assert large < size2 / 3, (large, size2)


def _two_projects(rt: Runtime, clock: FixedClock) -> bytes:
    api = _api(rt, clock)
    api.provision(WRITER, Role.WRITER, project_id=OTHER_PROJECT)
    for n in range(12):  # several pages in each project
        for project in (PROJECT, OTHER_PROJECT):
            note = {"text": "w" * 200_000}
            api.put_note(f"note{n:03}", note, project_id=project).expect(200)
    return export_tenant(rt)


def _tampered(export: bytes, **manifest: Any) -> bytes:
    lines = export.splitlines(keepends=True)
    record = json.loads(lines[-1])
    record.update(manifest)
    return b"".join(lines[:-1]) + json.dumps(record).encode() + b"\n"


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"lines_sha256": "0" * 64}, id="checksum"),
        pytest.param({"counts": {"header": 1}}, id="counts"),
    ],
)
def test_arc7_import_refused_by_its_manifest_leaves_no_stage_and_no_tenant(
    rt: Runtime, other: Runtime, clock: FixedClock, change: dict[str, Any]
) -> None:
    """Rows of both projects were staged (several pages) before the manifest at the end was
    read; the refusal drops every stage and writes nothing anywhere."""
    export = _two_projects(rt, clock)
    staged: list[str] = []
    ns = other.namespaces["PROJECTS"]
    original = ns.cls.import_page

    async def spy(self: Any, import_id: Any, text: Any) -> Any:
        staged.append(str(import_id))
        return await original(self, import_id, text)

    ns.cls.import_page = spy
    status, answer = _import(other, _tampered(export, **change))
    assert (status, answer["error"]["code"]) == (400, "invalid_command")
    assert len(staged) >= 2
    assert _stages(other) == 0
    status, _, body = other.admin("GET", f"/v1/admin/tenants/{TENANT}/export")
    assert (status, body["error"]["code"]) == (404, "resource_not_found")
    status, answer = _import(other, export)  # the same body, whole, imports
    assert status == 200, answer
    assert normal(export_tenant(other)) == normal(export)


def test_arc7_refused_registry_check_at_the_end_drops_the_stages(
    rt: Runtime, other: Runtime, clock: FixedClock
) -> None:
    """A project that already exists at the target is found only after the body was read:
    409, nothing new written, no stage left."""
    export = _two_projects(rt, clock)
    assert _import(other, export)[0] == 200
    before = normal(export_tenant(other))
    status, answer = _import(other, export)
    assert (status, answer["error"]["code"]) == (409, "resource_already_exists")
    assert _stages(other) == 0
    assert normal(export_tenant(other)) == before


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 20])
def test_arc6_body_cut_into_any_chunks_imports_the_same(
    rt: Runtime, other: Runtime, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    api = _api(rt, clock)
    api.put_note("n1", {"text": "line\nbreaks stay escaped"}).expect(200)
    export = export_tenant(rt)
    monkeypatch.setattr(streams, "REQUEST_CHUNK", chunk)
    body = export.rstrip(b"\n") if chunk == 7 else export  # a last line without its newline
    status, answer = _import(other, body)
    assert status == 200, answer
    assert normal(export_tenant(other)) == normal(export)


def test_arc7_the_import_body_is_read_only_after_authentication(rt: Runtime) -> None:
    """An unauthenticated import is refused before its body is read."""
    used: list[bool] = []
    status, _, _ = rt.fetch(
        "POST",
        BASE_URL + "/v1/admin/import",
        {"authorization": "Bearer not-the-admin", "content-type": NDJSON},
        b'{"type":"header"}\n',
        body_used=used,
    )
    assert status == 401 and used == [False]


def test_arc7_export_response_is_streamed_not_buffered(rt: Runtime, clock: FixedClock) -> None:
    """The export's body is a stream written by a task handed to `ctx.waitUntil`."""
    _api(rt, clock)
    ctx = Context()
    worker = rt.Default(ctx, rt.env)
    request = Request(
        BASE_URL + f"/v1/admin/tenants/{TENANT}/export", "GET", {"authorization": f"Bearer {ADMIN}"}
    )
    response = rt.run(worker.fetch(request))
    assert response.status == 200 and response.stream is not None
    assert len(ctx.pending) == 1
    body = rt.run(response.stream.read_all())
    rt.run(ctx.drain())
    assert json.loads(body.splitlines()[-1])["type"] == "manifest"
