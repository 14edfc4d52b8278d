"""Shared builders for the SQLite store tests: stores on each executor, and mutations."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from aidememo.domain.model import (
    ChangeOp,
    HandoffIndexRow,
    Mutation,
    Project,
    Receipt,
    ResourceRef,
    Scope,
    SearchDoc,
)
from aidememo.ports import Store, WriteTx
from aidememo.stores.sqlite import SqliteStore
from tests.doubles.do_storage import DoStorage

TENANT = "tenant_t"
PROJECT = "project_p"
EPOCH = "epoch_e"
SCOPE = Scope(TENANT, PROJECT)
KINDS = ("memory", "file", "do")


@contextmanager
def open_store(kind: str, tmp_path: Path) -> Iterator[SqliteStore]:
    """A fresh store on the named executor, provisioned with one project; closed afterwards."""
    storage: DoStorage | None = None
    if kind == "memory":
        store = SqliteStore.open_memory()
    elif kind == "file":
        store = SqliteStore.open_file(tmp_path / "canonical.sqlite")
    else:
        storage = DoStorage()
        store = SqliteStore.on_durable_object(storage)
    try:
        store.transaction(provision)
        yield store
    finally:
        store.close()
        if storage is not None:
            storage.close()


def provision(tx: WriteTx) -> None:
    """Tenant and project with head 0."""
    tx.insert_tenant(TENANT, 1)
    tx.insert_project(Project(TENANT, PROJECT, EPOCH, 0), 1)


def mutation(
    seq: int,
    resource_id: str,
    body: bytes | None = b'{"v":1}',
    *,
    kind: str = "custom.fact",
    revision: int = 1,
    command_id: str | None = None,
    handoff: HandoffIndexRow | None = None,
    search: SearchDoc | None = None,
) -> Mutation:
    """One command's writes at `seq` (upsert when `body` is given, delete otherwise)."""
    receipt = Receipt(
        command_id=command_id or f"cmd_{seq}",
        fingerprint="f" * 64,
        tenant_id=TENANT,
        project_id=PROJECT,
        actor_id="actor_a",
        project_seq=seq,
        resource=ResourceRef(kind, resource_id),
        revision=revision,
        committed_at_ms=1000 + seq,
    )
    return Mutation(
        receipt=receipt,
        project_epoch=EPOCH,
        operation="resource.put" if body is not None else "resource.delete",
        op=ChangeOp.UPSERT if body is not None else ChangeOp.DELETE,
        body=body,
        handoff=handoff,
        search=search,
    )


def committer(m: Mutation) -> Callable[[WriteTx], None]:
    """A transaction callback that commits `m`."""
    return _committer(m)


def commit_all(store: Store, mutations: list[Mutation]) -> None:
    """Commit each mutation in its own transaction, in order."""
    for m in mutations:
        store.transaction(_committer(m))


def _committer(m: Mutation) -> Callable[[WriteTx], None]:
    def run(tx: WriteTx) -> None:
        tx.commit_mutation(m)

    return run
