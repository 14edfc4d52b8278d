"""A real `aidememo serve` on a PostgreSQL 15 cluster of its own whose WAL directory is a
small tmpfs that fills up (ERR-4, READY-1, READY-2): the server PANICs on the full WAL disk,
so the write gets 503 `storage_failure` with Retry-After, `/ready` is 503 `unavailable` and
`/health` 200 says so. Its crash recovery then either frees WAL with its checkpoint and comes
back by itself, or fails for lack of space and shuts the server down (both happen here,
depending on what the checkpoint can recycle); the test gives the disk room and starts the
cluster when it is down. The same origin process reconnects by itself: `/ready` recovers by
its probe, writes succeed, and every acknowledged write is there.

Needs root (mount, and the cluster runs as the `postgres` user) and the PostgreSQL 15
binaries; elsewhere the test is skipped and says why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aidememo.cli.main import main
from tests.origin.test_disk_full import _client, _command
from tests.origin.test_serve_process import ServeProcess, free_port

PG_BIN = Path(os.environ.get("AIDEMEMO_PG_BIN", "/usr/lib/postgresql/15/bin"))
WAL_DISK = "6m"  # 1 MiB segments: initdb leaves about 1 MiB of it free
MAX_WRITES = 400
DEADLINE_S = 90.0  # a bound for a hung server, not a timing assertion


class Cluster:
    """A throwaway cluster whose `pg_wal` is a tmpfs; run as the `postgres` user."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.wal = root / "wal"
        self.data = root / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["runuser", "-u", "postgres", "--", *args], capture_output=True, text=True, check=False
        )

    def pg_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), *args)

    def start(self, *, check: bool = True) -> bool:
        """Start the cluster; True when it started (`check`: fail the test otherwise)."""
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c min_wal_size=2MB -c max_wal_size=64MB"
        )
        log = str(self.root / "pg.log")
        done = self.pg_ctl("-l", log, "-w", "-t", "60", "-o", options, "start")
        assert done.returncode == 0 or not check, done.stdout + done.stderr + self.log()
        return done.returncode == 0

    def running(self) -> bool:
        return self.pg_ctl("status").returncode == 0

    def log(self) -> str:
        path = self.root / "pg.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs and running a cluster as postgres need root")
    if not (PG_BIN / "initdb").exists() or shutil.which("runuser") is None:
        pytest.skip(f"needs the PostgreSQL 15 binaries ({PG_BIN}) and runuser")
    root = Path(tempfile.mkdtemp(prefix="aidememo-walfull-"))
    os.chmod(root, 0o755)
    made = Cluster(root)
    made.wal.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={WAL_DISK},mode=0700", "tmpfs", str(made.wal)],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        if mounted.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(made.wal, "postgres", "postgres")
        init = made.run(
            str(PG_BIN / "initdb"),
            "-D",
            str(made.data),
            f"--waldir={made.wal / 'pg_wal'}",
            "--wal-segsize=1",
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        )
        assert init.returncode == 0, init.stdout + init.stderr
        made.start()
        yield made
    finally:
        if made.running():
            made.pg_ctl("-m", "immediate", "-w", "stop")
        subprocess.run(["umount", "-l", str(made.wal)], check=False)
        shutil.rmtree(root, ignore_errors=True)


def test_err4_ready1_ready2_full_wal_disk_stops_postgres_and_the_origin_recovers(
    tmp_path: Path, cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    url = cluster.url
    token_file = tmp_path / "demo.token"
    assert main(["admin", "migrate", "--database", url]) == 0
    assert main(["token", "new", "--out", str(token_file)]) == 0
    ids = ["--tenant-id", "local", "--project-id", "demo", "--actor-id", "demo-agent"]
    assert main(["bootstrap", "--database", url, *ids, "--token-file", str(token_file)]) == 0
    capsys.readouterr()
    token = token_file.read_text().strip()
    server = ServeProcess(tmp_path / "home", tmp_path / "serve.log", "--database", url)
    acked: list[int] = []
    clients = contextlib.ExitStack()
    try:
        client = clients.enter_context(_client(server, token))
        assert client.get("/ready").json()["state"] == "ok"
        failed = None
        for n in range(MAX_WRITES):
            reply = client.post("/v1/commands", json=_command(n))
            if reply.status_code != 200:
                failed = reply
                break
            acked.append(n)
        assert failed is not None, f"{len(acked)} writes all fit: {cluster.log()}"
        # The full WAL disk PANICs the server: a 503 to retry, never a 5xx of another kind.
        assert failed.status_code == 503, failed.text
        assert failed.json()["error"]["code"] == "storage_failure"
        assert failed.headers["retry-after"] == "1"
        ready = client.get("/ready")
        health = client.get("/health")
        assert health.status_code == 200  # liveness: the origin itself still serves
        if ready.status_code == 503:
            assert ready.json()["state"] == health.json()["state"] == "unavailable"
        else:  # a probe ran after the cluster's own crash recovery had already finished
            assert cluster.log().count("ready to accept connections") >= 2, ready.text
        log = cluster.log()
        assert "No space left on device" in log, log

        # Room again, and the operator starts the cluster: the origin needs no restart.
        done = subprocess.run(
            ["mount", "-o", "remount,size=64m", str(cluster.wal)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + DEADLINE_S
        restarted = False
        while (ready := client.get("/ready")).status_code != 200:
            assert time.monotonic() < deadline, ready.text + cluster.log()
            if not cluster.running():  # its crash recovery failed for lack of space
                restarted = cluster.start(check=False) or restarted
            time.sleep(0.5)
        assert client.get("/health").json()["state"] == "ok"
        for n in range(MAX_WRITES, MAX_WRITES + 3):
            reply = client.post("/v1/commands", json=_command(n))
            assert reply.status_code == 200, reply.text
            acked.append(n)
        for n in acked:
            got = client.get(f"/v1/projects/demo/resources/custom.note/note-{n}")
            assert got.status_code == 200, (n, got.text)
            assert got.json()["state"]["body"]["n"] == n
        how = "the cluster restarted by the test" if restarted else "its own crash recovery"
        print(f"\nWAL disk full after {len(acked) - 3} acknowledged writes; back by {how}")
    finally:
        clients.close()
        server.kill()
