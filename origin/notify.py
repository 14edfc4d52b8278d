"""Commits made by other processes, heard through PostgreSQL `LISTEN` (SPEC.md LIVE-9).

Every commit on the PostgreSQL store notifies the channel `aidememo_commits` with
`[tenant_id, project_id, head_seq]` inside its own transaction, so PostgreSQL delivers it
when, and only if, the commit is durable. `CommitListener` keeps one dedicated direct
connection per origin process (psycopg, autocommit) that has run `LISTEN`, and hands each
notification to a callback (`origin.live.LiveFeed.notified`, which wakes the project's feed:
the feed still reads the changes from the tables, so a lost notification only delays).

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

from aidememo.domain.model import Scope
from aidememo.stores.postgres.sql import COMMIT_CHANNEL, parse_commit_payload

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
    ) -> None:
        self.url = url
        self.on_commit = on_commit
        self.retry_s = retry_s
        self.on_listening = on_listening
        self.listening = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start listening in a daemon thread (returns at once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="aidememo-listen", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop listening and close the connection (waits for the thread, at most a poll)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=POLL_S * 4)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except Exception as exc:  # the re-read covers the gap; try again shortly
                self.listening.clear()
                log.warning("commit notifications interrupted (%s); retrying", _one_line(exc))
            self._stop.wait(self.retry_s)

    def _listen(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, prepare_threshold=None) as conn:
            conn.execute(f"LISTEN {COMMIT_CHANNEL}")
            self.listening.set()
            if self.on_listening is not None:
                self.on_listening()
            while not self._stop.is_set():
                for note in conn.notifies(timeout=POLL_S):
                    self._deliver(note.channel, note.payload)
                    if self._stop.is_set():
                        break

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


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
