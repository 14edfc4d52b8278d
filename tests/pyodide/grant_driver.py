"""Runs inside Pyodide (via edge_runner.mjs): grants at the edge through `Default.fetch`, with
R2's S3 endpoint pointed at the test SeaweedFS (`R2_S3_ENDPOINT`, SPEC.md GRANT-5). The
Worker's own requests to the store go through the real Workers SDK's `fetch` (Node's fetch
here); the driver sends the grants' PUT and GET with the same `fetch`, as a client would.

`main()` returns {"steps": [{"name", "ok", "detail"}, ...]} for test_edge_grants_pyodide.py.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import driver_support as support
import edge_harness
from driver_support import Step, check, run_steps
from js import Headers, fetch
from pyodide.ffi import to_js

params = edge_harness.params.to_py()
TENANT, PROJECT, WRITER = params["tenant_id"], params["project_id"], params["writer"]
ADMIN, TOKEN = params["admin_token"], params["writer_token"]
P = f"/v1/projects/{PROJECT}"
PATH = "sessions/s1/artifacts/granted.bin"
DATA = os.urandom(150_000)
state: dict[str, Any] = {}


async def call(method: str, path: str, **kw: Any) -> tuple[int, dict[str, str], bytes]:
    kw.setdefault("token", TOKEN)
    return await support.call(method, path, **kw)


async def ok(method: str, path: str, **kw: Any) -> Any:
    status, _, data = await call(method, path, **kw)
    check(status == 200, f"{method} {path}: {status}: {data[:300]!r}")
    return json.loads(data)


async def store(method: str, grant: dict[str, Any], body: bytes | None = None) -> tuple[int, bytes]:
    """The grant's request to the store with exactly its headers."""
    sent = Headers.new()
    for name, value in grant["headers"].items():
        if name.lower() != "content-length":  # fetch sets it from the body (a forbidden header)
            sent.set(name, value)
    init: dict[str, Any] = {"method": method, "headers": sent}
    if body is not None:
        init["body"] = to_js(body)
    resp = await fetch(grant["url"], **init)
    data = bytes((await resp.arrayBuffer()).to_bytes())
    return int(resp.status), data


async def bootstrap() -> Any:
    body = {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": WRITER, "role": "writer",
            "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}  # fmt: skip
    answer = await ok("POST", "/v1/admin/bootstrap", json_body=body, token=ADMIN)
    return answer.get("actor_id", True)


async def reserve_offers_grants() -> Any:
    payload = {"path": PATH, "size_bytes": len(DATA), "content_type": "text/plain",
               "sha256": hashlib.sha256(DATA).hexdigest()}  # fmt: skip
    r = await ok("POST", f"{P}/artifact-reservations",
                 json_body={"command_id": "g.r1", "payload": payload})  # fmt: skip
    check(r["transfer"]["mode"] == "grant", f"transfer {r['transfer']}")
    state["r"] = r
    status, _, data = await call("PUT", f"{P}/artifact-reservations/{r['reservation_id']}/body",
                                 raw=DATA)  # fmt: skip
    check(status == 409 and b"artifact_transfer_mode_mismatch" in data, f"direct {status}")
    return r["transfer"]["mode"]


async def upload_through_the_grant() -> Any:
    rid = state["r"]["reservation_id"]
    g = await ok("POST", f"{P}/artifact-reservations/{rid}/upload-grants")
    check("x-amz-checksum-sha256" in g["headers"], f"headers {sorted(g['headers'])}")
    status, data = await store("PUT", g, DATA)
    check(status == 200, f"grant PUT {status} {data[:200]!r}")
    again, _ = await store("PUT", g, DATA)
    check(again == 412, f"replayed grant PUT {again}")
    return status


async def publish_heads_through_s3() -> Any:
    rid = state["r"]["reservation_id"]
    ref = await ok("POST", f"{P}/artifact-reservations/{rid}/publish",
                   json_body={"command_id": "g.p1"})  # fmt: skip
    check(ref["sha256"] == hashlib.sha256(DATA).hexdigest(), f"reference {ref}")
    state["ref"] = ref
    return ref["revision"]


async def download_route_streams_from_s3() -> Any:
    ref = state["ref"]
    status, _, data = await call("POST", f"{P}/artifacts/{ref['artifact_id']}/downloads",
                                 json_body={"revision": ref["revision"]})  # fmt: skip
    check(status == 200 and data == DATA, f"download {status} {len(data)}")
    return len(data)


async def download_grant_reads_the_store() -> Any:
    ref = state["ref"]
    g = await ok("POST", f"{P}/artifacts/{ref['artifact_id']}/download-grants",
                 json_body={"revision": ref["revision"]})  # fmt: skip
    check(set(g["headers"]) == {"If-Match"}, f"headers {g['headers']}")
    status, data = await store("GET", g)
    check(status == 200 and data == DATA, f"grant GET {status} {len(data)}")
    return len(data)


STEPS: list[tuple[str, Step]] = [
    ("bootstrap", bootstrap),
    ("reserve_offers_grants", reserve_offers_grants),
    ("upload_through_the_grant", upload_through_the_grant),
    ("publish_heads_through_s3", publish_heads_through_s3),
    ("download_route_streams_from_s3", download_route_streams_from_s3),
    ("download_grant_reads_the_store", download_grant_reads_the_store),
]


async def main() -> dict[str, Any]:
    return {"steps": await run_steps(STEPS)}
