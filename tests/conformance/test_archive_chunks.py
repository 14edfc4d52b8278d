"""Paged reads and the chunked import on every backend (SPEC.md ARC-1, ARC-2, ARC-3, ARC-8).

An export reads each table in keyset pages, and a front that cannot hold a project's rows
imports them page by page (`ProjectImport`, one `restore_history` per page inside one
transaction). Both must give exactly what the whole read and the whole import give.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aidememo.conformance.harness import PROJECT, TENANT, Fixture
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.ports import ReadTx, Store
from aidememo.service.archive_rows import project_lines
from aidememo.service.project_import import ProjectImport
from tests.conformance.conftest import BACKENDS, Backend
from tests.conformance.test_archive import _archive, _history_lines, _populate, _views

ROWS = ("resource", "change", "receipt", "audit")
EPOCH = "epoch_chunked"


def _keyset(read: Any, after: Any, key: Any, size: int) -> list[Any]:
    """Every row of a keyset-paged read, `size` rows at a time."""
    rows: list[Any] = []
    while True:
        page = read(after, size)
        rows += page
        if len(page) < size:
            return rows
        after = key(page[-1])


def test_arc1_keyset_pages_equal_the_whole_read(backend: Backend) -> None:
    fx = Fixture.create(backend.open)
    _populate(fx)
    scope = fx.actor.scope(PROJECT)
    project = fx.store.read(lambda tx: tx.get_project(scope))
    assert project is not None

    def check(tx: ReadTx) -> None:
        resources = tx.list_resources(scope, 10_000)
        assert len(resources) == 6
        for size in (1, 2, 3):
            paged = _keyset(
                lambda after, n: tx.list_resources(scope, n, after), None, lambda r: r.ref, size
            )
            assert paged == resources
        assert tx.list_resources(scope, 2, resources[-1].ref) == []
        for read in (tx.list_receipts, tx.list_audit):
            whole = read(scope)
            assert [r.project_seq for r in whole] == list(range(1, 11))
            for size in (1, 3, 10):
                paged = _keyset(
                    lambda after, n, read=read: read(scope, after, n),  # type: ignore[misc]
                    0,
                    lambda r: r.project_seq,
                    size,
                )
                assert paged == whole
            assert read(scope, 8) == whole[8:]
            assert read(scope, 10, 5) == []
        # The export's reads in pages of one row give the same lines as the default pages.
        assert list(project_lines(tx, project, read_rows=1)) == list(project_lines(tx, project))

    fx.store.read(check)
    fx.store.close()


def _split(lines: list[bytes]) -> tuple[list[dict[str, Any]], list[bytes]]:
    """A project export's identity records (no header, manifest or tokens) and row lines."""
    records = [json.loads(line) for line in lines[1:-1]]
    identity = [r for r in records if r["type"] in ("project", "actor", "membership")]
    rows = [line for line, r in zip(lines[1:-1], records, strict=True) if r["type"] in ROWS]
    return identity, rows


def _pages(rows: list[bytes], per_page: int) -> list[str]:
    return [b"".join(rows[i : i + per_page]).decode("utf-8") for i in range(0, len(rows), per_page)]


def _fresh(backend: Backend, folder: Path) -> tuple[Backend, Store]:
    """Another, empty database of the same backend."""
    folder.mkdir()
    into = BACKENDS[backend.name](folder)
    return into, into.open()


def _close(into: Backend, store: Store) -> None:
    store.close()
    for cleanup in into.cleanups:
        cleanup()


@pytest.mark.parametrize("order", ["export", "changes_first"])
def test_arc2_chunked_import_equals_the_source(
    backend: Backend, order: str, tmp_path: Path
) -> None:
    """Pages of two or three lines into a fresh store of the same backend: every view (and a
    new export's rows) equals the source's; with the changes before the resources (an order
    `Plan.build` accepts too) the mailbox rows still carry each handoff's last change."""
    fx = Fixture.create(backend.open)
    _populate(fx)
    lines = list(_archive(fx.store).export_lines(TENANT, PROJECT))
    identity, rows = _split(lines)
    if order == "changes_first":
        rows = sorted(rows, key=lambda line: b'"type":"change"' not in line)
    into, store = _fresh(backend, tmp_path / "into")
    try:
        pages = _pages(rows, 2 if order == "export" else 3)
        assert len(pages) > 10
        importer = ProjectImport(_archive(store), TENANT, PROJECT, EPOCH, identity)
        assert importer.write(pages) == 10
        assert _views(store, fx.actor) == _views(fx.store, fx.actor)
        again = list(_archive(store).export_lines(TENANT, PROJECT))
        assert _history_lines(again) == _history_lines(lines)
    finally:
        _close(into, store)
        fx.store.close()


def _refusals(rows: list[bytes]) -> dict[str, tuple[list[bytes], ErrorCode]]:
    changes = [i for i, line in enumerate(rows) if b'"type":"change"' in line]
    gap = rows[: changes[3]] + rows[changes[3] + 1 :]
    short = [line for i, line in enumerate(rows) if i != changes[-1]]
    other = [rows[0].replace(f'"project_id":"{PROJECT}"'.encode(), b'"project_id":"elsewhere"')]
    broken = [rows[0].replace(b'"revision":', b'"version":')]
    identity = [b'{"actor_id":"x","kind":"agent","type":"actor"}\n']
    return {
        "gap": (gap, ErrorCode.INVALID_COMMAND),
        "short": (short, ErrorCode.INVALID_COMMAND),
        "other_project": (other + rows[1:], ErrorCode.INVALID_COMMAND),
        "malformed": (broken + rows[1:], ErrorCode.INVALID_COMMAND),
        "identity_in_a_page": (rows + identity, ErrorCode.INVALID_COMMAND),
        "not_json": ([*rows, b"{\n"], ErrorCode.INVALID_COMMAND),
    }


@pytest.mark.parametrize(
    "case", ["gap", "short", "other_project", "malformed", "identity_in_a_page", "not_json"]
)
def test_arc2_chunked_import_refusal_leaves_nothing(
    backend: Backend, case: str, tmp_path: Path
) -> None:
    fx = Fixture.create(backend.open)
    _populate(fx)
    identity, rows = _split(list(_archive(fx.store).export_lines(TENANT, PROJECT)))
    bad, code = _refusals(rows)[case]
    into, store = _fresh(backend, tmp_path / "into")
    try:
        importer = ProjectImport(_archive(store), TENANT, PROJECT, EPOCH, identity)
        with pytest.raises(AidememoError) as err:
            importer.write(_pages(bad, 4))
        assert err.value.code is code, err.value.message
        assert not any(store.read(lambda tx: tx.count_tenant_rows(TENANT)).values())
        # The same import, whole and right, goes through afterwards.
        assert importer.write(_pages(rows, 4)) == 10
        # And again is refused: the scope exists now.
        with pytest.raises(AidememoError) as err:
            importer.write(_pages(rows, 4))
        assert err.value.code is ErrorCode.RESOURCE_ALREADY_EXISTS
    finally:
        _close(into, store)
        fx.store.close()


def test_arc2_chunked_import_checks_its_identity() -> None:
    from aidememo.domain.clock import FixedClock, RandomIds
    from aidememo.service.archive import Archive
    from aidememo.stores.in_memory import InMemoryStore

    archive = Archive(InMemoryStore(), FixedClock(1), RandomIds())
    project = {"type": "project", "project_id": "p1", "project_epoch": "e", "head_seq": 0}
    with pytest.raises(AidememoError) as err:
        ProjectImport(archive, "t1", "p2", EPOCH, [project])
    assert err.value.code is ErrorCode.INVALID_COMMAND
    with pytest.raises(AidememoError) as err:
        ProjectImport(archive, "t1", "p1", EPOCH, [{**project, "head_seq": -1}])
    assert err.value.code is ErrorCode.INVALID_COMMAND
    assert ProjectImport(archive, "t1", "p1", EPOCH, [project]).write([]) == 0
