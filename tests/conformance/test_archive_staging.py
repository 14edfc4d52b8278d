"""An import read once, line by line, its rows staged in the store (SPEC.md ARC-9, ARC-2).

`Archive.import_lines` takes a generator here, never a list: the generated archives are
built line by line with a running `Manifest`, and a checkpoint inside the generator looks at
the staging table while the import is still reading.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aidememo.domain.clock import FixedClock, RandomIds
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.ports import Store, WriteTx
from aidememo.service.archive import Archive, Manifest, header_record, line
from aidememo.service.archive_stage import STAGE_TTL_MS
from tests.conformance.conftest import BACKENDS, Backend

TENANT, PROJECT, ACTOR = "tenant_s", "project_s", "actor_s"
NOW = 10 * STAGE_TTL_MS


class _Ids:
    """Random ids, remembering the import's."""

    def __init__(self) -> None:
        self.inner = RandomIds()
        self.import_id = ""

    def new_id(self, prefix: str) -> str:
        made = self.inner.new_id(prefix)
        if prefix == "import":
            self.import_id = made
        return made


def _archive(store: Store, ids: _Ids | None = None) -> Archive:
    return Archive(store, FixedClock(NOW), ids or _Ids())


def generated(
    pairs: int,
    body_bytes: int,
    *,
    at: Callable[[int], None] = lambda n: None,
    spoil: int | None = None,
    wrong_manifest: bool = False,
) -> Iterator[bytes]:
    """An export of one project with `pairs` resources and their changes, each carrying a
    body of about `body_bytes`, made line by line. `at(i)` runs before change `i` is
    yielded; `spoil` makes that change malformed (the manifest still matches, unless
    `wrong_manifest`)."""
    m = Manifest()
    yield m.add("header", line(header_record(TENANT, None, 1, False)))
    yield m.add("actor", line({"type": "actor", "actor_id": ACTOR, "kind": "agent"}))
    project = {"type": "project", "project_id": PROJECT, "project_epoch": "e", "head_seq": pairs}
    yield m.add("project", line(project))
    membership = {"role": "owner", "status": "active", "actor_id": ACTOR}
    yield m.add("membership", line({"type": "membership", "project_id": PROJECT, **membership}))
    for i in range(1, pairs + 1):
        body = {"n": i, "text": "x" * body_bytes}
        record = {"type": "resource", "project_id": PROJECT, "kind": "blob", "id": f"r{i}"}
        yield m.add("resource", line({**record, "revision": 1, "body": body}))
    for i in range(1, pairs + 1):
        at(i)
        body = {"n": i, "text": "x" * body_bytes}
        change = {
            "type": "change",
            "project_id": PROJECT,
            "seq": i,
            "kind": "blob",
            "id": f"r{i}",
            "operation": "upsert",
            "revision": 1,
            "actor_id": ACTOR,
            "committed_at_ms": i,
            "body": body,
        }
        if i == spoil:
            del change["revision"]
        yield m.add("change", line(change))
    if wrong_manifest:
        m.add("change", b"\n")
    yield m.line()


def _rows(store: Store) -> dict[str, int]:
    return {k: v for k, v in store.read(lambda tx: tx.count_tenant_rows(TENANT)).items() if v}


def _staged(store: Store, import_id: str, seq: int = 0) -> bytes | None:
    return store.read(lambda tx: tx.staged_import_page(import_id, PROJECT, seq))


def test_arc9_staging_pages_are_kept_dropped_and_not_tenant_data(backend: Backend) -> None:
    store = backend.open()
    try:
        pages = [("import_a", "p1", 0, 1_000), ("import_a", "p1", 1, 1_000)]
        pages += [("import_a", "p2", 0, 1_000), ("import_b", "p1", 0, 500)]

        def stage(tx: WriteTx) -> None:
            for import_id, pid, seq, at in pages:
                tx.stage_import_page(import_id, pid, seq, f"{import_id} {pid} {seq}\n".encode(), at)

        store.transaction(stage)
        read = store.read

        def page(import_id: str, pid: str, seq: int) -> bytes | None:
            return read(lambda tx: tx.staged_import_page(import_id, pid, seq))

        assert page("import_a", "p1", 1) == b"import_a p1 1\n"
        assert page("import_a", "p2", 0) == b"import_a p2 0\n"
        assert page("import_a", "p2", 1) is None and page("import_c", "p1", 0) is None
        assert not any(read(lambda tx: tx.count_tenant_rows("import_a")).values())

        def rolled_back(tx: WriteTx) -> None:
            tx.stage_import_page("import_c", "p1", 0, b"gone\n", 1_000)
            raise RuntimeError("roll back")

        with pytest.raises(RuntimeError):
            store.transaction(rolled_back)
        assert page("import_c", "p1", 0) is None
        store.transaction(lambda tx: tx.drop_import_stages_before(500))
        assert page("import_b", "p1", 0) is None and page("import_a", "p1", 0) is not None
        store.transaction(lambda tx: tx.drop_import_stage("import_a"))
        assert all(page("import_a", pid, seq) is None for _, pid, seq, _ in pages)
    finally:
        store.close()


def test_arc9_import_stages_pages_while_reading_then_drops_them(backend: Backend) -> None:
    """About 2.6 MiB: the resources are staged before the changes are even read; after the
    commit the stage is gone and every row is in."""
    store = backend.open()
    ids = _Ids()
    seen: list[bytes | None] = []
    try:
        lines = generated(80, 16_000, at=lambda i: seen.append(_staged(store, ids.import_id)))
        summary = _archive(store, ids).import_lines(lines)
        assert summary.counts == {
            "actor": 1, "project": 1, "membership": 1, "resource": 80, "change": 80,
        }  # fmt: skip
        assert seen[0] is not None and seen[0].startswith(b'{"body":{"n":1,')
        assert _staged(store, ids.import_id) is None
        rows = _rows(store)
        assert (rows["resources"], rows["changes"], rows["projects"]) == (80, 80, 1)
        project = store.read(lambda tx: tx.list_projects(TENANT))[0]
        assert (project.head_seq, project.project_epoch) == (80, summary.epochs[PROJECT])
    finally:
        store.close()


@pytest.mark.parametrize("wrong_manifest", [False, True])
def test_arc9_arc2_refusal_after_staging_drops_the_stage_and_answers_after_the_manifest(
    backend: Backend, wrong_manifest: bool
) -> None:
    """A malformed change late in the file, after pages were staged: refused as a whole-file
    read refuses it (the manifest's error first when the manifest is wrong too), the stage
    dropped, nothing written."""
    store = backend.open()
    ids = _Ids()
    seen: list[bytes | None] = []
    try:
        lines = generated(
            80,
            16_000,
            at=lambda i: seen.append(_staged(store, ids.import_id)) if i == 70 else None,
            spoil=70,
            wrong_manifest=wrong_manifest,
        )
        with pytest.raises(AidememoError) as err:
            _archive(store, ids).import_lines(lines)
        assert err.value.code is ErrorCode.INVALID_COMMAND
        expected = (
            "the export does not match its manifest checksum"
            if wrong_manifest
            else "malformed export record: 'revision'"
        )
        assert err.value.message == expected
        assert seen[0] is not None  # pages were staged before the bad line came
        assert _staged(store, ids.import_id) is None and _rows(store) == {}
        # The same archive, right, goes through afterwards.
        assert _archive(store).import_lines(generated(80, 16_000)).counts["change"] == 80
    finally:
        store.close()


def test_arc9_a_stage_left_by_a_crash_is_dropped_by_a_later_import(backend: Backend) -> None:
    store = backend.open()
    try:
        old, recent = NOW - STAGE_TTL_MS, NOW - STAGE_TTL_MS + 1
        store.transaction(lambda tx: tx.stage_import_page("import_old", PROJECT, 0, b"o\n", old))
        store.transaction(lambda tx: tx.stage_import_page("import_new", PROJECT, 0, b"n\n", recent))
        _archive(store).import_lines(generated(2, 10))
        assert _staged(store, "import_old") is None
        assert _staged(store, "import_new") == b"n\n"  # perhaps an import still running
    finally:
        store.close()


@pytest.mark.parametrize("name", ["sqlite_file", "postgres_psycopg"])
def test_arc9_a_64_mib_import_holds_a_bounded_amount_of_python_memory(
    name: str, tmp_path: Path
) -> None:
    """About 64 MiB of archive from a generator: the peak of Python memory during the import
    (tracemalloc) stays far below the archive's size."""
    backend = BACKENDS[name](tmp_path)
    store = backend.open()
    size = [0]

    def counted() -> Iterator[bytes]:
        for data in generated(2_048, 16_300):
            size[0] += len(data)
            yield data

    try:
        tracemalloc.start()
        try:
            summary = _archive(store).import_lines(counted())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert summary.counts["change"] == 2_048
        assert size[0] > 64 * 1024 * 1024
        print(f"{name}: archive {size[0] / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB")
        assert peak < 32 * 1024 * 1024, peak
        assert _rows(store)["changes"] == 2_048
    finally:
        store.close()
        for cleanup in backend.cleanups:
            cleanup()
