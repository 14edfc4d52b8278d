"""The container tier: the images `scripts/container build` makes, run as `deploy/compose.yaml`
runs them (two origin replicas over one PostgreSQL 15, SeaweedFS), through the same script an
operator uses (`scripts/container up` and `down`), spoken to over the published loopback ports.

Skipped without podman, except under CI=true, where `scripts/container build` installs what it
needs. Everything the module starts (containers, their network and volumes, the secrets
directory) is removed at its end, and the last test checks nothing of the project is left.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from websockets.sync.client import connect

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "container"
WAIT_S = 60.0  # a bound on waiting for what must happen, never a measured expectation
TENANT, PROJECT, ACTOR, REVIEWER = "t_compose", "p_compose", "a_compose", "a_reviewer"
PROBE_BUCKET = "aidememo-probe"  # not the origins' bucket of bodies

pytestmark = [pytest.mark.container, pytest.mark.timeout(900)]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Deployment:
    project: str
    env: dict[str, str]
    a: str  # origin-a's URL
    b: str  # origin-b's URL
    metrics_a: str
    s3: str
    secrets: Path
    token: str = ""
    reviewer: str = ""

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def headers(self, token: str | None = None) -> dict[str, str]:
        return {"authorization": f"Bearer {token or self.token}"}

    def podman(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["podman", *args], env=self.env, capture_output=True, text=True, check=check
        )


def _run_script(env: dict[str, str], *args: str, timeout: float = 600) -> None:
    proc = subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, f"scripts/container {' '.join(args)}:\n{proc.stderr[-4000:]}"


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"{url} did not become ready")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    if shutil.which("podman") is None and not os.environ.get("CI"):
        pytest.skip("podman is not installed (scripts/container build installs it; CI=true runs)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
    env["CONTAINERS_CONF"] = str(REPO / "deploy" / "containers.conf")
    # This checkout's own origin image: another checkout's test run may build at the same time.
    checkout = hashlib.sha256(str(REPO).encode()).hexdigest()[:10]
    env["AIDEMEMO_ORIGIN_IMAGE"] = f"localhost/aidememo-origin:test-{checkout}"
    _run_script(env, "build")
    project = f"aidememo-test-{secrets.token_hex(3)}"
    ports = {name: _free_port() for name in ("a", "b", "ma", "mb", "s3")}
    secrets_dir = tmp_path_factory.mktemp("compose-secrets")
    env.update(
        AIDEMEMO_COMPOSE_PROJECT=project,
        AIDEMEMO_SECRETS_DIR=str(secrets_dir),
        AIDEMEMO_ORIGIN_A_PORT=str(ports["a"]),
        AIDEMEMO_ORIGIN_B_PORT=str(ports["b"]),
        AIDEMEMO_METRICS_A_PORT=str(ports["ma"]),
        AIDEMEMO_METRICS_B_PORT=str(ports["mb"]),
        AIDEMEMO_S3_PORT=str(ports["s3"]),
        # One token writes everything here; each replica counts its own window (RATE-3).
        AIDEMEMO_RATE_LIMIT="100000/60",
    )
    dep = Deployment(
        project,
        env,
        f"http://127.0.0.1:{ports['a']}",
        f"http://127.0.0.1:{ports['b']}",
        f"http://127.0.0.1:{ports['ma']}",
        f"http://127.0.0.1:{ports['s3']}",
        secrets_dir,
    )
    try:
        _run_script(env, "up")
        _wait_ready(dep.a)
        _wait_ready(dep.b)
        admin = (secrets_dir / "admin.token").read_text().strip()
        dep.token, dep.reviewer = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        for actor, token in ((ACTOR, dep.token), (REVIEWER, dep.reviewer)):
            body = {
                "tenant_id": TENANT,
                "project_id": PROJECT,
                "actor_id": actor,
                "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
            }
            reply = httpx.post(f"{dep.a}/v1/admin/bootstrap", json=body, headers=dep.headers(admin))
            assert reply.status_code == 200, reply.text
        yield dep
    finally:
        _run_script(env, "down", timeout=300)
        label = f"label=io.podman.compose.project={project}"
        left = [
            dep.podman(*what, "-q", "--filter", label).stdout
            for what in (("ps", "-a"), ("volume", "ls"), ("network", "ls"))
        ]
        assert left == ["", "", ""], f"left behind: {left}"


def _fact(url: str, dep: Deployment, fid: str, session: str, text: str) -> httpx.Response:
    body = {
        "command_id": f"cmd-{fid}",
        "payload": {"fact_id": fid, "session_id": session, "content": text},
    }
    return httpx.post(
        f"{url}/v1/projects/{PROJECT}/facts", json=body, headers=dep.headers(), timeout=10
    )


def _session(url: str, dep: Deployment, sid: str) -> None:
    body = {"command_id": f"cmd-{sid}", "payload": {"session_id": sid, "topic": "compose"}}
    reply = httpx.post(f"{url}/v1/projects/{PROJECT}/sessions", json=body, headers=dep.headers())
    assert reply.status_code == 200, reply.text


def _get(url: str, dep: Deployment, route: str, **params: Any) -> Any:
    reply = httpx.get(
        f"{url}/v1/projects/{PROJECT}/{route}", params=params, headers=dep.headers(), timeout=10
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


def _feed(url: str, dep: Deployment) -> list[int]:
    """Every sequence number of the project's change feed, read through `url`."""
    epoch = _get(url, dep, "identity")["project_epoch"]
    seqs: list[int] = []
    after = 0
    while True:
        page = _get(url, dep, "changes", project_epoch=epoch, after_seq=after, limit=500)
        seqs += [e["seq"] for e in page["entries"]]
        after = page["next_cursor"]["after_seq"]
        if not page["has_more"]:
            return seqs


def test_deploy1_smoke_through_both_replicas(deployment: Deployment) -> None:
    dep = deployment
    _session(dep.a, dep, "s_smoke")
    assert _fact(dep.b, dep, "f_smoke", "s_smoke", "compose smoke fact").status_code == 200
    assert _get(dep.a, dep, "resources/fact/f_smoke")["resource"]["id"] == "f_smoke"
    hits = _get(dep.a, dep, "search", q="smoke")
    assert "f_smoke" in json.dumps(hits)
    handoff = {
        "command_id": "cmd-h_smoke",
        "payload": {"handoff_id": "h_smoke", "session_id": "s_smoke", "to_actor": REVIEWER},
    }
    reply = httpx.post(
        f"{dep.b}/v1/projects/{PROJECT}/handoffs", json=handoff, headers=dep.headers()
    )
    assert reply.status_code == 200, reply.text
    status = httpx.get(
        f"{dep.a}/v1/projects/{PROJECT}/handoffs/h_smoke", headers=dep.headers(dep.reviewer)
    )
    assert status.status_code == 200, status.text
    assert "h_smoke" in status.text


MEANING = {
    "f_pool": "the connection pool holds 2 connections; raise it to 20 before the launch",
    "f_lunch": "the team lunch moved to Thursday at noon in the small room",
    "f_tokens": "buttons take the primary colour token of the design system",
}
ASKED = "why is the database saturated?"


def test_sem8_indexer_service_indexes_and_both_origins_search_by_meaning(
    deployment: Deployment,
) -> None:
    """Facts written through origin-a are embedded by the compose `indexer` service (the origins
    run none) and found by meaning through origin-b, with no word of the question in them."""
    dep = deployment
    _session(dep.a, dep, "s_meaning")
    for fid, text in MEANING.items():
        assert _fact(dep.a, dep, fid, "s_meaning", text).status_code == 200
    head = _feed(dep.a, dep)[-1]
    deadline = time.monotonic() + WAIT_S * 2
    while True:
        found = _get(dep.b, dep, "search", q=ASKED, mode="auto", limit=3)
        if found["mode"] == "hybrid" and found["index_seq"] >= head:
            break
        assert time.monotonic() < deadline, (found, dep.podman("logs", dep.container("indexer")))
        time.sleep(0.5)
    found = _get(dep.b, dep, "search", q=ASKED, mode="semantic", limit=3)
    assert found["mode"] == "semantic"
    assert found["semantic_model"]["provider"] == "bundled"
    assert found["results"][0]["fact_id"] == "f_pool"
    logs = dep.podman("logs", dep.container("indexer")).stderr
    assert "indexing with bundled/all-MiniLM-L6-v2-int8" in logs
    # The origins run no indexer of their own: /ready carries no indexer's status.
    assert "semantic" not in httpx.get(f"{dep.a}/ready", timeout=10).json()


NO_NETWORK_SEARCH = """
import json, tempfile
from pathlib import Path
from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.records import CreateRequest
from aidememo.embedding import load_embedder
from aidememo.embedding.matrix import MatrixSearch
from aidememo.http.app import Services
from aidememo.service.access import Caller
from aidememo.service.semantic_indexer import SemanticIndexer
from aidememo.stores.sqlite.store import SqliteStore

facts = json.loads(%r)
embedder = load_embedder()
with tempfile.TemporaryDirectory() as tmp:
    store = SqliteStore.open_file(Path(tmp) / "offline.sqlite")
    services = Services(store, SystemClock(), RandomIds(), 60_000, semantic=MatrixSearch(embedder))
    services.identity.bootstrap(tenant_id="t", project_id="p", actor_id="a")
    caller = Caller("t", "a")
    services.typed_writes.create_session(
        caller, "p", CreateRequest("c-s", {"session_id": "s", "topic": "offline"}))
    for fid, text in facts.items():
        services.typed_writes.create_fact(
            caller, "p", CreateRequest("c-" + fid, {"fact_id": fid, "session_id": "s",
                                                    "content": text}))
    SemanticIndexer(store, embedder).run_until_idle()
    answer = services.searches.search(caller, "p", q=%r, source_id=None, limit=3,
                                      at_least_seq=None, mode="semantic")
    print(json.dumps(answer.as_json()))
    store.close()
"""


def test_sem8_image_searches_by_meaning_with_no_network(deployment: Deployment) -> None:
    """The bundled model is inside the image: a container with no network at all loads it
    (pins checked), indexes facts and finds one by meaning."""
    dep = deployment
    script = NO_NETWORK_SEARCH % (json.dumps(MEANING), ASKED)
    proc = dep.podman(
        "run", "--rm", "--network=none", "--read-only", "--tmpfs", "/tmp",
        "--entrypoint", "python3", dep.env["AIDEMEMO_ORIGIN_IMAGE"], "-c", script,
    )  # fmt: skip
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert answer["mode"] == "semantic"
    assert answer["semantic_model"]["model"] == "all-MiniLM-L6-v2-int8"
    assert answer["results"][0]["fact_id"] == "f_pool"


def test_deploy1_live9_live_feed_on_one_replica_sees_a_commit_on_the_other(
    deployment: Deployment,
) -> None:
    dep = deployment
    epoch = _get(dep.b, dep, "identity")["project_epoch"]
    after = _feed(dep.b, dep)[-1]
    query = urlencode({"project_epoch": epoch, "after_seq": after})
    ws_url = dep.b.replace("http://", "ws://") + f"/v1/projects/{PROJECT}/changes/live?{query}"
    with connect(ws_url, additional_headers=dep.headers(), open_timeout=WAIT_S) as sub:
        first = json.loads(sub.recv(timeout=WAIT_S))
        assert first["next_cursor"]["after_seq"] == after
        _session(dep.a, dep, "s_live")
        batch = json.loads(sub.recv(timeout=WAIT_S))
    assert [e["change"]["resource"]["id"] for e in batch["entries"]] == ["s_live"]


def test_deploy3_image_runs_unprivileged_read_only_with_its_requirements(
    deployment: Deployment,
) -> None:
    dep = deployment
    name = dep.container("origin-b")
    assert dep.podman("exec", name, "id", "-un").stdout.strip() == "aidememo"
    refused = dep.podman("exec", name, "touch", "/opt/aidememo/x", check=False)
    assert refused.returncode != 0 and "Read-only file system" in refused.stderr
    inside = dep.podman("exec", name, "cat", "/opt/aidememo/requirements.txt").stdout
    assert inside == (REPO / "deploy" / "requirements.txt").read_text()
    config = json.loads(dep.podman("image", "inspect", dep.env["AIDEMEMO_ORIGIN_IMAGE"]).stdout)
    assert config[0]["Healthcheck"]["Test"][0] == "CMD"  # kept by the docker format
    assert dep.podman("healthcheck", "run", name, check=False).returncode == 0


def test_metrics1_metrics2_a_replica_serves_prometheus_on_its_own_port(
    deployment: Deployment,
) -> None:
    dep = deployment
    _session(dep.a, dep, "s_metrics")
    text = httpx.get(f"{dep.metrics_a}/metrics", timeout=10).text
    assert re.search(
        r'aidememo_http_requests_total\{[^}]*route="create_session"[^}]*\} [1-9]', text
    )
    assert re.search(r"^aidememo_commit_duration_seconds_count [1-9]", text, re.M)
    # The API port does not serve them.
    assert httpx.get(f"{dep.a}/metrics").status_code == 404


def test_deploy5_seaweedfs_serves_s3_with_conditional_writes(deployment: Deployment) -> None:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    dep = deployment
    ident = json.loads((dep.secrets / "s3.json").read_text())["identities"][0]
    cred = ident["credentials"][0]
    s3 = boto3.client(
        "s3",
        endpoint_url=dep.s3,
        aws_access_key_id=cred["accessKey"],
        aws_secret_access_key=cred["secretKey"],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 10}),
    )
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            s3.create_bucket(Bucket=PROBE_BUCKET)
            break
        except ClientError:
            raise
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    s3.put_object(Bucket=PROBE_BUCKET, Key="k", Body=b"one", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=PROBE_BUCKET, Key="k", Body=b"two", IfNoneMatch="*")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3.get_object(Bucket=PROBE_BUCKET, Key="k")["Body"].read() == b"one"


def test_deploy1_obj4_grant3_artifact_through_a_grant_across_replicas(
    deployment: Deployment,
) -> None:
    """Reserve on origin-a, PUT the body from the host to the grant's URL (SeaweedFS's published
    port), publish through origin-a, resolve and download through origin-b."""
    dep = deployment
    _session(dep.a, dep, "s_art")
    data = secrets.token_bytes(100_000)
    digest = hashlib.sha256(data).hexdigest()
    path = "sessions/s_art/artifacts/blob.bin"
    payload = {"path": path, "size_bytes": len(data),
               "content_type": "application/octet-stream", "sha256": digest}  # fmt: skip
    base = f"/v1/projects/{PROJECT}"
    reply = httpx.post(f"{dep.a}{base}/artifact-reservations", headers=dep.headers(),
                       json={"command_id": "cmd-art", "payload": payload})  # fmt: skip
    assert reply.status_code == 200, reply.text
    reservation = reply.json()
    assert reservation["transfer"]["mode"] == "grant"
    rid = reservation["reservation_id"]
    reply = httpx.post(f"{dep.a}{base}/artifact-reservations/{rid}/upload-grants",
                       headers=dep.headers())  # fmt: skip
    assert reply.status_code == 200, reply.text
    grant = reply.json()
    assert grant["url"].startswith(dep.s3 + "/")  # the published port, not the network's name
    stored = httpx.put(grant["url"], content=data, headers=grant["headers"], timeout=30)
    assert stored.status_code == 200, stored.text
    reply = httpx.post(f"{dep.a}{base}/artifact-reservations/{rid}/publish",
                       headers=dep.headers(), json={"command_id": "cmd-art.p"})  # fmt: skip
    assert reply.status_code == 200, reply.text
    ref = reply.json()
    assert ref["sha256"] == digest
    artifact = ref["artifact_id"]
    # Through origin-b: resolved by path, the body streamed by the service, a download grant.
    resolved = _get(dep.b, dep, "artifacts/resolve", path=path)
    assert resolved["artifact_id"] == artifact and resolved["sha256"] == digest
    got = httpx.post(f"{dep.b}{base}/artifacts/{artifact}/downloads", headers=dep.headers(),
                     json={"revision": ref["revision"]}, timeout=30)  # fmt: skip
    assert got.status_code == 200 and got.content == data
    reply = httpx.post(f"{dep.b}{base}/artifacts/{artifact}/download-grants",
                       headers=dep.headers(), json={"revision": ref["revision"]})  # fmt: skip
    assert reply.status_code == 200, reply.text
    down = reply.json()
    assert down["url"].startswith(dep.s3 + "/") and down["sha256"] == digest
    fetched = httpx.get(down["url"], headers=down["headers"], timeout=30)
    assert fetched.status_code == 200 and fetched.content == data


def test_deploy1_metrics4_gc_runs_on_a_schedule_and_its_metrics_are_served(
    deployment: Deployment,
) -> None:
    dep = deployment
    name = dep.container("gc")
    deadline = time.monotonic() + WAIT_S
    while "expired_reservations" not in dep.podman("logs", name).stdout:
        assert time.monotonic() < deadline, dep.podman("logs", name).stderr[-2000:]
        time.sleep(0.5)
    report = json.loads(dep.podman("logs", name).stdout.strip().splitlines()[0])
    assert report["failed"] == 0
    text = httpx.get(f"{dep.metrics_a}/metrics", timeout=10).text
    assert re.search(r"^aidememo_artifact_gc_pending \d", text, re.M)
    assert re.search(r"^aidememo_artifact_gc_failures_total 0", text, re.M)
    # SIGTERM ends the schedule between two passes, with exit status 0.
    dep.podman("stop", "--time", "30", name)
    assert json.loads(dep.podman("inspect", name).stdout)[0]["State"]["ExitCode"] == 0


@dataclass
class Load:
    acked: dict[str, str]  # fact id -> the URL that acknowledged it
    killed_at: float = 0.0
    first_b_after_kill: float | None = None
    errors: int = 0


def test_deploy2_sigkill_one_origin_under_write_load(deployment: Deployment) -> None:
    """SIGKILL origin-a while four writers write through it; each writer moves to origin-b on
    a transport error and repeats the same command (a replay if origin-a had committed it).
    Every acknowledged fact must be readable through origin-b and the feed dense."""
    dep = deployment
    _session(dep.a, dep, "s_load")
    load = Load({})
    lock = threading.Lock()
    stop = threading.Event()
    kill_after, total = 60, 240

    def writer(n: int) -> None:
        url, i = dep.a, 0
        while not stop.is_set():
            fid = f"f_load_{n}_{i}"
            for _attempt in range(50):
                try:
                    reply = _fact(url, dep, fid, "s_load", f"load {n} {i}")
                except httpx.TransportError:
                    url = dep.b
                    continue
                if reply.status_code == 200:
                    with lock:
                        load.acked[fid] = url
                        if url == dep.b and load.killed_at and load.first_b_after_kill is None:
                            load.first_b_after_kill = time.monotonic() - load.killed_at
                    break
                with lock:
                    load.errors += 1
                if reply.status_code >= 500:
                    url = dep.b
                    time.sleep(0.1)
                    continue
                raise AssertionError(f"write refused: {reply.status_code} {reply.text}")
            i += 1
            with lock:
                if len(load.acked) >= total:
                    stop.set()

    threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + WAIT_S
    while len(load.acked) < kill_after and time.monotonic() < deadline:
        time.sleep(0.02)
    with lock:
        load.killed_at = time.monotonic()
        acked_before = len(load.acked)
    dep.podman("kill", "--signal", "KILL", dep.container("origin-a"))
    for thread in threads:
        thread.join(WAIT_S * 2)
    assert not any(t.is_alive() for t in threads)
    assert len(load.acked) >= total
    assert load.first_b_after_kill is not None
    # Every acknowledged write is there, read through the survivor.
    for fid in load.acked:
        assert _get(dep.b, dep, f"resources/fact/{fid}")["resource"]["id"] == fid
    # The feed is dense: sequence numbers 1..head without a gap or a repeat.
    seqs = _feed(dep.b, dep)
    assert seqs == list(range(1, len(seqs) + 1))
    print(
        f"\nfailover: {len(load.acked)} writes acknowledged ({acked_before} before the kill),"
        f" {len(load.acked)} found through origin-b, first write acknowledged by origin-b"
        f" {load.first_b_after_kill:.3f} s after SIGKILL, {load.errors} refused attempts"
    )


def test_deploy3_sigterm_stops_an_origin_cleanly(deployment: Deployment) -> None:
    dep = deployment
    name = dep.container("origin-b")
    dep.podman("stop", "--time", "30", name)
    state = json.loads(dep.podman("inspect", name).stdout)[0]["State"]
    assert state["ExitCode"] == 0
    assert "stopped on SIGTERM" in dep.podman("logs", name).stderr
