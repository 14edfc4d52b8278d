"""Typed reads: handoff status, the mailbox, sessions and their facts, the member list and
lexical search (SPEC.md HO-8, MBX-*, READS-*, SRCH-*)."""

from __future__ import annotations

from dataclasses import dataclass

from aidememo.domain.canonical import decode_stored
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.handoff import lease_state
from aidememo.domain.limits import (
    MAILBOX_LIMIT_MAX,
    SEARCH_LIMIT_MAX,
    SEARCH_QUERY_MAX_BYTES,
    SESSION_FACTS_LIMIT_MAX,
    SESSIONS_LIMIT_MAX,
)
from aidememo.domain.model import MailboxQuery, Member, Project, ResourceRef, SearchPage
from aidememo.domain.tokenize import split_query
from aidememo.domain.visibility import participants
from aidememo.ports import Clock, ReadTx, Store
from aidememo.service.access import Caller, authorize


@dataclass(frozen=True, slots=True)
class Assignment:
    """One mailbox row: the handoff's latest seq, revision, record body and the lease state
    derived at read time (READS-2)."""

    project_seq: int
    revision: int
    body: bytes
    lease_state: str | None


@dataclass(frozen=True, slots=True)
class HandoffView:
    """A handoff's revision and record body, and the lease state derived at read time."""

    revision: int
    body: bytes
    lease_state: str | None


@dataclass(frozen=True, slots=True)
class MailboxPage:
    """Newest first; `next_before_seq` is None on the last page (MBX-2)."""

    assignments: list[Assignment]
    next_before_seq: int | None


@dataclass(frozen=True, slots=True)
class PageEntry:
    """One record of a page: the seq that committed it (a session's creation, a fact), its
    revision and record body."""

    project_seq: int
    revision: int
    body: bytes


@dataclass(frozen=True, slots=True)
class SessionPage:
    """Newest first; `next_before_seq` is None on the last page (READS-3)."""

    sessions: list[PageEntry]
    next_before_seq: int | None


@dataclass(frozen=True, slots=True)
class FactPage:
    """Commit order; `next_after_seq` is None on the last page (READS-4)."""

    facts: list[PageEntry]
    next_after_seq: int | None


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A search's arguments: the query text, the source filter, the page size, and the
    sequence the answer must reflect (SRCH-1, SEM-5)."""

    q: str
    source_id: str | None
    limit: int
    at_least_seq: int | None

    def check(self) -> None:
        """The checks of a search's arguments every mode shares (SRCH-1, SEM-3)."""
        if not 1 <= len(self.q.encode("utf-8")) <= SEARCH_QUERY_MAX_BYTES:
            raise fail(ErrorCode.INVALID_COMMAND, f"q must be 1-{SEARCH_QUERY_MAX_BYTES} bytes")
        if not 1 <= self.limit <= SEARCH_LIMIT_MAX:
            raise fail(ErrorCode.INVALID_COMMAND, f"limit must be an integer 1-{SEARCH_LIMIT_MAX}")
        if self.at_least_seq is not None and self.at_least_seq < 0:
            raise fail(ErrorCode.INVALID_COMMAND, "at_least_seq must not be negative")


@dataclass(frozen=True, slots=True)
class SearchResult:
    """A search answer pinned to the head it reflects (SRCH-1)."""

    project_epoch: str
    index_seq: int
    mode: str
    results: list[dict[str, object]]
    exhaustive: bool
    terms_dropped: int = 0  # distinct query terms past the cap (SRCH-7)


class TypedReads:
    """Typed read-only use cases."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def handoff(self, caller: Caller, project_id: str, handoff_id: str) -> HandoffView:
        """The handoff for the sender or receiver only (HO-8), with its lease state."""
        now_ms = self.clock.now_ms()

        def run(tx: ReadTx) -> HandoffView:
            authorize(tx, caller, project_id, write=False)
            found = tx.get_resource(caller.scope(project_id), ResourceRef("handoff", handoff_id))
            if found is None or found.body is None:
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"handoff {handoff_id} not found")
            pair = participants(found.body)
            if pair is None or caller.actor_id not in pair:
                raise fail(ErrorCode.HANDOFF_ACTOR_MISMATCH, "only sender and receiver may look")
            state = lease_state(decode_stored(found.body), now_ms)
            return HandoffView(found.revision, found.body, state)

        return self.store.read(run)

    def sessions(
        self,
        caller: Caller,
        project_id: str,
        *,
        source_id: str | None,
        before_seq: int | None,
        limit: int,
    ) -> SessionPage:
        """The project's sessions newest first, optionally of one source (READS-3).

        The store pages by creation seq; a `source_id` filter reads on until the page is full
        or the sessions run out, so a page is never short while more match."""
        if not 1 <= limit <= SESSIONS_LIMIT_MAX:
            raise fail(
                ErrorCode.INVALID_COMMAND, f"limit must be an integer 1-{SESSIONS_LIMIT_MAX}"
            )
        if before_seq is not None and before_seq < 1:
            raise fail(ErrorCode.INVALID_COMMAND, "before_seq must be a positive integer")
        scope = caller.scope(project_id)

        def run(tx: ReadTx) -> SessionPage:
            authorize(tx, caller, project_id, write=False)
            found: list[PageEntry] = []
            cursor = before_seq
            while len(found) <= limit:
                rows = tx.list_sessions(scope, cursor, limit + 1)
                for seq, session_id in rows:
                    row = tx.get_resource(scope, ResourceRef("session", session_id))
                    if row is None or row.body is None:
                        raise fail(ErrorCode.STORAGE_FAILURE, "session receipt points at nothing")
                    if source_id is None or decode_stored(row.body)["source_id"] == source_id:
                        found.append(PageEntry(seq, row.revision, row.body))
                        if len(found) > limit:
                            break
                if len(rows) <= limit:
                    break
                cursor = rows[-1][0]
            more = len(found) > limit
            page = found[:limit]
            return SessionPage(page, page[-1].project_seq if more else None)

        return self.store.read(run)

    def session_facts(
        self,
        caller: Caller,
        project_id: str,
        session_id: str,
        *,
        after_seq: int | None,
        limit: int,
    ) -> FactPage:
        """A session's facts in commit order, after `after_seq` (READS-4); facts are visible
        to every member, so nothing is filtered. An unknown session is `resource_not_found`."""
        if not 1 <= limit <= SESSION_FACTS_LIMIT_MAX:
            raise fail(
                ErrorCode.INVALID_COMMAND, f"limit must be an integer 1-{SESSION_FACTS_LIMIT_MAX}"
            )
        if after_seq is not None and after_seq < 0:
            raise fail(ErrorCode.INVALID_COMMAND, "after_seq must not be negative")
        scope = caller.scope(project_id)

        def run(tx: ReadTx) -> FactPage:
            authorize(tx, caller, project_id, write=False)
            session = tx.get_resource(scope, ResourceRef("session", session_id))
            if session is None or session.body is None:
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"session {session_id} not found")
            rows = tx.list_session_facts(scope, session_id, after_seq or 0, limit + 1)
            page: list[PageEntry] = []
            for seq, row in rows[:limit]:
                if row.body is None:
                    raise fail(ErrorCode.STORAGE_FAILURE, "a fact's change has no body")
                page.append(PageEntry(seq, row.revision, row.body))
            more = len(rows) > limit
            return FactPage(page, page[-1].project_seq if more else None)

        return self.store.read(run)

    def members(self, caller: Caller, project_id: str) -> list[Member]:
        """Every member of the project, any status, for any member to read (READS-1)."""

        def run(tx: ReadTx) -> list[Member]:
            authorize(tx, caller, project_id, write=False)
            return tx.list_members(caller.scope(project_id))

        return self.store.read(run)

    def mailbox(
        self,
        caller: Caller,
        project_id: str,
        *,
        box: str,
        source_id: str | None,
        include_completed: bool | None,
        before_seq: int | None,
        limit: int,
    ) -> MailboxPage:
        """The caller's own inbox or outbox; the inbox hides completed work by default."""
        if box not in ("inbox", "outbox"):
            raise fail(ErrorCode.INVALID_COMMAND, "box must be inbox or outbox")
        if not 1 <= limit <= MAILBOX_LIMIT_MAX:
            raise fail(ErrorCode.INVALID_COMMAND, f"limit must be an integer 1-{MAILBOX_LIMIT_MAX}")
        if before_seq is not None and before_seq < 1:
            raise fail(ErrorCode.INVALID_COMMAND, "before_seq must be a positive integer")
        completed = box == "outbox" if include_completed is None else include_completed
        query = MailboxQuery(caller.actor_id, box, source_id, completed, before_seq, limit + 1)
        scope = caller.scope(project_id)
        now_ms = self.clock.now_ms()

        def run(tx: ReadTx) -> MailboxPage:
            authorize(tx, caller, project_id, write=False)
            rows = tx.mailbox(scope, query)
            more = len(rows) > limit
            page: list[Assignment] = []
            for seq, row in rows[:limit]:
                found = tx.get_resource(scope, ResourceRef("handoff", row.handoff_id))
                if found is None or found.body is None:
                    raise fail(ErrorCode.STORAGE_FAILURE, "mailbox index points at no handoff")
                state = lease_state(decode_stored(found.body), now_ms)
                page.append(Assignment(seq, found.revision, found.body, state))
            return MailboxPage(page, page[-1].project_seq if more and page else None)

        return self.store.read(run)

    def search(self, caller: Caller, project_id: str, query: SearchQuery) -> SearchResult:
        """Lexical search over facts; the index is the head, so no waiting (SRCH-3)."""
        query.check()
        terms, dropped = split_query(query.q)
        scope = caller.scope(project_id)

        def run(tx: ReadTx) -> SearchResult:
            project: Project
            project, _ = authorize(tx, caller, project_id, write=False)
            if query.at_least_seq is not None and query.at_least_seq > project.head_seq:
                raise fail(ErrorCode.CURSOR_OUT_OF_RANGE, "at_least_seq is beyond the head")
            results: list[dict[str, object]] = []
            page = (
                tx.search(scope, terms, query.source_id, query.limit)
                if terms
                else SearchPage([], True)
            )
            for i, hit in enumerate(page.hits):
                if page.bodies is not None:
                    body = page.bodies[i]
                else:
                    found = tx.get_resource(scope, ResourceRef("fact", hit.fact_id))
                    body = None if found is None else found.body
                if body is None:
                    raise fail(ErrorCode.STORAGE_FAILURE, "search index points at no fact")
                fact = decode_stored(body)
                results.append(
                    {
                        "fact_id": fact["fact_id"],
                        "session_id": fact["session_id"],
                        "source_id": fact["source_id"],
                        "actor_id": fact["actor_id"],
                        "content": fact["content"],
                        "score": hit.score,
                    }
                )
            return SearchResult(
                project.project_epoch,
                project.head_seq,
                "lexical",
                results,
                page.exhaustive,
                dropped,
            )

        return self.store.read(run)
