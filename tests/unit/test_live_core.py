"""The live feed's transport-free core (SPEC.md LIVE-*): what the origin's hub and the edge's
Durable Object share. Shared reads, per-subscriber cursors and their gaps, errors and close
codes, message shapes, and the lease book behind `lease_expired` notices."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aidememo.domain.canonical import canonical_bytes
from aidememo.domain.clock import FixedClock
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import ChangeOp, MemberStatus, ResourceRef, Role
from aidememo.http.app import HttpApp
from aidememo.http.live import commit_message, error_message, notice_message, page_message
from aidememo.service.access import Caller
from aidememo.service.live import (
    FeedCursor,
    Gap,
    Lease,
    LeaseBook,
    LiveSubscription,
    close_code,
    lease_of,
    read_commits,
    settle_due,
)
from aidememo.stores.in_memory import InMemoryStore

T, P, E = "t", "p", "e"


@pytest.fixture
def app() -> HttpApp:
    app = HttpApp(InMemoryStore(), clock=FixedClock(1_000))
    for actor, role in (("w", Role.WRITER), ("r", Role.READER), ("x", Role.WRITER)):
        app.services.identity.bootstrap(
            tenant_id=T, project_id=P, actor_id=actor, role=role, project_epoch=E
        )
    return app


def put(app: HttpApp, n: int, kind: str = "custom.note", body: Any = None) -> int:
    from aidememo.domain.envelope import Command

    command = Command(
        f"c{n}", P, None, "resource.put", ResourceRef(kind, f"id{n}"), ChangeOp.UPSERT,
        body if body is not None else {"n": n},
    )  # fmt: skip
    return app.services.ledger.execute_raw(Caller(T, "w"), command).project_seq


def cursor(actor: str = "w", after: int = 0) -> FeedCursor:
    return FeedCursor(LiveSubscription(Caller(T, actor), P, E, after, 100))


def test_live2_on_commit_hook_runs_once_per_new_commit_not_for_replays(app: HttpApp) -> None:
    seen: list[tuple[str, int]] = []
    app.services.ledger.on_commit.append(lambda scope, seq: seen.append((scope.project_id, seq)))
    put(app, 1)
    put(app, 1)  # the identical command again: a replay, no commit
    put(app, 2)
    assert seen == [(P, 1), (P, 2)]


def test_live2_one_read_serves_every_subscriber_one_message_per_commit(app: HttpApp) -> None:
    for n in (1, 2, 3):
        put(app, n)
    batch = read_commits(app.services.store, Caller(T, "w").scope(P), 0, ["w", "r"], 100)
    assert [row.seq for row in batch.rows] == [1, 2, 3] and batch.last_seq == 3
    renders: list[int] = []

    def render(b: Any, row: Any, visible: bool) -> str:
        renders.append(row.seq)
        return commit_message(b, row, visible)

    first, second = cursor("w"), cursor("r")
    texts = first.messages(batch, render)
    assert second.messages(batch, render) == texts  # rendered once, shared
    assert renders == [1, 2, 3]
    decoded = [json.loads(t) for t in texts]
    assert [(d["cursor"]["after_seq"], d["next_cursor"]["after_seq"]) for d in decoded] == [
        (0, 1),
        (1, 2),
        (2, 3),
    ]
    assert [d["has_more"] for d in decoded] == [True, True, False]
    # A subscriber that already has some of it gets only the rest; one behind gets a Gap.
    assert len(cursor("w", after=2).messages(batch, commit_message)) == 1
    later = read_commits(app.services.store, Caller(T, "w").scope(P), 2, ["w"], 100)
    with pytest.raises(Gap):
        cursor("w", after=1).messages(later, commit_message)


def test_live3_hidden_commits_are_empty_batches_that_advance(app: HttpApp) -> None:
    put(app, 1)
    handoff = {"from_actor": "w", "to_actor": "x", "status": "pending"}
    put(app, 2, kind="handoff", body=handoff)
    batch = read_commits(app.services.store, Caller(T, "w").scope(P), 0, ["w", "r"], 100)
    hidden = json.loads(cursor("r").messages(batch, commit_message)[1])
    shown = json.loads(cursor("w").messages(batch, commit_message)[1])
    assert hidden["entries"] == [] and hidden["next_cursor"]["after_seq"] == 2
    assert shown["entries"][0]["resource"]["resource"] == {"kind": "handoff", "id": "id2"}


def test_live3_a_batch_read_before_a_subscriber_joined_is_a_gap_not_an_error(
    app: HttpApp,
) -> None:
    """A shared read in flight while a new subscriber caught up did not ask about its actor:
    the subscriber catches up from its own cursor instead of being judged by that batch
    (it used to be closed as not a member)."""
    put(app, 1)
    batch = read_commits(app.services.store, Caller(T, "w").scope(P), 0, ["w"], 100)
    with pytest.raises(Gap):
        cursor("r").messages(batch, commit_message)
    assert len(cursor("w").messages(batch, commit_message)) == 1


def test_live5_suspension_and_new_epoch_end_the_subscription(app: HttpApp) -> None:
    put(app, 1)
    scope = Caller(T, "r").scope(P)
    app.services.identity.set_membership(T, P, "r", status=MemberStatus.SUSPENDED)
    batch = read_commits(app.services.store, scope, 0, ["r"], 100)
    with pytest.raises(AidememoError) as info:
        cursor("r").messages(batch, commit_message)
    assert info.value.code is ErrorCode.PROJECT_UNAUTHORIZED and close_code(info.value) == 4403
    stale = FeedCursor(LiveSubscription(Caller(T, "w"), P, "old_epoch", 0, 100))
    with pytest.raises(AidememoError) as info:
        stale.messages(read_commits(app.services.store, scope, 0, ["w"], 100), commit_message)
    assert close_code(info.value) == 4409


def test_live1_catch_up_pages_are_the_materialized_feed(app: HttpApp) -> None:
    for n in (1, 2, 3):
        put(app, n)
    feed = FeedCursor(LiveSubscription(Caller(T, "w"), P, E, 0, 2))
    page = feed.catch_up(app.services.ledger_reads)
    assert feed.after_seq == 2 and page.has_more
    from aidememo.http.pipeline import Admission
    from aidememo.http.routes import resolve
    from aidememo.http.types import Request

    path = f"/v1/projects/{P}/changes/materialized"
    match = resolve("GET", path)
    assert match.route is not None
    response = app.serve(
        Admission(match.route, match.params, Caller(T, "w")),
        Request("GET", path, query=f"project_epoch={E}&after_seq=0&limit=2"),
    )
    assert json.loads(page_message(page)) == json.loads(response.body)


def test_live4_error_and_notice_shapes() -> None:
    error = fail(ErrorCode.FEED_OVERFLOW, "reconnect")
    assert json.loads(error_message(error)) == {
        "error": {"code": "feed_overflow", "message": "reconnect"}
    }
    assert close_code(error) == 4429
    notice = notice_message(Lease("h1", "c1", 5, ("a", "b")))
    assert json.loads(notice) == {"type": "lease_expired", "handoff_id": "h1", "claim_id": "c1"}


def handoff_body(claim: str | None, expires: int | None, status: str = "accepted") -> bytes:
    return canonical_bytes(
        {
            "handoff_id": "h1",
            "from_actor": "a",
            "to_actor": "b",
            "status": status,
            "claim_id": claim,
            "claim_expires_at_ms": expires,
        }
    )


def test_live7_lease_book_tracks_the_earliest_live_claim_and_announces_once() -> None:
    book = LeaseBook()
    ref = ResourceRef("handoff", "h1")
    book.observe(ref, handoff_body("c1", 100))
    book.observe(ResourceRef("handoff", "h2"), handoff_body(None, None, "pending"))
    book.observe(ResourceRef("custom.note", "n"), b"{}")
    assert book.next_expiry() == 100
    assert book.due(99) == []
    due = book.due(100)  # HO-6: live while now < expires
    assert [lease.claim_id for lease in due] == ["c1"]
    # Re-read: still the same expired claim -> announced once.
    current = {"h1": lease_of("h1", handoff_body("c1", 100))}
    assert [n.claim_id for n in settle_due(book, due, current, 100)] == ["c1"]
    book.observe(ref, handoff_body("c1", 100))  # the same state read again: no new notice
    assert book.next_expiry() is None
    # Renewed by a heartbeat the hub had not read yet: no notice, tracked at the new expiry.
    book.observe(ref, handoff_body("c2", 200))
    due = book.due(200)
    renewed = {"h1": lease_of("h1", handoff_body("c2", 300))}
    assert settle_due(book, due, renewed, 200) == []
    assert book.next_expiry() == 300
    # Completed meanwhile: dropped.
    due = book.due(300)
    assert settle_due(book, due, {"h1": None}, 300) == []
    assert book.next_expiry() is None


def test_live5_a_missing_project_or_revoked_token_ends_the_subscription(app: HttpApp) -> None:
    import hashlib

    gone = read_commits(app.services.store, Caller(T, "w").scope("nope"), 0, ["w"], 100)
    with pytest.raises(AidememoError) as info:
        cursor("w").messages(gone, commit_message)
    assert close_code(info.value) == 4403
    digest = hashlib.sha256(b"never-bound").digest()
    scope = Caller(T, "w").scope(P)
    batch = read_commits(app.services.store, scope, 0, ["w"], 100, tokens=[digest])
    assert batch.tokens == {digest: False}
    sub = FeedCursor(LiveSubscription(Caller(T, "w"), P, E, 0, 100, token_sha256=digest))
    with pytest.raises(AidememoError) as info:
        sub.messages(batch, commit_message)
    assert close_code(info.value) == 4401
