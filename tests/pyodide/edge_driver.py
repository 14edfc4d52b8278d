"""Runs inside Pyodide (via edge_runner.mjs): drive the edge through `Default.fetch`.

Every request is a Node `Request` handed to the harness, which calls `Default.fetch` the way
workerd does; the Worker reaches the Durable Objects over the harness's RPC. Each step is
recorded as `{"name", "ok", "detail"}` and a failing step does not stop the later ones (they
usually fail too, which the cases show). Parameters come from `edge_harness.params`: the admin
token and the tokens of the two actors (plaintext; their SHA-256 is what is bootstrapped).

`main()` returns {"steps": [...], "objects": [...], "imports": {...}} for test_edge_pyodide.py.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import pkgutil
import traceback
from typing import Any
from urllib.parse import quote

import edge_harness
from driver_support import BASE, Step, StepFailed, check, run_steps
from js import Date, Headers, Request
from pyodide.ffi import to_js

params = edge_harness.params.to_py()
ADMIN = params["admin_token"]
TENANT, PROJECT, EPOCH = params["tenant_id"], params["project_id"], params["project_epoch"]
WRITER, RECEIVER = params["writer"], params["receiver"]
TOKENS = {WRITER: params["writer_token"], RECEIVER: params["receiver_token"]}
P = f"/v1/projects/{PROJECT}"

steps: list[dict[str, Any]] = []
saved: dict[str, bytes] = {}


async def call(
    method: str,
    path: str,
    *,
    token: str | None = None,
    json_body: Any = None,
    raw: bytes | None = None,
    content_type: str | None = None,
    headers: dict[str, str | None] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request; a header value of None in `headers` leaves that header out."""
    sent = Headers.new()
    if token is not None:
        sent.set("authorization", f"Bearer {token}")
    body = raw
    if json_body is not None:
        body = json.dumps(json_body).encode()
        sent.set("content-type", "application/json")
    if content_type is not None:
        sent.set("content-type", content_type)
    for name, value in (headers or {}).items():
        if value is None:
            sent.delete(name)
        else:
            sent.set(name, value)
    if body is not None and not sent.has("content-length"):
        # What a client sends with a body of known size, and workerd hands on (HTTP-1).
        sent.set("content-length", str(len(body)))
    init: dict[str, Any] = {"method": method, "headers": sent}
    if body is not None:
        try:
            init["body"] = body.decode()
        except UnicodeDecodeError:  # bytes a JS string cannot carry: sent as a Uint8Array
            init["body"] = to_js(body)
    resp = await edge_harness.fetch(Request.new(BASE + path, **init))
    data = bytes((await resp.arrayBuffer()).to_bytes())
    return int(resp.status), dict(resp.headers.entries()), data


async def call_json(method: str, path: str, expect: int = 200, **kw: Any) -> Any:
    status, _, data = await call(method, path, **kw)
    body = json.loads(data) if data else None
    check(status == expect, f"{method} {path}: {status} (wanted {expect}): {data[:400]!r}")
    return body


def js_date_now() -> int:
    return int(Date.now())


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# -- the steps ------------------------------------------------------------------------------


async def health() -> Any:
    body = await call_json("GET", "/health")
    check(body.get("mode") == "edge", f"mode {body.get('mode')!r}")
    return body


async def insecure_http_refused() -> Any:
    resp = await edge_harness.fetch(Request.new(f"http://aidememo.test{P}/identity"))
    body = json.loads(bytes((await resp.arrayBuffer()).to_bytes()))
    check(int(resp.status) == 426, f"status {resp.status}")
    check(body["error"]["code"] == "insecure_transport", repr(body))
    return body["error"]["code"]


async def admin_requires_token() -> Any:
    body = {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": WRITER}
    body["token_sha256"] = digest(TOKENS[WRITER])
    status, _, data = await call("POST", "/v1/admin/bootstrap", json_body=body)
    check(status == 401, f"status {status}: {data!r}")
    return json.loads(data)["error"]["code"]


def _bootstrap_body(actor: str) -> dict[str, Any]:
    return {
        "tenant_id": TENANT,
        "project_id": PROJECT,
        "actor_id": actor,
        "role": "writer",
        "project_epoch": EPOCH,
        "token_sha256": digest(TOKENS[actor]),
    }


async def bootstrap_writer() -> Any:
    return await call_json(
        "POST", "/v1/admin/bootstrap", token=ADMIN, json_body=_bootstrap_body(WRITER)
    )


async def bootstrap_receiver() -> Any:
    first = await call_json(
        "POST", "/v1/admin/bootstrap", token=ADMIN, json_body=_bootstrap_body(RECEIVER)
    )
    again = await call_json(
        "POST", "/v1/admin/bootstrap", token=ADMIN, json_body=_bootstrap_body(RECEIVER)
    )
    return {"first": first, "retry": again}


async def identity() -> Any:
    body = await call_json("GET", f"{P}/identity", token=TOKENS[WRITER])
    check(body.get("actor_id") == WRITER, repr(body))
    other = await call_json("GET", f"{P}/identity", token=TOKENS[RECEIVER])
    check(other.get("actor_id") == RECEIVER, repr(other))
    status, _, data = await call("GET", f"{P}/identity", token="not-a-token")
    check(status == 401, f"unknown token: {status} {data!r}")
    return body


async def session() -> Any:
    body = {
        "command_id": "cmd_session_edge",
        "payload": {"session_id": "session_edge", "topic": "edge", "source_id": "project:edge"},
    }
    receipt = await call_json("POST", f"{P}/sessions", token=TOKENS[WRITER], json_body=body)
    replay = await call_json("POST", f"{P}/sessions", token=TOKENS[WRITER], json_body=body)
    check(replay == receipt, f"replay differs: {replay!r} != {receipt!r}")
    return receipt


async def _fact(fact_id: str, content: str, actor: str) -> Any:
    body = {
        "command_id": f"cmd_{fact_id}",
        "payload": {"fact_id": fact_id, "session_id": "session_edge", "content": content},
    }
    return await call_json("POST", f"{P}/facts", token=TOKENS[actor], json_body=body)


async def fact() -> Any:
    receipt = await _fact("fact_edge_en", "redis cluster timeout at the edge", WRITER)
    await _fact("fact_edge_ko", "어제 서버 배포가 실패했습니다", WRITER)
    await _fact("fact_edge_zh", "我们的服务器昨天挂了", WRITER)
    got = await call_json("GET", f"{P}/resources/fact/fact_edge_en", token=TOKENS[RECEIVER])
    check("redis" in json.dumps(got), repr(got))
    return receipt


async def secret_refused() -> Any:
    """SEC-3 through the real SDK: a fact and a custom.* note holding a secret are 422
    `secret_rejected` naming kind and field, and the head does not move."""
    snap = f"{P}/snapshot"
    head = (await call_json("GET", snap, token=TOKENS[RECEIVER]))["at_seq"]
    token = "gh" + "p_" + "Zq9" * 12
    body = {
        "command_id": "cmd_fact_secret",
        "payload": {"fact_id": "fact_secret", "session_id": "session_edge", "content": token},
    }
    refused = await call_json("POST", f"{P}/facts", 422, token=TOKENS[RECEIVER], json_body=body)
    message = refused["error"]["message"]
    check(refused["error"]["code"] == "secret_rejected", repr(refused))
    check("github_token" in message and "/payload/content" in message, message)
    check(token not in json.dumps(refused), "the refusal echoes the secret")
    note = {
        "command_id": "cmd_note_secret",
        "project_id": PROJECT,
        "operation": "resource.put",
        "resource": {"kind": "custom.note", "id": "note_secret"},
        "change": "upsert",
        "payload": {"deploy": {"pass" + "word": "Tr0ub4dor" * 2}},
    }
    await call_json("POST", "/v1/commands", 422, token=TOKENS[RECEIVER], json_body=note)
    after = (await call_json("GET", snap, token=TOKENS[RECEIVER]))["at_seq"]
    check(after == head, f"the head moved from {head} to {after}")
    return {"head": head, "message": message}


async def handoff() -> Any:
    send = {
        "command_id": "cmd_send_edge",
        "payload": {
            "handoff_id": "handoff_edge",
            "session_id": "session_edge",
            "to_actor": RECEIVER,
            "focus": "review the edge",
        },
    }
    sent = await call_json("POST", f"{P}/handoffs", token=TOKENS[WRITER], json_body=send)
    mailbox = await call_json("GET", f"{P}/handoffs?box=inbox", token=TOKENS[RECEIVER])
    check("handoff_edge" in json.dumps(mailbox), f"not in the mailbox: {mailbox!r}")
    return {"send": sent}


async def handoff_accept() -> Any:
    body = {
        "command_id": "cmd_accept_edge",
        "expected_revision": 1,
        "payload": {"claim_id": "claim_edge"},
    }
    path = f"{P}/handoffs/handoff_edge/accept"
    status, _, data = await call("POST", path, token=TOKENS[WRITER], json_body=body)
    check(status == 403, f"the sender accepted: {status} {data!r}")
    return await call_json("POST", path, token=TOKENS[RECEIVER], json_body=body)


async def handoff_return() -> Any:
    await _fact("fact_edge_result", "edge result by the receiver", RECEIVER)
    body = {
        "command_id": "cmd_return_edge",
        "expected_revision": 2,
        "payload": {
            "claim_id": "claim_edge",
            "result_fact_id": "fact_edge_result",
            "outcome": "succeeded",
        },
    }
    receipt = await call_json(
        "POST", f"{P}/handoffs/handoff_edge/return", token=TOKENS[RECEIVER], json_body=body
    )
    status = await call_json("GET", f"{P}/handoffs/handoff_edge", token=TOKENS[WRITER])
    return {"return": receipt, "status": status}


async def _search(q: str) -> list[str]:
    found = await call_json("GET", f"{P}/search?q={q}", token=TOKENS[RECEIVER])
    return [r["fact_id"] for r in found["results"]]


async def search() -> Any:
    ids = await _search("redis%20timeout")
    check(ids == ["fact_edge_en"], repr(ids))
    return ids


async def search_cjk() -> Any:
    ko = await _search(quote("서버"))
    zh = await _search(quote("服务器"))
    check(ko == ["fact_edge_ko"], f"서버: {ko!r}")
    check(zh == ["fact_edge_zh"], f"服务器: {zh!r}")
    return {"ko": ko, "zh": zh}


async def semantic() -> Any:
    """SEM-10, SEM-11 through the real SDK and the Workers AI and Vectorize doubles: before the
    index is built `auto` answers lexically at no Workers AI or Vectorize cost; a search with
    `at_least_seq` waits while the project object indexes (embeds, upserts, waits for
    Vectorize to show the batch, advances the state); then hybrid and semantic answer by
    meaning, each with one Workers AI call and one Vectorize query."""
    seq = (await _fact("fact_edge_pool", "the database connection pool is exhausted", WRITER))[
        "project_seq"
    ]
    base = f"{P}/search?q={quote('pool of database connections')}"
    before = edge_harness.semantic_counts().to_py()
    auto = await call_json("GET", base, token=TOKENS[RECEIVER])
    check(auto["fallback_reason"] == "semantic_index_not_built", repr(auto)[:300])
    check(edge_harness.semantic_counts().to_py() == before, "a lexical fallback cost calls")
    waited = await call_json(
        "GET", f"{base}&mode=hybrid&at_least_seq={seq}", token=TOKENS[RECEIVER]
    )
    check((waited["mode"], waited["index_seq"]) == ("hybrid", seq), repr(waited)[:300])
    counts = edge_harness.semantic_counts().to_py()
    found = await call_json("GET", f"{base}&mode=hybrid", token=TOKENS[RECEIVER])
    after = edge_harness.semantic_counts().to_py()
    check(after == {"ai": counts["ai"] + 1, "query": counts["query"] + 1}, f"{counts} {after}")
    top = found["results"][0]
    check(top["fact_id"] == "fact_edge_pool" and top["semantic_rank"] == 1, repr(top))
    meaning = await call_json(
        "GET", f"{P}/search?q=redis&mode=semantic&limit=2", token=TOKENS[RECEIVER]
    )
    check(meaning["results"][0]["fact_id"] == "fact_edge_en", repr(meaning)[:300])
    return {"model": found["semantic_model"], "counts": after}


async def changes() -> Any:
    query = f"project_epoch={EPOCH}&after_seq=0&limit=100"
    body = await call_json("GET", f"{P}/changes?{query}", token=TOKENS[WRITER])
    text = json.dumps(body)
    for needle in ("session_edge", "fact_edge_en", "handoff_edge"):
        check(needle in text, f"{needle} not in the change log")
    return {"keys": sorted(body)}


async def cursors() -> Any:
    """Every route that binds a cursor, with cursors Pyodide hands to `sql.exec` as BigInt
    (HTTP-13): the same pages as without one, an empty last page, the cursor-ahead 409, and
    a 400 beyond int64; never a 5xx."""
    tok = TOKENS[WRITER]
    answers: dict[str, Any] = {}
    plain = await call_json("GET", f"{P}/sessions", token=tok)
    check(len(plain["sessions"]) >= 1, f"no sessions: {plain}")
    outbox = await call_json("GET", f"{P}/handoffs?box=outbox", token=tok)
    for big in (2**53 - 1, 2**60, 2**63 - 1):
        got = await call_json("GET", f"{P}/sessions?before_seq={big}", token=tok)
        check(got == plain, f"sessions before_seq={big}: {got}")
        got = await call_json("GET", f"{P}/handoffs?box=outbox&before_seq={big}", token=tok)
        check(got == outbox, f"handoffs before_seq={big}: {got}")
        got = await call_json("GET", f"{P}/sessions/session_edge/facts?after_seq={big}", token=tok)
        check(got == {"facts": [], "next_after_seq": None}, f"facts after_seq={big}: {got}")
        for route in ("changes", "changes/materialized"):
            query = f"project_epoch={EPOCH}&after_seq={big}"
            got = await call_json("GET", f"{P}/{route}?{query}", 409, token=tok)
            check(got["error"]["code"] == "cursor_out_of_range", f"{route}: {got}")
    for route in ("sessions?before_seq=", "sessions/session_edge/facts?after_seq="):
        got = await call_json("GET", f"{P}/{route}{2**63}", 400, token=tok)
        answers[route] = got["error"]["code"]
    return answers


OTHER_PROJECT = f"{PROJECT}_other"


_MODERN = "2026-07-28"
_META = {
    "io.modelcontextprotocol/protocolVersion": _MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def _rpc(message: dict[str, Any], token: str | None, **headers: str | None) -> Any:
    """One JSON-RPC message to the MCP endpoint: `(status, headers, decoded body or None)`."""
    sent = {k.replace("_", "-"): v for k, v in headers.items()}
    status, out, data = await call("POST", f"{P}/mcp", token=token, json_body=message, headers=sent)
    return status, out, json.loads(data) if data else None


async def mcp() -> Any:
    """The MCP endpoint through `Default.fetch` (MCP-2, MCP-4..7): both eras, a tool call
    answered by its REST twin, a refusal as a tool result, the transport's refusals."""
    writer = TOKENS[WRITER]
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    status, _, body = await _rpc(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, writer
    )
    check(status == 200 and body["result"]["protocolVersion"] == "2025-11-25", repr(body))
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, _, body = await _rpc(note, writer, mcp_protocol_version="2025-11-25")
    check((status, body) == (202, None), f"notification: {status} {body!r}")
    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": _META}}
    status, _, body = await _rpc(
        listed, writer, mcp_protocol_version=_MODERN, mcp_method="tools/list"
    )
    names = [t["name"] for t in body["result"]["tools"]]
    check(status == 200 and "handoff_heartbeat" in names, repr(body)[:400])
    params = {"name": "handoff_status", "arguments": {"handoff_id": "handoff_edge"}}
    called = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {**params, "_meta": _META},
    }
    status, _, body = await _rpc(
        called,
        writer,
        mcp_protocol_version=_MODERN,
        mcp_method="tools/call",
        mcp_name="handoff_status",
    )
    rest = await call_json("GET", f"{P}/handoffs/handoff_edge", token=writer)
    check(body["result"]["structuredContent"] == rest, repr(body)[:400])
    status, _, body = await _rpc(
        called,
        writer,
        mcp_protocol_version=_MODERN,
        mcp_method="tools/call",
        mcp_name="search",
    )
    check(body["error"]["code"] == -32020, f"Mcp-Name mismatch: {body!r}")
    bad = {
        "name": "fact_create",
        "arguments": {
            "fact_id": "f",
            "session_id": "session_edge",
            "content": "x",
            "actor_id": RECEIVER,
        },
    }
    status, _, body = await _rpc(
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": bad}, writer
    )
    result = body["result"]
    check(result["isError"] is True, repr(result))
    check(result["structuredContent"]["error"]["code"] == "invalid_command", repr(result))
    status, out, body = await _rpc({"jsonrpc": "2.0", "id": 5, "method": "ping"}, None)
    check(status == 401 and out.get("www-authenticate") == "Bearer", f"{status} {out!r}")
    status, _, body = await _rpc(
        {"jsonrpc": "2.0", "id": 6, "method": "ping"}, writer, origin="https://evil.example"
    )
    check(status == 403 and body["error"]["code"] == "origin_not_allowed", repr(body))
    status, _, _ = await call("GET", f"{P}/mcp", token=writer)
    check(status == 405, f"GET: {status}")
    return {"tools": len(names)}


async def _bootstrap_table_actors() -> dict[str, str]:
    """A reader of the project and an outsider (a writer of another project of the tenant)."""
    tokens = {"writer": TOKENS[WRITER], "admin": ADMIN}
    for name, actor, project, role in (
        ("reader", "reader-edge", PROJECT, "reader"),
        ("outsider", "outsider-edge", OTHER_PROJECT, "writer"),
    ):
        token = hashlib.sha256(f"{name}:{ADMIN}".encode()).hexdigest()
        body = {**_bootstrap_body(WRITER), "actor_id": actor, "project_id": project}
        body.update(role=role, token_sha256=digest(token), project_epoch=f"epoch_{name}")
        if project == PROJECT:
            body["project_epoch"] = EPOCH
        await call_json("POST", "/v1/admin/bootstrap", token=ADMIN, json_body=body)
        tokens[name] = token
    return tokens


def _fill(text: str, names: dict[str, str]) -> str:
    for key, value in names.items():
        text = text.replace("{" + key + "}", value)
    return text


async def hostile_table() -> Any:
    """Every row of tests/hostile_table.py (handed over as `params["hostile"]`) through the
    real SDK: its status, code and message; after each row the head has not moved and the
    runtime answers a normal request. The rate-limit windows start over after each row, as
    if the period had passed, so that the table's own count never turns a row into a 429."""
    tokens = await _bootstrap_table_actors()
    names = {"project": PROJECT, "epoch": EPOCH, "receiver": RECEIVER, "session": "session_edge"}
    snap = f"{P}/snapshot"
    head = (await call_json("GET", snap, token=TOKENS[RECEIVER]))["at_seq"]
    failed: list[str] = []
    for row in params["hostile"]:
        path = _fill(row["path"].replace("{P}", P), names)
        query = _fill(row["query"], names)
        # JSON null arrives as JsNull: anything that is not a string is "none"
        raw = base64.b64decode(row["body"]) if isinstance(row["body"], str) else None
        headers: dict[str, str | None] = {}
        if raw is not None:
            raw = _fill(raw.decode("latin-1"), names).encode("latin-1")
            headers["content-type"] = "application/json"
        for name, value in row["headers"]:
            headers[name] = value if isinstance(value, str) else None
        token = tokens[row["actor"]] if isinstance(row["actor"], str) else None
        status, _, data = await call(row["method"], path + (f"?{query}" if query else ""),
                                     token=token, raw=raw, headers=headers)  # fmt: skip
        problem = _row_problem(row, status, data)
        edge_harness.reset_rate_limits()
        after = await call_json("GET", snap, token=TOKENS[RECEIVER])
        if after["at_seq"] != head:
            problem = f"{problem or ''} the head moved to {after['at_seq']}"
        if problem:
            failed.append(f"{row['id']}: {problem}")
    check(not failed, f"{len(failed)} of {len(params['hostile'])} rows:\n" + "\n".join(failed))
    return {"rows": len(params["hostile"]), "head": head}


def _row_problem(row: dict[str, Any], status: int, data: bytes) -> str | None:
    try:
        body = json.loads(data) if data else None
    except ValueError:
        return f"{status} not JSON: {data[:200]!r}"
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code", "") if isinstance(error, dict) else ""
    if (status, code) != (row["status"], row["code"]):
        return f"{status} {code!r} (wanted {row['status']} {row['code']!r}): {data[:200]!r}"
    if status == 200:
        return None
    message = error["message"]
    missing = [w for w in row["says"] if w not in message]
    if missing:
        return f"{missing!r} not in {message!r}"
    if row["hides"] and row["hides"] in data.decode():
        return "the answer echoes what it refused"
    return None


async def live_feed() -> Any:
    """The live feed's upgrade through the real SDK: the Worker's `stub.fetch`, the object's
    `Response(None, status=101, web_socket=client)` and the pair from `js.WebSocketPair`; the
    catch-up page and a pushed commit arrive on the client end."""
    query = f"project_epoch={EPOCH}&after_seq=0"
    headers = Headers.new()
    headers.set("authorization", f"Bearer {TOKENS[WRITER]}")
    headers.set("upgrade", "websocket")
    resp = await edge_harness.fetch(Request.new(f"{BASE}{P}/changes/live?{query}", headers=headers))
    check(int(resp.status) == 101, f"status {resp.status}")
    client = resp.webSocket
    check(client is not None, "no webSocket on the 101")
    page = json.loads(client.received.shift())
    expected = await call_json("GET", f"{P}/changes/materialized?{query}", token=TOKENS[WRITER])
    check(page == expected, f"catch-up page differs: {page!r} != {expected!r}")
    await _fact("fact_edge_live", "pushed to the live feed", WRITER)
    pushed = [json.loads(m) for m in client.received.to_py()]
    check(len(pushed) == 1, f"pushed {pushed!r}")
    check(pushed[0]["cursor"]["after_seq"] == page["next_cursor"]["after_seq"], repr(pushed))
    check("fact_edge_live" in json.dumps(pushed[0]), repr(pushed))
    # Refused before the upgrade with the HTTP error of /changes.
    bad = Headers.new()
    bad.set("authorization", f"Bearer {TOKENS[WRITER]}")
    bad.set("upgrade", "websocket")
    wrong = f"{BASE}{P}/changes/live?project_epoch=other_epoch&after_seq=0"
    refused = await edge_harness.fetch(Request.new(wrong, headers=bad))
    body = json.loads(bytes((await refused.arrayBuffer()).to_bytes()))
    check(int(refused.status) == 409, f"status {refused.status}")
    check(body["error"]["code"] == "cursor_epoch_mismatch", repr(body))
    client.close(1000, "done")
    return {"catch_up_entries": len(page["entries"]), "pushed": pushed[0]["next_cursor"]}


async def export() -> Any:
    status, headers, data = await call("GET", f"/v1/admin/tenants/{TENANT}/export", token=ADMIN)
    check(status == 200, f"status {status}: {data[:300]!r}")
    check(headers.get("content-type", "").startswith("application/x-ndjson"), repr(headers))
    lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    text = data.decode()
    for needle in ("fact_edge_en", "fact_edge_zh", "handoff_edge", WRITER, RECEIVER):
        check(needle in text, f"{needle} not in the export")
    saved["export"] = data
    return {"lines": len(lines), "bytes": len(data)}


async def alarm() -> Any:
    """The export armed the project's alarm (it drops stale snapshots); run it, as workerd
    would once its time comes, and check that the object still answers afterwards."""
    fired = await edge_harness.fire_due_alarms(js_date_now() + 10 * 24 * 3600 * 1000)
    check(int(fired) >= 1, f"{fired} alarms fired")
    await call_json("GET", f"{P}/identity", token=TOKENS[WRITER])
    return {"fired": int(fired)}


async def delete_tenant() -> Any:
    path = f"/v1/admin/tenants/{TENANT}?confirm={TENANT}"
    done = await call_json("DELETE", path, token=ADMIN)
    check(done["removed"].get("fact_search", 0) >= 4, repr(done))
    for actor in (WRITER, RECEIVER):
        status, _, data = await call("GET", f"{P}/resources/fact/fact_edge_en", token=TOKENS[actor])
        check(status in (401, 403, 404), f"{actor} still reads after deletion: {status} {data!r}")
    return done


async def import_export() -> Any:
    """The export brings the tenant back: tokens, memberships, facts and their index."""
    check("export" in saved, "no export to import")
    summary = await call_json(
        "POST",
        "/v1/admin/import",
        token=ADMIN,
        raw=saved["export"],
        content_type="application/x-ndjson",
    )
    identity = await call_json("GET", f"{P}/identity", token=TOKENS[RECEIVER])
    check(identity["actor_id"] == RECEIVER, repr(identity))
    zh = await _search(quote("服务器"))
    check(zh == ["fact_edge_zh"], f"服务器 after import: {zh!r}")
    return summary


async def rate_limited() -> Any:
    limit = int(params["rate_limit"])
    statuses = []
    for _ in range(limit + 1):
        status, headers, _ = await call("GET", f"{P}/identity", token=TOKENS[WRITER])
        statuses.append(status)
        if status == 429:
            check(headers.get("retry-after") == str(params["rate_period"]), repr(headers))
            return {"after": len(statuses)}
    raise StepFailed(f"no 429 within {limit + 1} requests: {statuses}")


STEPS: list[tuple[str, Step]] = [
    ("health", health),
    ("insecure_http_refused", insecure_http_refused),
    ("admin_requires_token", admin_requires_token),
    ("bootstrap_writer", bootstrap_writer),
    ("bootstrap_receiver", bootstrap_receiver),
    ("identity", identity),
    ("session", session),
    ("fact", fact),
    ("secret_refused", secret_refused),
    ("handoff_send", handoff),
    ("handoff_accept", handoff_accept),
    ("handoff_return", handoff_return),
    ("search", search),
    ("search_cjk", search_cjk),
    ("changes", changes),
    ("cursors", cursors),
    ("mcp", mcp),
    ("hostile_table", hostile_table),
    ("semantic", semantic),
    ("live_feed", live_feed),
    ("export", export),
    ("alarm", alarm),
    ("delete_tenant", delete_tenant),
    ("import_export", import_export),
    ("rate_limited", rate_limited),
]


def _imports() -> dict[str, str]:
    """Every module of the edge packages imports under Pyodide, the PostgreSQL-mode modules
    included (a walk of the packages, not a list, so a new module is checked too)."""
    out: dict[str, str] = {}

    def walk(name: str) -> None:
        try:
            module = importlib.import_module(name)
            out[name] = "ok"
        except Exception:
            out[name] = traceback.format_exc()
            return
        for info in pkgutil.iter_modules(getattr(module, "__path__", []), name + "."):
            walk(info.name)

    for package in ("worker", "durable_objects"):
        walk(package)
    return out


async def main() -> dict[str, Any]:
    steps.extend(await run_steps(STEPS))
    return {"steps": steps, "objects": edge_harness.objects().to_py(), "imports": _imports()}
