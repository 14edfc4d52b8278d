"""Tenant export and import at the edge, streamed end to end (ADM-3, ARC-1, ARC-2, ARC-6).

A body can be 256 MiB and the Worker has 128 MB, so neither direction is ever whole here:

- export: the registry's identity records and one consistent snapshot per project object
  (its head and epoch go into the project line) are taken first, so a missing tenant or a
  failing object is still an HTTP error; then the body streams (`worker.streams`): header,
  identity lines, each project's pages (at most 1 MiB each, fetched one at a time), and the
  manifest, computed here as the bytes pass.
- import (records in the project objects): the body is read chunk by chunk
  (`worker.streams.body_chunks`) and checked line by line (`ExportReader`: header first,
  identity before rows); identity records are kept (they are small), and each project's rows go
  to its object in pages of at most 1 MiB, staged there and not yet visible. Only when the
  manifest at the end has verified every byte, and every check of the origin passed (the plan of
  the identity records, each project's change log dense 1..head, the registry's and the
  directory shards' refusals), is anything written: registry, directory shards, then each
  project object commits its staged rows in one transaction. A body that fails any check has its
  staged pages dropped (`import_abort`) and is answered with the error; nothing was written. Not
  atomic across objects: a failure among the final commits is cleaned up with the tenant
  deletion, which the registry (written first) sees.
- import in PostgreSQL mode (`import_postgres`): the same lines pushed into the database's
  staged import (ARC-9), one transaction at the end.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from aidememo.domain.artifacts import MAX_DIRECT_BODY_BYTES, RECEIPT_RETENTION_MS, Publication
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id, validate_name
from aidememo.http import admin_handlers as core
from aidememo.http.app import json_response
from aidememo.http.render import json_bytes
from aidememo.http.types import Request, Response
from aidememo.ports import Clock, Ids
from aidememo.service.archive import (
    Archive,
    ImportSummary,
    Manifest,
    Plan,
    header_record,
    line,
)
from aidememo.service.archive_bodies import (
    BODY_CHUNK,
    BODY_TYPE,
    BodyChunk,
    ChunkOrder,
    chunk_record,
    published_bodies,
)
from aidememo.service.archive_rows import check_row
from aidememo.service.archive_verify import ROW_TYPES, ExportReader, LineSplitter
from durable_objects.artifacts import R2_IDENTITY
from durable_objects.rpc import PAGE_BYTES
from worker.objects import Objects, call
from worker.routing import token_shard
from worker.streams import body_chunks, stream_response

log = logging.getLogger("aidememo.edge")


# -- export -----------------------------------------------------------------------------------


async def export(
    objs: Objects, ctx: Any, request: Request, params: dict[str, str], clock: Clock
) -> Any:
    """`GET /v1/admin/tenants/{t}/export`: checked and snapshotted, then streamed."""
    tenant_id, project_id, include_tokens, include_bodies = core.export_request(request, params)
    bucket = getattr(objs.env, "ARTIFACTS", None)
    if include_bodies and bucket is None:
        raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "no ARTIFACTS bucket is bound here")
    records = await call(
        objs.registry(tenant_id),
        "export_identity",
        {"tenant_id": tenant_id, "project_id": project_id, "include_tokens": include_tokens},
    )
    snapshots: dict[str, dict[str, Any]] = {}
    for record in records:
        if record["type"] == "project":
            pid = record["project_id"]
            snapshots[pid] = await call(
                objs.project(tenant_id, pid),
                "export_begin",
                {"tenant_id": tenant_id, "project_id": pid},
            )
    header = header_record(tenant_id, project_id, clock.now_ms(), include_tokens, R2_IDENTITY)
    if include_bodies:
        header["bodies"] = True
    published: list[tuple[str, Publication]] = []  # the bodies that follow the rows (ART-12)

    async def texts() -> AsyncIterator[str]:
        m = Manifest()
        first = [m.add("header", line(header))]
        for record in records:
            current = record
            if record["type"] == "project":
                snap = snapshots[record["project_id"]]
                current = {
                    **record,
                    "project_epoch": snap["project_epoch"],
                    "head_seq": snap["head_seq"],
                }
            first.append(m.add(current["type"], line(current)))
        yield b"".join(first).decode("utf-8")
        for pid, snap in snapshots.items():
            stub = objs.project(tenant_id, pid)
            for number in range(snap["pages"]):
                page = await call(stub, "export_page", snap["export_id"], number)
                while page:  # run by run, each let go once written
                    kind, count, text = page.pop(0)
                    m.add(kind, text.encode("utf-8"), count)
                    if include_bodies and kind == "resource":
                        _publications(text, published)
                    yield text
        for pid, pub in published:
            async for data in _body_lines(bucket, pid, pub):
                m.add(BODY_TYPE, data)
                yield data.decode("utf-8")
        yield m.line().decode("utf-8")

    return stream_response(ctx, 200, dict(core.NDJSON_HEADERS), texts())


def _publications(text: str, published: list[tuple[str, Publication]]) -> None:
    """The current publications among a run of `resource` lines."""
    for data in text.encode("utf-8").splitlines():
        found = published_bodies(data)
        if found is not None:
            published.append(found)


async def _body_lines(bucket: Any, project_id: str, pub: Publication) -> AsyncIterator[bytes]:
    """A publication's body from R2 as `artifact_body` lines of at most `BODY_CHUNK` bytes.
    A body gone from the bucket ends the stream early (no manifest: the export is refused
    by whoever reads it), since the status has gone out."""
    obj = await bucket.get(pub.generation)
    if obj is None or int(obj.size) != pub.size_bytes:
        raise fail(ErrorCode.ARTIFACT_NOT_FOUND, f"the body of {pub.path} is not in R2")
    offset, pending = 0, b""
    async for chunk in obj.body:
        pending += chunk.to_bytes()
        while len(pending) >= BODY_CHUNK:
            piece, pending = pending[:BODY_CHUNK], pending[BODY_CHUNK:]
            yield line(chunk_record(project_id, pub, offset, piece))
            offset += len(piece)
    if pending or offset == 0:
        yield line(chunk_record(project_id, pub, offset, pending))


# -- import -----------------------------------------------------------------------------------


async def import_(objs: Objects, body: Any, request: Request, max_bytes: int, ids: Ids) -> Response:
    """`POST /v1/admin/import`: `body` is the SDK request whose body streams in."""
    reader, staging = ExportReader(), _Staging(objs, ids)
    splitter = LineSplitter(max_bytes)
    try:
        async for chunk in body_chunks(body):
            for data in splitter.feed(chunk):
                await staging.add(reader.feed(data))
        for data in splitter.finish():
            await staging.add(reader.feed(data))
        tenant_id = reader.finish()
        summary = await staging.commit(tenant_id, reader.record_counts())
    except BaseException:
        await staging.abort()
        raise
    return json_response(200, json_bytes(core.import_json(summary)))


async def import_postgres(
    archive: Archive, body: Any, request: Request, max_bytes: int
) -> Response:
    """`POST /v1/admin/import` in PostgreSQL mode: the lines pushed, as the body streams in,
    into the store's staged import (`aidememo.service.archive_stage`, ARC-9), which checks
    and stages them page by page and writes everything in one transaction at the end; the
    body is never whole here either."""
    from aidememo.service.archive_stage import StagedImport

    staged = StagedImport(archive)
    splitter = LineSplitter(max_bytes)
    try:
        async for chunk in body_chunks(body):
            for data in splitter.feed(chunk):
                staged.feed(data)
        for data in splitter.finish():
            staged.feed(data)
        summary = staged.finish()
    except BaseException:
        staged.abort()
        raise
    return json_response(200, json_bytes(core.import_json(summary)))


class _Staging:
    """An import in flight: identity records kept, project rows staged in their objects."""

    def __init__(self, objs: Objects, ids: Ids) -> None:
        self.objs = objs
        self.ids = ids
        self.tenant_id = ""
        self.identity: list[dict[str, Any]] = []
        self.plan: Plan | None = None
        self.epochs: dict[str, str] = {}
        self.staged: dict[str, str] = {}  # project -> import id in its object
        self.next_seq: dict[str, int] = {}
        self.page: list[bytes] = []
        self.page_project = ""
        self.page_bytes = 0
        self.bodies = _Bodies(objs)
        self.body_store: Any = None  # the export's body-store identity (ART-8)
        self.with_bodies = False

    async def add(self, checked: tuple[dict[str, Any], bytes] | None) -> None:
        """One checked record and its line (`None` for a line not yet known to be one)."""
        if checked is None:
            return
        record, data = checked
        kind = record["type"]
        if kind == "header":
            self.tenant_id = record["tenant_id"]
            self.body_store = record.get("body_store")
            self.with_bodies = record.get("bodies") is True
        elif kind == BODY_TYPE:
            await self.bodies.add(self._close_identity(), self.tenant_id, record)
        elif self.plan is None and kind not in ROW_TYPES:
            self.identity.append(record)
        else:
            await self._row(record, data)

    def _close_identity(self) -> Plan:
        """The identity records are complete: checked as the origin checks them."""
        if self.plan is None:
            self.plan = Plan.build(self.tenant_id, self.identity, history=False)
            self.epochs = {pid: self.ids.new_id("epoch") for pid in self.plan.projects}
        return self.plan

    async def _row(self, record: dict[str, Any], data: bytes) -> None:
        plan = self._close_identity()
        try:
            pid = validate_id(record["project_id"], "project_id")
            validate_name(record["kind"], "kind")
            validate_id(record["id"], "id")
            # The conversions the object's commit makes, so a malformed row is refused here,
            # before any object was written (the commits are not atomic across objects).
            check_row(record)
            seq = record["seq"] if record["type"] == "change" else None
        except (KeyError, ValueError, TypeError) as exc:
            raise fail(ErrorCode.INVALID_COMMAND, f"malformed export record: {exc}") from None
        if pid not in plan.projects:
            raise fail(ErrorCode.INVALID_COMMAND, f"record for undeclared project {pid}")
        artifact = record["type"] == "resource" and record["kind"] == "artifact"
        if artifact and not self.with_bodies and self.body_store != R2_IDENTITY:
            raise fail(  # the edge's bodies are in R2; these stayed where they were (ART-8)
                ErrorCode.IDENTITY_MISMATCH,
                f"the export's artifact bodies are in body store {self.body_store!r}, the"
                f" edge's are in {R2_IDENTITY!r}: the bodies do not come with the export",
            )
        if seq is not None:
            expected = self.next_seq.get(pid, 1)
            if seq != expected or seq > plan.projects[pid]:
                raise fail(
                    ErrorCode.INVALID_COMMAND,
                    f"project {pid} history is not dense 1..{plan.projects[pid]}",
                )
            self.next_seq[pid] = expected + 1
        if self.page and (pid != self.page_project or self.page_bytes + len(data) > PAGE_BYTES):
            await self._flush()
        self.page.append(data)
        self.page_project = pid
        self.page_bytes += len(data)

    async def _flush(self) -> None:
        if not self.page:
            return
        pid, text = self.page_project, b"".join(self.page).decode("utf-8")
        self.page, self.page_bytes = [], 0
        import_id = self.staged.get(pid) or await self._begin(pid)
        await call(self.objs.project(self.tenant_id, pid), "import_page", import_id, text)

    async def _begin(self, pid: str) -> str:
        """Stage the project in its object with its identity records and new epoch."""
        members = [r for r in self.identity if r["type"] == "membership" and r["project_id"] == pid]
        member_ids = {r["actor_id"] for r in members}
        own = [
            r
            for r in self.identity
            if (r["type"] == "project" and r["project_id"] == pid)
            or (r["type"] == "actor" and r["actor_id"] in member_ids)
        ]
        import_id = uuid.uuid4().hex
        self.staged[pid] = import_id
        await call(
            self.objs.project(self.tenant_id, pid),
            "import_begin",
            {
                "import_id": import_id,
                "tenant_id": self.tenant_id,
                "project_id": pid,
                "project_epoch": self.epochs[pid],
                "identity": own + members,
            },
        )
        return import_id

    async def commit(self, tenant_id: str, counts: dict[str, int]) -> ImportSummary:
        """Every check, then every write: registry, directory shards, project objects."""
        plan = self._close_identity()
        await self._flush()
        self.bodies.finish()
        for pid, head in plan.projects.items():
            if self.next_seq.get(pid, 1) != head + 1:
                raise fail(
                    ErrorCode.INVALID_COMMAND, f"project {pid} history is not dense 1..{head}"
                )
        shards = _token_shards(self.identity)
        registry = self.objs.registry(tenant_id)
        await call(registry, "check_import", {"tenant_id": tenant_id, "records": self.identity})
        for group in shards.values():
            await call(
                self.objs.tokens(group[-1]["token_sha256"]),
                "check_import",
                {"tenant_id": tenant_id, "records": group},
            )
        for pid in plan.projects:  # a project without rows is staged empty
            if pid not in self.staged:
                await self._begin(pid)
        await call(
            registry,
            "import_identity",
            {"tenant_id": tenant_id, "records": self.identity, "epochs": self.epochs},
        )
        for group in shards.values():
            await call(
                self.objs.tokens(group[-1]["token_sha256"]),
                "import_tokens",
                {"tenant_id": tenant_id, "records": group},
            )
        for pid in plan.projects:
            await call(self.objs.project(tenant_id, pid), "import_commit", self.staged.pop(pid))
        return ImportSummary(tenant_id, dict(self.epochs), counts)

    async def abort(self) -> None:
        """Drop what is staged (best effort: the objects' alarms drop the rest later)."""
        for pid, import_id in self.staged.items():
            try:
                await call(self.objs.project(self.tenant_id, pid), "import_abort", import_id)
            except Exception:  # the import's own error is the answer; this is cleanup
                log.warning("dropping the staged import of %s failed", pid, exc_info=True)


class _Bodies:
    """`artifact_body` lines of an import, one generation at a time, written into R2 once
    complete and their SHA-256 checked (ART-12). A body is held whole while it arrives (at
    most 64 MiB, the largest direct body); its project object queues it as a GC intent due
    after the receipt retention before the write, so a failed import leaves nothing for long
    and a publication keeps it (ART-7)."""

    def __init__(self, objs: Objects) -> None:
        self.objs = objs
        self.order = ChunkOrder()
        self.parts: list[bytes] = []

    async def add(self, plan: Plan, tenant_id: str, record: dict[str, Any]) -> None:
        try:
            pid = validate_id(record["project_id"], "project_id")
        except KeyError as exc:
            raise fail(ErrorCode.INVALID_COMMAND, f"malformed artifact_body: {exc}") from None
        chunk = BodyChunk(record)
        if pid not in plan.projects:
            raise fail(ErrorCode.INVALID_COMMAND, f"artifact body of undeclared project {pid}")
        if chunk.size > MAX_DIRECT_BODY_BYTES:
            raise fail(ErrorCode.ARTIFACT_UPLOAD_TOO_LARGE, f"body {chunk.generation} is too large")
        starts, complete = self.order.feed(chunk)
        if starts:
            self.parts = []
        self.parts.append(chunk.data)
        if complete:
            await self._write(tenant_id, pid, chunk.generation, chunk.sha256)

    async def _write(self, tenant_id: str, pid: str, generation: str, sha: str) -> None:
        bucket = getattr(self.objs.env, "ARTIFACTS", None)
        if bucket is None:
            raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "no ARTIFACTS bucket is bound here")
        now = int(time.time() * 1000)
        who = {"tenant_id": tenant_id, "actor_id": "admin"}
        args = {"project_id": pid, "generation": generation, "now_ms": now,
                "not_before_ms": now + RECEIPT_RETENTION_MS}  # fmt: skip
        stub = self.objs.project(tenant_id, pid)
        await call(stub, "artifact_phase", "import_body", args, who)
        data, self.parts = b"".join(self.parts), []
        stored = await bucket.put(generation, data, onlyIf={"etagDoesNotMatch": "*"})
        if stored is None:  # the key is taken: only the same bytes are the same body
            obj = await bucket.get(generation)
            held = b"" if obj is None else await _all(obj.body)
            if hashlib.sha256(held).hexdigest() != sha:
                raise fail(ErrorCode.ARTIFACT_CONFLICT, f"body {generation} exists, other bytes")

    def finish(self) -> None:
        """After the last line: no body left half-way."""
        self.order.finish()


async def _all(stream: Any) -> bytes:
    parts = [chunk.to_bytes() async for chunk in stream]
    return b"".join(parts)


def _token_shards(identity: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Token records grouped by directory shard, each group led by its actors' records."""
    actors = {r["actor_id"]: r for r in identity if r["type"] == "actor"}
    shards: dict[str, list[dict[str, Any]]] = {}
    for r in identity:
        if r["type"] == "token":
            group = shards.setdefault(token_shard(r["token_sha256"]), [])
            actor = actors.get(r["actor_id"])
            if actor is not None and actor not in group:
                group.insert(0, actor)
            group.append(r)
    return shards
