"""The paged snapshot (SNAP-1..4) on every backend: pages pinned at the first page's sequence,
writes between pages never seen, and page tokens bound to caller and project.

The state at a sequence is always checked against `/changes/materialized` replayed up to
that sequence, the other way the contract offers to reach it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from aidememo.domain.canonical import canonical_bytes
from aidememo.domain.limits import SNAPSHOT_TOKEN_TTL_MS
from aidememo.domain.model import ChangeOp, Mutation, Receipt, ResourceRef, Role, Scope
from tests.contract.support import (
    EPOCH,
    OTHER_PROJECT,
    PROJECT,
    READER,
    RECEIVER,
    START_MS,
    TENANT,
    WRITER,
    Api,
    P,
)

Resources = list[dict[str, Any]]
# The 25,000-resource bootstrap runs on one backend of each SQL store family: a SQLite file,
# PostgreSQL, and the edge in both storage modes (the smaller tests run everywhere).
BULK_BACKENDS = {"sqlite_file", "postgres_psycopg", "edge", "edge_postgres"}


def _delete(note_id: str, revision: int) -> dict[str, Any]:
    return {
        "command_id": f"cmd_delete_{note_id}_{revision}",
        "project_id": PROJECT,
        "expected_revision": revision,
        "operation": "resource.delete",
        "resource": {"kind": "custom.note", "id": note_id},
        "change": "delete",
        "payload": None,
    }


def _update(api: Api, note_id: str, revision: int, payload: Any) -> None:
    api.put_note(
        note_id, payload, expected_revision=revision, command_id=f"cmd_{note_id}_{revision}"
    ).expect(200)


def read_pages(
    api: Api, as_: str, limit: int, between: Callable[[int], None] | None = None
) -> tuple[int, Resources, int]:
    """`(at_seq, resources, pages)` of one whole paged snapshot; `between(n)` runs after
    page n (from 1), before the next is read."""
    first = api.get(f"{P}/snapshot", as_, query={"limit": limit}).expect(200)
    at_seq, found, token, pages = first["at_seq"], list(first["resources"]), first, 1
    while token["next_page_token"] is not None:
        if between is not None:
            between(pages)
        query = {"limit": limit, "page_token": token["next_page_token"]}
        token = api.get(f"{P}/snapshot", as_, query=query).expect(200)
        assert token["at_seq"] == at_seq and token["project_epoch"] == first["project_epoch"]
        assert len(token["resources"]) <= limit
        found += token["resources"]
        pages += 1
    return at_seq, found, pages


def replay(api: Api, as_: str, at_seq: int) -> Resources:
    """The resources `/changes/materialized` gives when replayed up to `at_seq`, by (kind, id)."""
    state: dict[tuple[str, str], dict[str, Any]] = {}
    after = 0
    while after < at_seq:
        query = {"project_epoch": EPOCH, "after_seq": after, "limit": 10_000}
        batch = api.get(f"{P}/changes/materialized", as_, query=query).expect(200)
        for entry in batch["entries"]:
            if entry["change"]["seq"] <= at_seq:
                ref = entry["resource"]["resource"]
                state[(ref["kind"], ref["id"])] = entry["resource"]
        after = batch["next_cursor"]["after_seq"]
        if not batch["has_more"]:
            break
    return [state[key] for key in sorted(state)]


def _keys(resources: Resources) -> list[tuple[str, str]]:
    return [(r["resource"]["kind"], r["resource"]["id"]) for r in resources]


def _seed(api: Api) -> None:
    """Notes (one deleted, one updated), a session with a fact, a handoff READER cannot see."""
    for i in range(6):
        api.put_note(f"n{i}", {"v": i}).expect(200)
    api.post("/v1/commands", _delete("n1", 1)).expect(200)
    _update(api, "n2", 1, {"v": "two"})
    api.session("s_snap")
    api.fact("f_snap", "s_snap", "a fact")
    api.send("h_snap", "s_snap", RECEIVER).expect(200)


def test_snap1_snap2_pages_cover_the_state_once_in_order(api: Api) -> None:
    _seed(api)
    for as_ in (READER, WRITER):  # the handoff is hidden from READER only (VIS-1)
        whole = api.get(f"{P}/snapshot", as_).expect(200)
        assert whole["next_page_token"] is None  # the default limit holds it all
        at_seq, paged, pages = read_pages(api, as_, 2)
        assert at_seq == whole["at_seq"] and pages >= 5
        assert paged == whole["resources"] == replay(api, as_, at_seq)
        assert _keys(paged) == sorted(_keys(paged))
    assert ("handoff", "h_snap") not in _keys(read_pages(api, READER, 2)[1])
    deleted = [r for r in paged if r["resource"]["id"] == "n1"]
    assert deleted[0]["state"] == {"state": "deleted"} and deleted[0]["revision"] == 2


def test_snap1_snap4_writes_between_pages_never_appear(api: Api) -> None:
    _seed(api)
    before = api.get(f"{P}/snapshot", READER).expect(200)

    def write(page: int) -> None:
        # Every kind of write, on pages already read and on pages still to come.
        api.put_note(f"n{page}x", {"new": page}).expect(200)
        _update(api, "n5", page, {"v": f"five {page}"})
        if page == 1:
            api.post("/v1/commands", _delete("n4", 1)).expect(200)
            _update(api, "n0", 1, {"v": "zero"})
            api.fact("f_later", "s_snap", "later")

    at_seq, paged, pages = read_pages(api, READER, 2, write)
    assert pages >= 5 and at_seq == before["at_seq"]
    assert paged == before["resources"] == replay(api, READER, at_seq)
    now = api.get(f"{P}/snapshot", READER).expect(200)
    assert now["at_seq"] > at_seq and now["resources"] != paged


def test_snap2_a_page_ends_at_its_byte_bound(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(4):
        api.put_note(f"big{i}", {"text": "x" * 100}).expect(200)
    pages_module = sys.modules["aidememo.service.snapshot_pages"]
    monkeypatch.setattr(pages_module, "SNAPSHOT_PAGE_MAX_BYTES", 100)
    at_seq, paged, pages = read_pages(api, READER, 10)
    assert pages == 4 and paged == replay(api, READER, at_seq)  # each body is 111 bytes
    monkeypatch.setattr(pages_module, "SNAPSHOT_PAGE_MAX_BYTES", 112)
    assert read_pages(api, READER, 10)[2] == 2  # a page ends once its bodies reach the bound


def test_snap2_hidden_resources_count_so_a_page_may_be_empty(api: Api) -> None:
    api.session("s_hidden")
    for i in range(3):
        api.send(f"h{i}", "s_hidden", RECEIVER).expect(200)
    first = api.get(f"{P}/snapshot", READER, query={"limit": 2}).expect(200)
    assert first["resources"] == [] and first["next_page_token"] is not None  # h0, h1
    _, paged, pages = read_pages(api, READER, 2)
    assert pages == 2 and _keys(paged) == [("session", "s_hidden")]


def test_snap2_http3_snapshot_query_is_strict(api: Api) -> None:
    for bad in ("limit=0", "limit=10001", "limit=x", "after_seq=1", "limit=1&limit=2",
                "actor_id=x", "page_token=a&page_token=b"):  # fmt: skip
        api.get(f"{P}/snapshot", READER, query=bad).expect(400, "invalid_command")
    api.get(f"{P}/snapshot", READER, query="limit=10000").expect(200)


def _token(api: Api, as_: str = READER) -> str:
    api.put_note("t0", {"v": 0}).expect(200)
    api.put_note("t1", {"v": 1}).expect(200)
    page = api.get(f"{P}/snapshot", as_, query={"limit": 1}).expect(200)
    token: str = page["next_page_token"]
    return token


def test_snap3_a_token_is_valid_for_ten_minutes(api: Api) -> None:
    token = _token(api)
    api.clock.advance(SNAPSHOT_TOKEN_TTL_MS - 1)
    page = api.get(f"{P}/snapshot", READER, query={"page_token": token}).expect(200)
    assert _keys(page["resources"]) == [("custom.note", "t1")]
    api.clock.advance(1)
    api.get(f"{P}/snapshot", READER, query={"page_token": token}).expect(409, "snapshot_expired")


def test_snap3_a_foreign_or_edited_token_is_snapshot_expired(api: Api) -> None:
    token = _token(api)
    query = {"page_token": token}
    api.get(f"{P}/snapshot", WRITER, query=query).expect(409, "snapshot_expired")  # other actor
    api.provision(READER, Role.READER, project_id=OTHER_PROJECT, epoch=None)
    other = f"/v1/projects/{OTHER_PROJECT}/snapshot"
    api.get(other, READER, query=query).expect(409, "snapshot_expired")  # other project
    payload, mac = token.split(".")
    flipped = ("B" if payload[0] == "A" else "A") + payload[1:]
    forged = [
        f"{flipped}.{mac}",
        f"{payload}.{mac[:-2]}",
        f"{payload}.{mac}.",
        f"{payload}{mac}",
        "",
        "not a token",
        "x" * 2000,
    ]
    for bad in forged:
        reply = api.get(f"{P}/snapshot", READER, query={"page_token": bad})
        reply.expect(409, "snapshot_expired")
    api.get(f"{P}/snapshot", READER, query=query).expect(200)  # the real one still works


def test_snap3_auth3_every_page_checks_membership(api: Api) -> None:
    from aidememo.domain.model import MemberStatus

    token = _token(api)
    api.set_status(READER, MemberStatus.SUSPENDED)
    reply = api.get(f"{P}/snapshot", READER, query={"page_token": token})
    reply.expect(403, "project_unauthorized")


# PostgreSQL: the rows `bulk_load` commits, written set-based in one statement each (one
# function call per row costs a round trip each).
_PG_BULK = (
    "INSERT INTO resources (tenant_id, project_id, kind, resource_id, revision, body) "
    "SELECT %s::text, %s::text, 'custom.bulk', 'b' || lpad(i::text, 5, '0'), 1, "
    "convert_to('{\"i\":' || i || '}', 'UTF8') FROM generate_series(0, %s::bigint - 1) AS i",
    "INSERT INTO changes (tenant_id, project_id, seq, project_epoch, kind, resource_id, op, "
    "revision, actor_id, committed_at_ms, body) SELECT %s::text, %s::text, %s::bigint + i + 1, "
    "%s::text, 'custom.bulk', 'b' || lpad(i::text, 5, '0'), 'upsert', 1, %s::text, %s::bigint, "
    "convert_to('{\"i\":' || i || '}', 'UTF8') FROM generate_series(0, %s::bigint - 1) AS i",
    "INSERT INTO receipts (tenant_id, project_id, command_id, fingerprint, actor_id, "
    "project_seq, kind, resource_id, revision, committed_at_ms) SELECT %s::text, %s::text, "
    "'cmd_bulk_' || i, repeat('0', 64), %s::text, %s::bigint + i + 1, 'custom.bulk', "
    "'b' || lpad(i::text, 5, '0'), 1, %s::bigint FROM generate_series(0, %s::bigint - 1) AS i",
    "INSERT INTO audit (tenant_id, project_id, project_seq, command_id, operation, kind, "
    "resource_id, actor_id, committed_at_ms) SELECT %s::text, %s::text, %s::bigint + i + 1, "
    "'cmd_bulk_' || i, 'resource.put', 'custom.bulk', 'b' || lpad(i::text, 5, '0'), %s::text, "
    "%s::bigint FROM generate_series(0, %s::bigint - 1) AS i",
    "UPDATE projects SET head_seq = %s::bigint + %s::bigint "
    "WHERE tenant_id = %s::text AND project_id = %s::text",
)


def _pg_bulk(tx: Any, head: int, count: int) -> None:
    t, p, x = TENANT, PROJECT, tx._x
    resources, changes, receipts, audit, advance = _PG_BULK
    x.execute(resources, (t, p, count))
    x.execute(changes, (t, p, head, EPOCH, WRITER, START_MS, count))
    x.execute(receipts, (t, p, WRITER, head, START_MS, count))
    x.execute(audit, (t, p, head, WRITER, START_MS, count))
    x.execute(advance, (head, count, t, p))


def bulk_load(api: Api, count: int) -> None:
    """`count` resources `custom.bulk/bNNNNN` committed straight into the backend's store,
    exactly the rows a put writes (resource, change, audit row, receipt), in a few large
    transactions instead of one request each."""
    from aidememo.stores.postgres import PostgresStore

    assert api.store is not None
    store = api.store()
    scope = Scope(TENANT, PROJECT)
    head = store.read(lambda tx: tx.get_project(scope)).head_seq
    if isinstance(store, PostgresStore):
        store.transaction(lambda tx: _pg_bulk(tx, head, count))
        return
    step = 5_000

    def chunk(start: int) -> Callable[[Any], None]:
        def run(tx: Any) -> None:
            for i in range(start, min(start + step, count)):
                seq = head + i + 1
                ref = ResourceRef("custom.bulk", f"b{i:05d}")
                receipt = Receipt(
                    f"cmd_bulk_{i}", "0" * 64, TENANT, PROJECT, WRITER, seq, ref, 1, START_MS
                )
                body = canonical_bytes({"i": i})
                tx.commit_mutation(Mutation(receipt, EPOCH, "resource.put", ChangeOp.UPSERT, body))

        return run

    for start in range(0, count, step):
        store.transaction(chunk(start))


def test_snap1_snap2_snap4_25000_resources_bootstrap_page_by_page(api: Api) -> None:
    if api.backend_name not in BULK_BACKENDS:
        pytest.skip("the 25,000-resource load runs on one backend of each store family")
    _seed(api)
    bulk_load(api, 25_000)
    first = api.get(f"{P}/snapshot", READER).expect(200)
    assert len(first["resources"]) == 1_000 and first["next_page_token"] is not None

    def write(page: int) -> None:
        api.put_note(f"n{page}x", {"new": page}).expect(200)
        if page == 3:
            api.post("/v1/commands", _delete("n0", 1)).expect(200)

    at_seq, paged, pages = read_pages(api, READER, 2_500, write)
    assert pages == 11 and len(paged) == 25_000 + 8  # 6 notes, session, fact; no handoff
    assert paged == replay(api, READER, at_seq)
    assert at_seq == 25_000 + 11


def test_snap3_page_tokens_name_no_hidden_resource(api: Api) -> None:
    """A non-party paging one resource at a time: no token, decoded, names the hidden
    handoffs, contexts or handoff artifacts the pages skipped."""
    import base64

    api.session("s1")
    for n in range(3):
        api.send(f"h_hidden_{n}", "s1", RECEIVER).expect(200)
        api.put_note(f"n{n}", {"v": n}).expect(200)
    token: str | None = None
    seen: list[bytes] = []
    while True:
        query: dict[str, Any] = {"limit": 1}
        if token is not None:
            query["page_token"] = token
        page = api.get(f"{P}/snapshot", READER, query=query).expect(200)
        assert all(r["resource"]["kind"] != "handoff" for r in page["resources"])
        token = page["next_page_token"]
        if token is None:
            break
        text = token.split(".")[0]
        seen.append(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    assert len(seen) >= 3
    for raw in seen:
        assert b"h_hidden" not in raw and b"handoff" not in raw and b"note" not in raw
    assert len({len(raw) for raw in seen}) == 1
