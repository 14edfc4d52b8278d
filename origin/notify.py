"""Commits made by other processes, heard through PostgreSQL `LISTEN` (SPEC.md LIVE-9).

While some backend is registered as listening, every commit on the PostgreSQL store notifies
the channel `aidememo_commits` with `[tenant_id, project_id, head_seq]` inside its own
transaction, so PostgreSQL delivers it when, and only if, the commit is durable.
`CommitListener` keeps one dedicated direct connection per origin process (psycopg,
autocommit) that registers its backend in `aidememo_listeners` and then runs `LISTEN`, and
hands each notification to a callback (`origin.live.LiveFeed.notified`, which wakes the
project's feed: the feed still reads the changes from the tables, so a lost notification only
delays). After `UNLISTEN *` (or at stop) it removes its row; a row left by a process that died
listening is removed by the next registration, whoever makes it. Without a row no commit
notifies: a notifying commit holds the database's one notification lock until it is durable,
so notifying commits of every project and process wait for each other (the cost is in
docs/bench-notes.md). A commit that checked the registry just before a registration
committed is not notified; the feeds' read once `LISTEN` took effect (below) or the 2 s
re-read covers it.

With `on_demand` (as `aidememo serve` runs it) the connection `LISTEN`s only while the process
has a live subscriber (`want`, which `LiveFeed` calls when its first project hub opens and its
last one closes) and runs `UNLISTEN *` otherwise. A listening session costs on every commit of
the database, whoever makes it: PostgreSQL wakes its backend to read the notification queue and
forward the message, and this thread wakes to parse it (docs/bench-notes.md), so under
`--workers N` a process without subscribers would pay N times for nothing. A subscriber's feed
may read before `LISTEN` takes effect: `on_listening` runs once it has, and
`LiveFeed.listening` then has every hub read again, so a commit made in between is read at
once rather than at the next re-read.

`LISTEN` is session state, so the connection must reach the server itself, never through a
transaction pooler (PgBouncer in transaction mode, Hyperdrive), which would hand the session to
other clients between statements; there the feed's periodic 2 s re-read remains the only way
another process's commit is seen. A connection that fails is opened again after
`retry_s`; the re-read covers whatever was missed meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from aidememo.domain.model import Scope
from aidememo.stores.postgres.sql import (
    COMMIT_CHANNEL,
    REGISTER_LISTENER,
    UNREGISTER_LISTENER,
    parse_commit_payload,
)

log = logging.getLogger("aidememo.notify")

POLL_S = 0.5
"""How long one wait for notifications lasts before the thread checks whether to stop."""


class CommitListener:
    """A thread that listens on `aidememo_commits` over its own connection to `url`."""

    def __init__(
        self,
        url: str,
        on_commit: Callable[[Scope, int], None],
        *,
        retry_s: float = 1.0,
        on_listening: Callable[[], None] | None = None,
        on_demand: bool = False,
    ) -> None:
        self.url = url
        self.on_commit = on_commit
        self.retry_s = retry_s
        self.on_listening = on_listening
        self.listening = threading.Event()
        """Set while `LISTEN` is in effect on the connection."""
        self.connected = threading.Event()
        """Set while the connection is open (listening or not)."""
        self._wanted = threading.Event()
        if not on_demand:
            self._wanted.set()
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def want(self, listen: bool) -> None:
        """Listen from now on (`listen`) or stop listening; with `on_demand` it starts unwanted.
        Returns at once: the thread runs `LISTEN` or `UNLISTEN *` (the latter within a poll)."""
        if listen:
            self._wanted.set()
        else:
            self._wanted.clear()
        self._changed.set()

    def start(self) -> None:
        """Start listening in a daemon thread (returns at once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="aidememo-listen", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop listening and close the connection (waits for the thread, at most a poll)."""
        self._stop.set()
        self._changed.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=POLL_S * 4)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except Exception as exc:  # the re-read covers the gap; try again shortly
                self.listening.clear()
                self.connected.clear()
                log.warning("commit notifications interrupted (%s); retrying", _one_line(exc))
            self._stop.wait(self.retry_s)

    def _listen(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, prepare_threshold=None) as conn:
            self.connected.set()
            while not self._stop.is_set():
                if not self._wanted.is_set():
                    self._changed.wait(POLL_S)
                    self._changed.clear()  # `want` sets `_wanted` first: the loop re-reads it
                    continue
                _register(conn)
                conn.execute(f"LISTEN {COMMIT_CHANNEL}")
                self.listening.set()
                if self.on_listening is not None:
                    self.on_listening()
                while not self._stop.is_set() and self._wanted.is_set():
                    for note in conn.notifies(timeout=POLL_S):
                        self._deliver(note.channel, note.payload)
                        if self._stop.is_set() or not self._wanted.is_set():
                            break
                conn.execute("UNLISTEN *")
                self.listening.clear()
                conn.execute(UNREGISTER_LISTENER)
            self.connected.clear()

    def _deliver(self, channel: str, payload: str) -> None:
        if channel != COMMIT_CHANNEL:
            return
        parsed = parse_commit_payload(payload)
        if parsed is None:
            log.debug("ignored a notification payload it cannot read")
            return
        tenant, project, seq = parsed
        try:
            self.on_commit(Scope(tenant, project), seq)
        except Exception:
            log.exception("commit notification hook failed")


def _register(conn: Any) -> None:
    """Register the connection's backend as listening, so commits notify (LIVE-9). A database
    whose schema has no registry yet (older than version 10) notifies on every commit anyway."""
    import psycopg

    try:
        conn.execute(REGISTER_LISTENER)
    except psycopg.errors.UndefinedTable:
        log.warning("no aidememo_listeners table (schema older than 10): listening anyway")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
