"""`aidememo serve --workers N`: N full origin processes accepting on one listening socket.

Pre-fork: the parent binds the socket once (so a port in use is reported once, before any
worker starts), then forks N workers, each of which opens its own store, builds its own app
and runs `origin.server.serve` on the inherited socket; the kernel hands each new connection
to one of the workers that are waiting in `accept`. The parent only supervises:

- SIGTERM or SIGINT to the parent is passed to every worker as SIGTERM; each finishes its
  in-flight requests, closes its store and exits, and the parent exits 0 when all exited 0.
  Workers run in a process group of their own, so a terminal's Ctrl-C reaches them once,
  through the parent.
- A worker that exits on its own (a crash, a failed start-up) stops the others, and the
  parent exits non-zero: a service running with fewer workers than asked is not what was
  started, and a supervisor (systemd, a container runtime) restarts the whole unit.
- A worker dies with its parent (`PR_SET_PDEATHSIG` on Linux), so killing the parent never
  leaves workers holding the port.

Nothing is shared between workers but the socket and the database: each has its own token
cache (its callers re-checked in every request's transaction, SPEC.md AUTH-7), its own live
feed, and on PostgreSQL its own `LISTEN` connection for the others' commits (LIVE-9).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from types import FrameType

log = logging.getLogger("aidememo.server")

BACKLOG = 2048
_PR_SET_PDEATHSIG = 1


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host:port`, inheritable by forked workers."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


def _die_with_parent(parent: int) -> None:
    """Ask Linux to send this worker SIGTERM when its parent exits; exit now if it already
    did."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(1)


def run_workers(
    count: int, sock: socket.socket, worker: Callable[[socket.socket, int], int]
) -> int:
    """Fork `count` workers running `worker(sock, index)` (index 0 to count - 1); supervise
    them until all have exited. Returns 0 when every worker exited 0 after a stop signal,
    else non-zero."""
    parent = os.getpid()
    pids: set[int] = set()
    for index in range(count):
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                os.setpgid(0, 0)
                _die_with_parent(parent)
                code = worker(sock, index)
            except BaseException:
                log.exception("worker failed")
            finally:
                logging.shutdown()
                os._exit(code)
        pids.add(pid)
    sock.close()  # the workers hold it now
    log.info("started %d workers: %s", count, " ".join(map(str, sorted(pids))))
    stopping = False
    status = 0

    def stop_all() -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        stop_all()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while pids:
            try:
                pid, wait_status = os.wait()
            except ChildProcessError:
                break
            if pid not in pids:
                continue
            pids.discard(pid)
            code = os.waitstatus_to_exitcode(wait_status)
            if code != 0 and status == 0:
                status = code if code > 0 else 1
            if not stopping:
                log.error("worker %d exited (%d) on its own; stopping the others", pid, code)
                stopping = True
                status = status or 1
                stop_all()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status
