"""The requests each route that takes a body gets in every framing (SPEC.md HTTP-1, HTTP-9,
ART-3), keyed by route name: a well-formed one that must succeed, set up for real (its
handoff, reservation, upload, tenant or member made first, with ids of its own per framing),
and refusals, each with the error code it must get whatever the framing.

A route with a JSON body gets malformed JSON, an empty body, one of the wrong shape (an
unknown field; for MCP not a JSON-RPC request) and one over its limit (refused by the
declared size before authentication, or counted after it when chunked), a wrong media type,
no token and an unknown one; the upload gets a wrong length and a wrong digest, the
streamed import a bad line. A route without a body schema still reads a body when one is
sent (`aidememo.http.pipeline.admit`), so its cases carry one: the well-formed request with
a body it ignores and with an empty one, its own domain refusal, and a body over the limit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import httpx

from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES
from tests.origin.framing_support import (
    BASE,
    PROJECT,
    RECEIVER,
    TENANT,
    WRITER,
    Sent,
    Site,
    new_token,
)

Expect = str | None  # the error code a case must be refused with; None: it must succeed
Maker = Callable[[str], Sent]  # of a framing's name
Cases = dict[str, tuple[Expect, Maker]]
Setup = Callable[[str], tuple[str, Any]]  # of a tag no other request uses: (path, payload)

JSON = "application/json"
NDJSON = "application/x-ndjson"
OVER = b" " * (MAX_REQUEST_BODY_BYTES + 1)
IGNORED = b'{"ignored": true}'  # a body sent to a route that takes none
UPLOAD = b"twelve bytes"
LARGE = bytes(range(256)) * 8192  # 2 MiB
UNKNOWN = f"Bearer {'0' * 64}"  # a well-formed token no one holds
CONSOLE = {"origin": "http://127.0.0.1", "x-aidememo-console": "1"}


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _dumps(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def json_route(
    site: Site,
    setup: Setup,
    as_: str | None = WRITER,
    invalid: tuple[str, str] = ("invalid_command", "invalid_command"),
    wrong: Callable[[Any], Any] = lambda p: {**p, "surprise": 1},
) -> Cases:
    """The cases of a route whose body is a JSON object: `setup` makes what the request
    needs and names the path and the well-formed payload; `invalid` names the codes of a
    body that is not JSON and of one of the wrong shape, `wrong` makes that shape."""
    token = site.admin if as_ is None else site.tokens[as_]

    def made(case: str, body: Callable[[Any], bytes], **headers: str) -> Maker:
        def make(framing: str) -> Sent:
            path, payload = setup(f"{case}_{framing}")
            sent = {"authorization": f"Bearer {token}", "content-type": JSON, **headers}
            return path, {k: v for k, v in sent.items() if v}, body(payload)

        return make

    return {
        "valid": (None, made("v", _dumps)),
        "malformed JSON": (invalid[0], made("m", lambda p: b"{nope, " * 40)),
        "empty": (invalid[0], made("e", lambda p: b"")),
        "wrong shape": (invalid[1], made("u", lambda p: _dumps(wrong(p)))),
        "over 1 MiB": ("payload_too_large", made("o", lambda p: _dumps(p) + OVER)),
        "media type": ("unsupported_media_type", made("t", _dumps, **{"content-type": "text/a"})),
        "no token": ("authentication_failed", made("n", _dumps, authorization="")),
        "unknown token": ("authentication_failed", made("k", _dumps, authorization=UNKNOWN)),
    }


def bodyless_route(
    site: Site,
    path_of: Callable[[str], str],
    refused: tuple[str, Callable[[str], str], dict[str, str]],
    headers: dict[str, str],
) -> Cases:
    """The cases of a route without a body schema, sent with a body it ignores (and once
    with an empty one): `path_of` makes what the request needs (of a tag no other request
    uses) and names its path; `refused` is a domain refusal's code, the path that gets it
    and what it changes in the headers."""
    code, refused_path, refused_edit = refused

    def made(case: str, path: Callable[[str], str], body: bytes, **edit: str) -> Maker:
        def make(framing: str) -> Sent:
            sent = {**headers, **edit}
            return path(f"{case}_{framing}"), {k: v for k, v in sent.items() if v}, body

        return make

    cases: Cases = {
        "valid": (None, made("v", path_of, IGNORED)),
        "empty": (None, made("e", path_of, b"")),
        "refused": (code, made("r", refused_path, IGNORED, **refused_edit)),
        "over 1 MiB": ("payload_too_large", made("o", path_of, OVER)),
    }
    if "authorization" in headers:
        no_token = made("n", path_of, IGNORED, authorization="")
        cases["no token"] = ("authentication_failed", no_token)
        unknown = made("k", path_of, IGNORED, authorization=UNKNOWN)
        cases["unknown token"] = ("authentication_failed", unknown)
    return cases


class Project:
    """What the cases set up in project `demo` through the server's own routes."""

    def __init__(self, site: Site) -> None:
        self.site = site
        site.call("POST", f"{BASE}/sessions", _session("s1"))
        self.published: dict[str, tuple[str, int]] = {}

    def handoff(self, tag: str, accepted: bool = False) -> str:
        """A handoff to the receiver (accepted by claim `c_<tag>`); its id."""
        handoff_id = f"h_{tag}"
        payload = {"handoff_id": handoff_id, "session_id": "s1", "to_actor": RECEIVER}
        self.site.call("POST", f"{BASE}/handoffs", {"command_id": f"hs.{tag}", "payload": payload})
        if accepted:
            body = _transition(f"ha.{tag}", 1, {"claim_id": f"c_{tag}"})
            self.site.call("POST", f"{BASE}/handoffs/{handoff_id}/accept", body, as_=RECEIVER)
        return handoff_id

    def reservation(self, tag: str, uploaded: bool = False, data: bytes = UPLOAD) -> str:
        """A reservation of `data`'s size and digest (uploaded when `uploaded`); its id."""
        body = _reserve(tag, data)
        reply = self.site.call("POST", f"{BASE}/artifact-reservations", body).json()
        reservation_id: str = reply["reservation_id"]
        if uploaded:
            url = f"{self.site.server.url}{BASE}/artifact-reservations/{reservation_id}/body"
            if reply["transfer"]["mode"] == "grant":
                path = f"{BASE}/artifact-reservations/{reservation_id}/upload-grants"
                grant = self.site.call("POST", path).json()
                url = grant["url"]
                headers = grant["headers"]
            else:
                headers = {**self.site.bearer(), "content-type": "application/octet-stream"}
            put = httpx.put(url, content=data, headers=headers, timeout=30)
            assert put.is_success, put.text
        return reservation_id

    def artifact(self) -> tuple[str, int]:
        """One published artifact (made once): its id and revision."""
        if not self.published:
            r = self.reservation("published", uploaded=True)
            body = {"command_id": "pub.published"}
            path = f"{BASE}/artifact-reservations/{r}/publish"
            reply = self.site.call("POST", path, body).json()
            self.published["it"] = (reply["artifact_id"], reply["revision"])
        return self.published["it"]


def _session(session_id: str) -> dict[str, Any]:
    return {"command_id": f"ss.{session_id}", "payload": {"session_id": session_id, "topic": "t"}}


def _transition(command_id: str, revision: int, payload: dict[str, Any]) -> dict[str, Any]:
    return {"command_id": command_id, "expected_revision": revision, "payload": payload}


def _reserve(tag: str, data: bytes = UPLOAD) -> dict[str, Any]:
    payload = {"path": f"sessions/s1/artifacts/{tag}.bin", "size_bytes": len(data)}
    payload["sha256"] = hashlib.sha256(data).hexdigest()
    return {"command_id": f"rs.{tag}", "payload": payload}


def member_cases(p: Project) -> dict[str, Cases]:
    """The member routes with a JSON body."""
    site = p.site

    def command(tag: str) -> tuple[str, Any]:
        return "/v1/commands", {
            "command_id": f"c.{tag}",
            "project_id": PROJECT,
            "expected_revision": None,
            "operation": "resource.put",
            "resource": {"kind": "custom.note", "id": f"n_{tag}"},
            "change": "upsert",
            "payload": {"tag": tag},
        }

    def fact(tag: str) -> tuple[str, Any]:
        payload = {"fact_id": f"f_{tag}", "session_id": "s1", "content": f"sent {tag}"}
        return f"{BASE}/facts", {"command_id": f"f.{tag}", "payload": payload}

    def context(tag: str) -> tuple[str, Any]:
        payload = {"context_id": f"x_{tag}", "handoff_id": f"hx_{tag}", "session_id": "s1"}
        payload |= {"to_actor": RECEIVER, "content": "framing"}
        return f"{BASE}/handoff-contexts", {"command_id": f"x.{tag}", "payload": payload}

    def handoff(tag: str) -> tuple[str, Any]:
        payload = {"handoff_id": f"hn_{tag}", "session_id": "s1", "to_actor": RECEIVER}
        return f"{BASE}/handoffs", {"command_id": f"hn.{tag}", "payload": payload}

    def accept(tag: str) -> tuple[str, Any]:
        path = f"{BASE}/handoffs/{p.handoff(f'a_{tag}')}/accept"
        return path, _transition(f"a.{tag}", 1, {"claim_id": f"c_{tag}"})

    def heartbeat(tag: str) -> tuple[str, Any]:
        path = f"{BASE}/handoffs/{p.handoff(f'b_{tag}', accepted=True)}/heartbeat"
        return path, _transition(f"b.{tag}", 2, {"claim_id": f"c_b_{tag}"})

    def give_back(tag: str) -> tuple[str, Any]:
        path = f"{BASE}/handoffs/{p.handoff(f'r_{tag}', accepted=True)}/return"
        site.call("POST", f"{BASE}/facts", fact(f"r{tag}")[1], as_=RECEIVER)
        payload = {"claim_id": f"c_r_{tag}", "result_fact_id": f"f_r{tag}"}
        payload["outcome"] = "succeeded"
        return path, _transition(f"r.{tag}", 2, payload)

    def mcp(tag: str) -> tuple[str, Any]:
        return f"{BASE}/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

    def reserve(tag: str) -> tuple[str, Any]:
        return f"{BASE}/artifact-reservations", _reserve(tag)

    def publish(tag: str) -> tuple[str, Any]:
        path = f"{BASE}/artifact-reservations/{p.reservation(tag, uploaded=True)}/publish"
        return path, {"command_id": f"p.{tag}"}

    def download(tag: str) -> tuple[str, Any]:
        artifact_id, revision = p.artifact()
        return f"{BASE}/artifacts/{artifact_id}/downloads", {"revision": revision}

    setups: dict[str, Setup] = {
        "command": command,
        "create_session": lambda tag: (f"{BASE}/sessions", _session(f"s_{tag}")),
        "create_fact": fact,
        "create_context": context,
        "send_handoff": handoff,
        "accept": accept,
        "heartbeat": heartbeat,
        "return": give_back,
        "mcp": mcp,
        "artifact_reserve": reserve,
        "artifact_publish": publish,
        "artifact_download": download,
    }
    receiver = {"accept", "heartbeat", "return"}
    cases = {
        name: json_route(site, setup, RECEIVER if name in receiver else WRITER)
        for name, setup in setups.items()
    }
    not_json_rpc = ("jsonrpc -32700", "jsonrpc -32600")  # MCP-6
    cases["mcp"] = json_route(site, mcp, invalid=not_json_rpc, wrong=lambda p: {**p, "id": []})
    return cases


def upload_cases(p: Project) -> Cases:
    """`artifact_upload` (ART-3): with a length, the reserved bytes succeed (over 1 MiB too,
    read as they arrive instead of collected first, HTTP-9) and another length or digest is
    `artifact_body_mismatch`; chunked, each is 411 `length_required`."""
    bearer = p.site.bearer()

    def made(case: str, body: bytes, reserved: bytes = UPLOAD, **edit: str) -> Maker:
        def make(framing: str) -> Sent:
            reservation_id = p.reservation(f"u{case}_{framing}", data=reserved)
            path = f"{BASE}/artifact-reservations/{reservation_id}/body"
            headers = {**bearer, "content-type": "application/octet-stream", **edit}
            return path, {k: v for k, v in headers.items() if v}, body

        return make

    return {
        "valid": (None, made("v", UPLOAD)),
        "valid, 2 MiB": (None, made("g", LARGE, LARGE)),
        "wrong length": ("artifact_body_mismatch", made("l", UPLOAD[:-1])),
        "wrong digest": ("artifact_body_mismatch", made("d", UPLOAD.upper())),
        "media type": ("unsupported_media_type", made("t", UPLOAD, **{"content-type": "text/a"})),
        "no token": ("authentication_failed", made("n", UPLOAD, authorization="")),
    }


def admin_cases(p: Project) -> dict[str, Cases]:
    """The admin routes, with the admin token (ADM-1..ADM-4)."""
    site = p.site

    def bootstrap(tag: str) -> tuple[str, Any]:
        body = {"tenant_id": f"t_{tag}", "project_id": "p", "actor_id": "a"}
        return "/v1/admin/bootstrap", {**body, "token_sha256": new_token()[1]}

    def members(tag: str) -> tuple[str, Any]:
        site.bootstrap(TENANT, PROJECT, f"m_{tag}")
        body = {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": f"m_{tag}"}
        return "/v1/admin/members", {**body, "role": "reader"}

    def revoke(tag: str) -> tuple[str, Any]:
        token = site.bootstrap(TENANT, PROJECT, f"k_{tag}")
        return "/v1/admin/tokens/revoke", {"token_sha256": sha256(token)}

    def exported(tag: str) -> bytes:
        """The export of a new tenant, which is then deleted (so it imports again); a tag
        starting with `g` gets notes enough for an archive over 1 MiB (read as it arrives
        instead of collected first, HTTP-9)."""
        tenant = f"i_{tag}"
        site.tokens[tenant] = site.bootstrap(tenant, "p", "a")
        for note in range(2 if tag.startswith("g") else 0):
            put = {"command_id": f"n.{note}", "project_id": "p", "expected_revision": None}
            put |= {"operation": "resource.put", "change": "upsert"}
            put |= {"resource": {"kind": "custom.note", "id": f"n{note}"}, "payload": {}}
            put["payload"] = {"text": "x" * 700_000}
            site.call("POST", "/v1/commands", put, as_=tenant)
        archive = site.call("GET", f"/v1/admin/tenants/{tenant}/export", as_=None).content
        site.call("DELETE", f"/v1/admin/tenants/{tenant}?confirm={tenant}", as_=None)
        assert (len(archive) > MAX_REQUEST_BODY_BYTES) == tag.startswith("g"), len(archive)
        return archive

    def bad_line(archive: bytes) -> bytes:
        """The archive with a line that is not JSON before its last (the manifest)."""
        rows, manifest = archive.rstrip(b"\n").rsplit(b"\n", 1)
        return rows + b"\n{nope\n" + manifest + b"\n"

    def imported(case: str, edit: Callable[[bytes], bytes], **headers: str) -> Maker:
        def make(framing: str) -> Sent:
            sent = {"authorization": f"Bearer {site.admin}", "content-type": NDJSON, **headers}
            body = edit(exported(f"{case}_{framing}"))
            return "/v1/admin/import", {k: v for k, v in sent.items() if v}, body

        return make

    def delete_path(tag: str) -> str:
        tenant = f"d_{tag}"
        site.bootstrap(tenant, "p", "a")
        return f"/v1/admin/tenants/{tenant}?confirm={tenant}"

    admin = {"authorization": f"Bearer {site.admin}", "content-type": JSON}
    return {
        "admin_bootstrap": json_route(site, bootstrap, as_=None),
        "admin_members": json_route(site, members, as_=None),
        "admin_revoke_token": json_route(site, revoke, as_=None),
        "admin_import": {
            "valid": (None, imported("v", lambda a: a)),
            "valid, over 1 MiB": (None, imported("g", lambda a: a)),
            "bad line, over 1 MiB": ("invalid_command", imported("gb", bad_line)),
            "bad line": ("invalid_command", imported("b", bad_line)),
            "media type": (
                "unsupported_media_type",
                imported("t", lambda a: a, **{"content-type": JSON}),
            ),
            "no token": ("authentication_failed", imported("n", lambda a: a, authorization="")),
        },
        "admin_delete_tenant": bodyless_route(
            site,
            delete_path,
            ("invalid_command", lambda f: f"/v1/admin/tenants/{TENANT}?confirm=other", {}),
            admin,
        ),
    }


def bodyless_cases(p: Project) -> dict[str, Cases]:
    """The member and console routes without a body schema (ART-5, CONSOLE-2, CONSOLE-4)."""
    site = p.site
    member = {**site.bearer(), "content-type": JSON}
    console = {"content-type": JSON, **CONSOLE}
    reservations = f"{BASE}/artifact-reservations"
    return {
        "artifact_abort": bodyless_route(
            site,
            lambda tag: f"{reservations}/{p.reservation(f'ab_{tag}')}",
            ("artifact_not_found", lambda f: f"{reservations}/r_none", {}),
            member,
        ),
        "console_sign_in": bodyless_route(
            site,
            lambda f: "/console/session",
            ("origin_not_allowed", lambda f: "/console/session", {"x-aidememo-console": ""}),
            {**console, **site.bearer()},
        ),
        "console_sign_out": bodyless_route(
            site,
            lambda f: "/console/session",
            ("origin_not_allowed", lambda f: "/console/session", {"x-aidememo-console": ""}),
            console,
        ),
    }


def grant_cases(p: Project) -> dict[str, Cases]:
    """The grant routes, on a server whose bodies are in an object store (GRANT-3, GRANT-4)."""
    site = p.site
    reservations = f"{BASE}/artifact-reservations"

    def download(tag: str) -> tuple[str, Any]:
        artifact_id, revision = p.artifact()
        return f"{BASE}/artifacts/{artifact_id}/download-grants", {"revision": revision}

    return {
        "artifact_upload_grant": bodyless_route(
            site,
            lambda tag: f"{reservations}/{p.reservation(f'ug_{tag}')}/upload-grants",
            ("artifact_not_found", lambda f: f"{reservations}/r_none/upload-grants", {}),
            {**site.bearer(), "content-type": JSON},
        ),
        "artifact_download_grant": json_route(site, download),
    }
