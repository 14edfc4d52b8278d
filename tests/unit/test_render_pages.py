"""The page renderers give exactly the bytes of the per-row renderers (FEED-6: bodies as stored)."""

from __future__ import annotations

import json

from aidememo.domain.model import ChangeOp, ChangeRecord, ResourceRef, Scope, StoredResource
from aidememo.http.render import (
    change_entries,
    change_json,
    materialized_entries,
    materialized_json,
    resource_json,
    resources_json,
    scope_json,
    snapshot_json,
)

SCOPE = Scope("tenant_t", "project_p")
BODIES: list[bytes | None] = [
    b'{"a":1}',
    None,
    '{"text":"서버 服务 \\u0000"}'.encode(),
    b'{"n":1.5e300,"x":[true,false,null]}',
]


def _changes() -> list[ChangeRecord]:
    return [
        ChangeRecord(
            seq=i + 1,
            project_epoch="epoch_e",
            ref=ResourceRef("custom.fact" if i % 2 else "handoff", f"id_{i}"),
            op=ChangeOp.DELETE if body is None else ChangeOp.UPSERT,
            revision=i + 3,
            actor_id="actor_a",
            committed_at_ms=1_700_000_000_000 + i,
            body=body,
        )
        for i, body in enumerate(BODIES)
    ]


def test_feed6_page_renderers_match_row_renderers() -> None:
    rows = _changes()
    sb = scope_json(SCOPE)
    assert change_entries(SCOPE, rows) == [change_json(SCOPE, row) for row in rows]
    assert materialized_entries(SCOPE, rows) == [materialized_json(SCOPE, sb, row) for row in rows]
    for entry, row in zip(materialized_entries(SCOPE, rows), rows, strict=True):
        if row.body is not None:
            assert row.body in entry  # spliced byte for byte, never re-encoded
        json.loads(entry)
    resources = [StoredResource(row.ref, row.revision, row.body) for row in rows]
    expected = b",".join(resource_json(sb, row) for row in resources)
    assert resources_json(SCOPE, resources) == expected
    assert resources_json(SCOPE, []) == b""
    backwards = resources[::-1][1:]  # ends with a tombstone
    assert resources_json(SCOPE, backwards) == b",".join(resource_json(sb, r) for r in backwards)
    assert json.loads(snapshot_json(SCOPE, "e", 0, []))["resources"] == []
    snap = snapshot_json(SCOPE, "epoch_e", 9, resources)
    assert snap == (
        b'{"scope":'
        + sb
        + b',"project_epoch":"epoch_e","at_seq":9,"resources":['
        + expected
        + b'],"next_page_token":null}'
    )
    assert json.loads(snap)["resources"][1]["state"] == {"state": "deleted"}
    paged = json.loads(snapshot_json(SCOPE, "epoch_e", 9, resources, "AAA-_.bb"))
    assert paged["next_page_token"] == "AAA-_.bb"


def test_feed6_model_fast_classes_keep_value_semantics() -> None:
    a, b = _changes(), _changes()
    assert a == b and a[0] is not b[0] and hash(a[0]) == hash(b[0])
    assert a[0] != a[1] and a[0].ref == ResourceRef("handoff", "id_0")
    assert ResourceRef("k", "i") != ("k", "i")  # no tuple equality
    assert {ResourceRef("k", "i"): 1}[ResourceRef("k", "i")] == 1
    res = StoredResource(ResourceRef("k", "i"), 1, None)
    assert res == StoredResource(ResourceRef("k", "i"), 1, None) and res.deleted
    assert res != StoredResource(ResourceRef("k", "i"), 2, None)
    assert repr(res) == "StoredResource(ref=ResourceRef(kind='k', id='i'), revision=1, body=None)"
    assert repr(a[1]).startswith("ChangeRecord(seq=2, project_epoch='epoch_e', ref=")
