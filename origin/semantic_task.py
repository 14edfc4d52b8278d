"""The origin's semantic search (SPEC.md SEM-2, SEM-6, SEM-7): the provider loaded once per
process for the queries, the query-time matrix search the app answers with, and the indexer
as a child process of the server (unless a separate `aidememo indexer` does the indexing).

With `serve --workers N` one worker runs the child and publishes its status to a file the
other workers' `/ready` reads (`shared_status`), so N workers index once.

The child is `aidememo indexer --attached`, the same code as the separate indexer: it cannot
hold the server's interpreter lock against the request loop, so writes keep their pace while
the index catches up. It reports its status as JSON lines on its stdout, which `/ready` and
the lag metric repeat, and it stops when its stdin closes: when the server stops it, and also
when the server dies without stopping it. What it writes on stderr is logged through the
server's own logger, line by line, so `--log-format json` stays one object per line.

A provider that cannot load (the `semantic` extra missing, a model file that fails its pin)
is logged and the origin serves without it: `auto` searches answer lexically and say why,
`semantic` and `hybrid` answer `semantic_unavailable`.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

import aidememo
from aidememo import metrics
from aidememo.domain.errors import AidememoError
from aidememo.ports import Embedder

log = logging.getLogger("aidememo.semantic")

OFF = "off"
RESTART_S = 2.0  # a child that exits on its own is started again after this pause
STOP_S = 30.0  # how long a stop waits for the child's current batch before killing it
# where this process imports aidememo from, so the child runs the same code
CODE_ROOT = str(Path(aidememo.__file__).resolve().parent.parent)


def load_provider(spec: str) -> Embedder | None:
    """The embedder `spec` names (`aidememo.embedding.load_embedder`), None for `off` or
    when it cannot load (logged)."""
    if spec == OFF:
        return None
    try:
        from aidememo.embedding import load_embedder

        embedder = load_embedder(spec, threads=1)
    except (ImportError, AidememoError) as exc:
        log.warning("semantic search off: the embedding provider did not load (%s)", exc)
        return None
    log.info("semantic search with %s", embedder.fingerprint.text())
    return embedder


class IndexerTask:
    """Runs `aidememo indexer --attached` on `database` with the provider `embedding` as a
    child process from `start()` until `stop()`, restarting it if it exits on its own, and
    keeps the last status it reported (`status`, for `/ready`)."""

    def __init__(
        self,
        database: str,
        embedding: str,
        fingerprint: dict[str, object],
        shared: Path | None = None,
    ) -> None:
        self.database = database
        self.embedding = embedding
        self._fingerprint = fingerprint
        self._status = initial_status(fingerprint)
        self._shared = shared  # where the other workers of `serve --workers` read the status
        self._exits = 0  # children that exited on their own
        self._exit_error: str | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._child: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(
            target=self._supervise, name="aidememo-indexer", daemon=True
        )

    def status(self) -> dict[str, object]:
        """What `/ready` reports of the indexer (SEM-7): the running child's last status line,
        its errors counting also the children that exited on their own."""
        with self._lock:
            status = dict(self._status)
            if self._exits:
                status["errors"] = int(str(status["errors"])) + self._exits
                status["last_error"] = status["last_error"] or self._exit_error
            return status

    def start(self) -> None:
        """Start the child (once)."""
        self._publish()
        self._thread.start()

    def stop(self) -> None:
        """Close the child's stdin (it stops after its current batch) and wait for it, killing
        it after `STOP_S`."""
        self._stopping.set()
        child = self._child
        if child is not None and child.stdin is not None:
            child.stdin.close()
        if not self._thread.is_alive():
            return
        self._thread.join(timeout=STOP_S)
        if self._thread.is_alive() and child is not None:
            child.kill()  # a batch that did not end in STOP_S
            self._thread.join(timeout=5)

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, "AIDEMEMO_DATABASE_URL": self.database,
               "AIDEMEMO_EMBEDDING": self.embedding}  # fmt: skip
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = CODE_ROOT if not path else f"{CODE_ROOT}{os.pathsep}{path}"
        return subprocess.Popen(
            [sys.executable, "-m", "aidememo", "indexer", "--attached"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # a terminal's Ctrl-C reaches the server, which stops it
        )

    def _supervise(self) -> None:
        while not self._stopping.is_set():
            self._child = child = self._spawn()
            if self._stopping.is_set() and child.stdin is not None:
                child.stdin.close()  # a stop() that came while the child was starting
            assert child.stdout is not None and child.stderr is not None
            relay = threading.Thread(
                target=_relay, args=(child.stderr,), name="aidememo-indexer-log", daemon=True
            )
            relay.start()
            for line in child.stdout:
                self._report(line)
            code = child.wait()
            relay.join(timeout=5)
            if self._stopping.is_set():
                return
            with self._lock:
                self._exits += 1
                self._exit_error = f"indexer exited with {code}"
                self._status = initial_status(self._fingerprint)  # the next child reports anew
            self._publish()
            log.warning("the semantic indexer exited with %s; starting it again", code)
            self._stopping.wait(RESTART_S)

    def _report(self, line: bytes) -> None:
        try:
            status = json.loads(line)
        except ValueError:
            return
        if not isinstance(status, dict):
            return
        with self._lock:
            self._status.update(status)
        self._publish()
        lag = status.get("index_lag")
        if isinstance(lag, int):
            metrics.semantic_lag(lag)

    def _publish(self) -> None:
        """Write the status where the other workers read it (replaced whole, never torn)."""
        if self._shared is not None:
            partial = self._shared.with_suffix(".partial")
            partial.write_text(json.dumps(self.status()))
            os.replace(partial, self._shared)


def initial_status(fingerprint: dict[str, object]) -> dict[str, object]:
    """What `/ready` reports of an indexer that has reported nothing yet: its lag unknown."""
    return {
        "semantic_model": fingerprint,
        "index_lag": None,
        "facts_indexed": 0,
        "errors": 0,
        "last_error": None,
    }


def shared_status(path: Path, fingerprint: dict[str, object]) -> Callable[[], dict[str, object]]:
    """`/ready`'s indexer status in a worker of `serve --workers` that does not run the
    indexer: what the worker running it last published at `path`."""

    def status() -> dict[str, object]:
        try:
            published = json.loads(path.read_text())
        except (OSError, ValueError):
            return initial_status(fingerprint)
        return published if isinstance(published, dict) else initial_status(fingerprint)

    return status


def _relay(stream: IO[bytes]) -> None:
    """Log each line the child writes on stderr through this server's logger."""
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip()
        if line:
            log.info("indexer: %s", line)
