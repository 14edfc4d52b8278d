"""A kill -9 soak against a real `aidememo serve` on a SQLite file (STORE-4, REC-2).

At least 20 cycles of: start the server, eight writer threads committing facts with unique
command ids, SIGKILL at a random moment, restart. After each restart every acknowledged write
(a 200 receipt the client received) is present at the seq its receipt named, and the change
feed is dense: seqs 1..head with no gap and none twice. Writes that were in flight at the kill
may or may not have landed; either is fine, as long as the feed stays dense.

Marked `slow` (skipped unless AIDEMEMO_SLOW=1); it prints its cycles, writes and duration.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from aidememo.cli.main import main
from tests.origin.test_serve_process import ServeProcess

CYCLES = 20
WRITERS = 8
P = "/v1/projects/demo"
EPOCH = "e_kill"


def _facts(client: httpx.Client, writer: int, cycle: int, acked: dict[str, int]) -> None:
    """Commit facts until the server goes away; record each acknowledged one's seq."""
    n = 0
    while True:
        fact_id = f"f_{cycle}_{writer}_{n}"
        body = {
            "command_id": f"cmd_{fact_id}",
            "payload": {"fact_id": fact_id, "session_id": "s_kill", "content": f"write {n}"},
        }
        try:
            reply = client.post(f"{P}/facts", json=body)
        except httpx.TransportError:
            return
        if reply.status_code != 200:
            raise AssertionError(f"{fact_id}: {reply.status_code} {reply.text[:300]}")
        acked[fact_id] = int(reply.json()["project_seq"])
        n += 1


def _feed(client: httpx.Client) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    after = 0
    while True:
        page = client.get(
            f"{P}/changes", params={"project_epoch": EPOCH, "after_seq": after, "limit": 10_000}
        )
        assert page.status_code == 200, page.text
        body = page.json()
        entries += body["entries"]
        after = int(body["next_cursor"]["after_seq"])
        if not body["has_more"]:
            return entries


def _check(client: httpx.Client, acked: dict[str, int]) -> int:
    """Every acknowledged fact is at its receipt's seq and the feed is 1..head: the head."""
    entries = _feed(client)
    seqs = [int(e["seq"]) for e in entries]
    assert seqs == list(range(1, len(seqs) + 1)), "the change feed has a gap or a repeat"
    head = len(seqs)
    beyond: dict[str, str | int] = {"project_epoch": EPOCH, "after_seq": head + 1}
    past = client.get(f"{P}/changes", params=beyond)  # FEED-3: head + 1 is past the head
    assert past.status_code == 409, past.text
    at = {int(e["seq"]): e["resource"]["id"] for e in entries}
    lost = {fact_id: seq for fact_id, seq in acked.items() if at.get(seq) != fact_id}
    assert not lost, f"{len(lost)} acknowledged writes missing, e.g. {sorted(lost.items())[:5]}"
    return head


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_store4_rec2_kill_9_loop_keeps_every_acknowledged_write_and_a_dense_feed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = str(tmp_path / "aidememo.db")
    token_file = tmp_path / "demo.token"
    assert main(["token", "new", "--out", str(token_file)]) == 0
    ids = ["--tenant-id", "local", "--project-id", "demo", "--actor-id", "demo-agent"]
    args = [*ids, "--project-epoch", EPOCH, "--token-file", str(token_file)]
    assert main(["bootstrap", "--database", database, *args]) == 0
    capsys.readouterr()
    headers = {"authorization": f"Bearer {token_file.read_text().strip()}"}
    rng = random.Random()
    acked: dict[str, int] = {}
    started = time.monotonic()
    heads = []
    for cycle in range(CYCLES + 1):
        server = ServeProcess(tmp_path / "home", tmp_path / "serve.log", "--database", database)
        try:
            with httpx.Client(base_url=server.url, headers=headers, timeout=10.0) as client:
                heads.append(_check(client, acked))
                if cycle == 0:
                    session = {"command_id": "c_s", "payload": {"session_id": "s_kill",
                                                                "topic": "kill loop"}}  # fmt: skip
                    assert client.post(f"{P}/sessions", json=session).status_code == 200
                if cycle == CYCLES:  # the last start only checks
                    break
                per_writer: list[dict[str, int]] = [{} for _ in range(WRITERS)]
                threads = []
                for w in range(WRITERS):
                    conn = httpx.Client(base_url=server.url, headers=headers, timeout=10.0)
                    t = threading.Thread(target=_write, args=(conn, w, cycle, per_writer[w]))
                    threads.append(t)
                    t.start()
                time.sleep(rng.uniform(0.1, 1.0))
                server.proc.kill()  # SIGKILL
                server.proc.wait(timeout=10)
                for t in threads:
                    t.join(timeout=30)
                    assert not t.is_alive(), "a writer hung after the kill"
                for done in per_writer:
                    acked.update(done)
        finally:
            server.kill()
    took = time.monotonic() - started
    print(
        f"\nkill -9 loop: {CYCLES} cycles x {WRITERS} writers, {len(acked)} acknowledged writes,"
        f" head {heads[-1]}, {took:.1f} s"
    )
    assert len(acked) >= CYCLES, "too few writes were acknowledged to prove anything"


def _write(client: httpx.Client, writer: int, cycle: int, acked: dict[str, int]) -> None:
    with client:
        _facts(client, writer, cycle, acked)
