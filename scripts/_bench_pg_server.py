"""The server side of `scripts/bench_pg.py`: its throwaway cluster and what it observes there.

Kept apart from the benchmark's clients and phases, which only need a URL:

- the cluster's lifecycle: `Cluster` runs `initdb` and `pg_ctl` (through `runuser -u postgres
  --` when run as root, `_as_owner`) on a free port with the durable `SERVER_SETTINGS`, and
  `stop` removes it again; `_raise_on_signal` turns SIGTERM/SIGHUP into the KeyboardInterrupt
  that makes the script's `finally` stop it;
- the server-side observation: `_Sampler` samples the clients' backends in
  `pg_stat_activity` (found by `CLIENT_APP`, which `_client_url` puts in their URL) and
  `_shares` turns the counts into shares; `_reset_stats` and `_server_stats` read the
  per-function and WAL statistics around the profile probe; `_server_facts` the settings
  reported with the figures.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from _bench_common import free_port, note

PG_BIN = os.environ.get("AIDEMEMO_PG_BIN", "/usr/lib/postgresql/15/bin")
SERVER_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "listen_addresses": "127.0.0.1",
    "max_connections": "64",
}

# -- the cluster ----------------------------------------------------------------------------


def _as_owner(argv: list[str]) -> list[str]:
    # initdb and pg_ctl refuse to run as root.
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@dataclass
class Cluster:
    """A throwaway PostgreSQL cluster; `stop` is idempotent."""

    base: str
    port: int = 0
    running: bool = False

    @property
    def data(self) -> str:
        return os.path.join(self.base, "data")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        os.chmod(self.base, 0o755)
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres", "postgres")
        # --no-sync only skips syncing initdb's own files; commits are what is measured.
        subprocess.run(
            _as_owner([f"{PG_BIN}/initdb", "-D", self.data, "-U", "postgres", "-A", "trust",
                       "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        settings = " ".join(f"-c {k}={v}" for k, v in SERVER_SETTINGS.items())
        for _attempt in range(3):
            self.port = free_port()
            done = subprocess.run(
                _as_owner([f"{PG_BIN}/pg_ctl", "-D", self.data, "-l",
                           os.path.join(self.base, "pg.log"), "-w", "-t", "30",
                           "-o", f"-p {self.port} -k {self.base} {settings}", "start"]),
                check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )  # fmt: skip
            if done.returncode == 0:
                self.running = True
                return
            note(f"pg_ctl start failed on port {self.port}: {done.stderr.decode().strip()}")
        raise RuntimeError("could not start PostgreSQL; see pg.log")

    def stop(self) -> None:
        if self.running and os.path.exists(os.path.join(self.data, "postmaster.pid")):
            for mode in ("fast", "immediate"):
                done = subprocess.run(
                    _as_owner([f"{PG_BIN}/pg_ctl", "-D", self.data, "-m", mode, "-w", "-t",
                               "30", "stop"]),
                    check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                if done.returncode == 0:
                    break
        self.running = False
        shutil.rmtree(self.base, ignore_errors=True)


def _raise_on_signal(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


# -- server-side observation ----------------------------------------------------------------

SAMPLE_INTERVAL_S = 0.1
CLIENT_APP = "bench_pg_client"
STATES = (
    "SELECT CASE WHEN state = 'active' AND wait_event IS NULL THEN 'active:cpu' "
    "WHEN wait_event IS NOT NULL AND state = 'active' THEN wait_event_type || ':' || wait_event "
    "ELSE state END FROM pg_stat_activity WHERE application_name = %s"
)


class _Sampler:
    """Samples what the clients' server backends are doing (pg_stat_activity), every
    `SAMPLE_INTERVAL_S`: running, waiting for a lock or the WAL, or idle waiting for the
    client (`idle in transaction`: the client's Python and the network inside a command;
    `idle`: between commands)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)

    def __enter__(self) -> _Sampler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._conn.close()

    def sample(self, states: dict[str, int]) -> None:
        for (state,) in self._conn.execute(STATES, (CLIENT_APP,)).fetchall():
            states[state] = states.get(state, 0) + 1


def _shares(states: dict[str, int]) -> dict[str, float]:
    total = sum(states.values()) or 1
    ordered = sorted(states.items(), key=lambda kv: -kv[1])
    return {state: round(count / total, 3) for state, count in ordered}


def _client_url(url: str) -> str:
    return f"{url}?application_name={CLIENT_APP}"


def _server_stats(url: str) -> tuple[dict[str, tuple[int, float, float]], tuple[int, float]]:
    """Per function (calls, total ms, self ms) and WAL (syncs, sync ms) since the last reset."""
    import psycopg

    time.sleep(1.2)  # backends flush their statistics at most once a second when idle
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        funcs = {
            name: (int(calls), float(total), float(self_ms))
            for name, calls, total, self_ms in conn.execute(
                "SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions"
            ).fetchall()
        }
        wal = conn.execute("SELECT wal_sync, wal_sync_time FROM pg_stat_wal").fetchall()
        syncs, sync_ms = wal[0]
    return funcs, (int(syncs), float(sync_ms))


def _reset_stats(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_reset(), pg_stat_reset_shared('wal')")


def _server_facts(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        facts = {
            name: conn.execute(f"SHOW {name}").fetchall()[0][0]
            for name in ("server_version", "fsync", "synchronous_commit", "full_page_writes",
                         "wal_sync_method", "shared_buffers")
        }  # fmt: skip
    return facts
