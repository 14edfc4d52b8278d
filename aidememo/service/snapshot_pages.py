"""One page of the snapshot, read in chunks inside one read view (SPEC.md SNAP-2, SNAP-4).

A page is the resources after a keyset cursor in (kind, id) order, as of the snapshot's
sequence `at_seq`. While the head is still `at_seq` (always on the first page) that is the
current state (`ReadTx.list_resources`); once later commits exist it is reconstructed from
the change log (`ReadTx.list_resources_at`: each resource at its last change up to
`at_seq`), so no store keeps old versions for it. Both give the same rows for the same state.

Rows are read in chunks, each asking for one row more than it may keep, so the page knows
whether anything follows it; a page ends at `limit` rows or once its bodies reach
`SNAPSHOT_PAGE_MAX_BYTES` (one larger body is a page alone), and no chunk holds more than
`CHUNK_ROWS` rows, which bounds what one read holds in memory beyond the page.
"""

from __future__ import annotations

from aidememo.domain.limits import SNAPSHOT_PAGE_MAX_BYTES
from aidememo.domain.model import ResourceRef, Scope, StoredResource
from aidememo.ports import ReadTx

CHUNK_ROWS = 250


def read_page(
    tx: ReadTx,
    scope: Scope,
    at_seq: int,
    after: ResourceRef | None,
    limit: int,
    head_seq: int,
) -> tuple[list[StoredResource], bool]:
    """`(rows, more)`: the page after `after` as of `at_seq` (the project head being
    `head_seq`), and whether any resource follows its last row."""
    current = at_seq == head_seq
    out: list[StoredResource] = []
    size = 0
    cursor = after
    while True:
        room = min(limit - len(out), CHUNK_ROWS)
        if current:
            batch = tx.list_resources(scope, room + 1, cursor)
        else:
            batch = tx.list_resources_at(scope, at_seq, room + 1, cursor)
        for row in batch[:room]:
            if out and size >= SNAPSHOT_PAGE_MAX_BYTES:
                return out, True
            out.append(row)
            if row.body is not None:
                size += len(row.body)
        if len(batch) <= room:
            return out, False
        if len(out) >= limit or size >= SNAPSHOT_PAGE_MAX_BYTES:
            return out, True
        cursor = out[-1].ref
