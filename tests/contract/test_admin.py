"""Administration over HTTP on every backend (ADM-*, BOOT-1, AUTH-5/6, ARC-*).

The admin routes are guarded by the admin token each backend is built with (support.py:
`ADMIN_TOKEN` for the in-process and socket apps, the runtime's own for the edge): no or an
unknown token is 401 `authentication_failed`, a member's token 403 `admin_required`.
Export -> import goes into a fresh backend of the same kind, through HTTP only.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.model import Role
from aidememo.service.archive import Manifest
from tests.contract.support import (
    BACKENDS,
    EPOCH,
    HERMES,
    OTHER_PROJECT,
    OUTSIDER,
    PROJECT,
    READER,
    RECEIVER,
    TENANT,
    WRITER,
    Api,
    P,
    Reply,
)

NDJSON = "application/x-ndjson"
KEEP = "tenant_keep"


def _admin_token(api: Api) -> str:
    if api.admin_token is None:
        pytest.skip(f"backend {api.backend_name} reports no admin token (Backend.admin_token)")
    return api.admin_token


def admin(
    api: Api,
    method: str,
    path: str,
    *,
    json: Any = None,
    body: bytes | None = None,
    content_type: str | None = None,
    query: dict[str, str] | None = None,
    token: str | None = None,
) -> Reply:
    """An admin request, with the backend's admin token unless `token` is given."""
    headers = {"content-type": content_type} if content_type else None
    return api.call(
        method,
        path,
        token=token if token is not None else _admin_token(api),
        json=json,
        body=body,
        headers=headers,
        query=query,
    )


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def boot(api: Api, actor: str, token: str, **extra: Any) -> Reply:
    body = {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": actor,
            "token_sha256": digest(token), **extra}  # fmt: skip
    return admin(api, "POST", "/v1/admin/bootstrap", json=body)


def export(api: Api, tenant: str = TENANT, **query: str) -> bytes:
    reply = admin(api, "GET", f"/v1/admin/tenants/{tenant}/export", query=query or None)
    assert reply.status == 200, reply.body
    assert reply.headers["content-type"].split(";")[0] == NDJSON
    assert isinstance(reply.body, bytes), reply.body
    return reply.body


def import_(api: Api, data: bytes) -> Reply:
    return admin(api, "POST", "/v1/admin/import", body=data, content_type=NDJSON)


def records(data: bytes) -> list[dict[str, Any]]:
    """An export's records without what differs between two exports of the same data: the
    export time, the project epochs and the manifest (whose sums cover both)."""
    out = []
    for line in data.splitlines():
        record = json.loads(line)
        record.pop("exported_at_ms", None)
        record.pop("project_epoch", None)
        if record["type"] != "manifest":
            out.append(record)
    return out


def populate(api: Api) -> None:
    """Every kind of row: a session, facts (CJK too), a completed handoff, a put and a delete."""
    api.session("s1")
    api.fact("f1", "s1", "redis 서버가 멈췄다")
    api.fact("f2", "s1", "cache fallback decided")
    sent = api.send("h1", "s1", RECEIVER).expect(200)
    api.transition("h1", "accept", {"claim_id": "c1"}, sent["revision"]).expect(200)
    api.fact("f3", "s1", "receiver fixed the cluster", as_=RECEIVER)
    outcome = {"claim_id": "c1", "result_fact_id": "f3", "outcome": "succeeded"}
    api.transition("h1", "return", outcome, sent["revision"] + 1).expect(200)
    api.put_note("n1", {"text": "kept"}).expect(200)
    api.put_note("n2", {"text": "deleted"}).expect(200)
    gone = {"command_id": "cmd_del_n2", "project_id": PROJECT, "expected_revision": 1,
            "operation": "resource.delete", "resource": {"kind": "custom.note", "id": "n2"},
            "change": "delete", "payload": None}  # fmt: skip
    api.post("/v1/commands", gone).expect(200)
    api.clock.advance(1_000)


def _no_epoch(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_epoch(v) for k, v in value.items() if k != "project_epoch"}
    if isinstance(value, list):
        return [_no_epoch(v) for v in value]
    return value


def views(api: Api) -> dict[str, Any]:
    """What members observe of the project, every epoch taken out."""
    epoch = api.get(f"{P}/identity").expect(200)["project_epoch"]
    feed = {"project_epoch": epoch, "after_seq": 0, "limit": 10_000}
    seen = {
        "snapshot": api.get(f"{P}/snapshot").expect(200),
        "changes": api.get(f"{P}/changes", query=feed).expect(200),
        "materialized": api.get(f"{P}/changes/materialized", query=feed).expect(200),
        "outbox": api.get(f"{P}/handoffs", query={"box": "outbox"}).expect(200),
        "inbox": api.get(f"{P}/handoffs", RECEIVER, query={"box": "inbox"}).expect(200),
        "search": api.get(f"{P}/search", query={"q": "서버 cluster"}).expect(200),
        "handoff": api.status_of("h1"),
        "reader": api.get(f"{P}/resources/fact/f1", READER).expect(200),
    }
    return _no_epoch(seen)  # type: ignore[no-any-return]


# -- ADM-1: who may call the admin routes -----------------------------------------------------


def _admin_requests() -> list[tuple[str, str, dict[str, Any]]]:
    probe = "0" * 64
    boot_body = {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": "newcomer",
                 "token_sha256": probe}  # fmt: skip
    member = {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": WRITER,
              "status": "suspended"}  # fmt: skip
    return [
        ("POST", "/v1/admin/bootstrap", {"json": boot_body}),
        ("POST", "/v1/admin/members", {"json": member}),
        ("POST", "/v1/admin/tokens/revoke", {"json": {"token_sha256": probe}}),
        ("GET", f"/v1/admin/tenants/{TENANT}/export", {}),
        ("POST", "/v1/admin/import", {"body": b"{}\n", "content_type": NDJSON}),
        ("DELETE", f"/v1/admin/tenants/{TENANT}", {"query": {"confirm": TENANT}}),
    ]


def test_adm1_admin_routes_refuse_missing_unknown_and_member_tokens(api: Api) -> None:
    _admin_token(api)
    populate(api)
    before = export(api)
    for method, path, kwargs in _admin_requests():
        headers = {"content-type": kwargs["content_type"]} if "content_type" in kwargs else None
        plain = {k: v for k, v in kwargs.items() if k != "content_type"}
        missing = api.call(method, path, headers=headers, **plain)
        missing.expect(401, "authentication_failed")
        unknown = api.call(method, path, token=secrets.token_hex(32), headers=headers, **plain)
        unknown.expect(401, "authentication_failed")
        for actor in (WRITER, READER):
            member = api.call(method, path, as_=actor, headers=headers, **plain)
            member.expect(403, "admin_required")
    assert export(api) == before  # nothing changed
    api.get(f"{P}/snapshot").expect(200)


def test_adm1_admin_token_is_not_a_member_token(api: Api) -> None:
    token = _admin_token(api)
    api.call("GET", f"{P}/snapshot", token=token).expect(401, "authentication_failed")


# -- BOOT-1: bootstrap over HTTP --------------------------------------------------------------


def test_boot1_bootstrap_is_idempotent_and_adds_members(api: Api) -> None:
    token = secrets.token_hex(32)
    first = boot(api, "newcomer", token, role="reader", actor_kind="human").expect(200)
    assert first == {"tenant_id": TENANT, "project_id": PROJECT, "project_epoch": EPOCH,
                     "actor_id": "newcomer", "role": "reader"}  # fmt: skip
    before = export(api, include_token_digests="true")
    again = boot(api, "newcomer", token, role="reader", actor_kind="human").expect(200)
    assert again == first
    assert export(api, include_token_digests="true") == before
    api.tokens["newcomer"] = token
    assert api.get(f"{P}/identity", "newcomer").expect(200)["actor_id"] == "newcomer"
    session = {"command_id": "c1", "payload": {"session_id": "s9", "topic": "t"}}
    api.post(f"{P}/sessions", session, "newcomer").expect(403, "project_unauthorized")
    # A new project without an epoch gets a random one; a retry reuses it.
    body = {"tenant_id": TENANT, "project_id": "project_new", "actor_id": WRITER,
            "token_sha256": digest(api.tokens[WRITER])}  # fmt: skip
    made = admin(api, "POST", "/v1/admin/bootstrap", json=body).expect(200)
    assert made["project_epoch"] not in (EPOCH, None)
    assert admin(api, "POST", "/v1/admin/bootstrap", json=body).expect(200) == made


def test_boot1_conflicts_are_identity_mismatch_and_change_nothing(api: Api) -> None:
    populate(api)
    before = export(api, include_token_digests="true")
    writer_token = api.tokens[WRITER]
    conflicts = [
        boot(api, WRITER, writer_token, project_epoch="epoch_other"),
        boot(api, WRITER, writer_token, role="reader"),
        boot(api, WRITER, writer_token, actor_kind="human"),
        boot(api, "newcomer", writer_token),  # the token belongs to another actor
        boot(api, READER, api.tokens[RECEIVER], role="reader"),
    ]
    for reply in conflicts:
        reply.expect(403, "identity_mismatch")
    assert export(api, include_token_digests="true") == before
    assert api.get(f"{P}/identity", READER).expect(200)["actor_id"] == READER


def test_boot1_auth6_rotation_adds_a_token_and_revocation_is_final(api: Api) -> None:
    old, new = api.tokens[WRITER], secrets.token_hex(32)
    boot(api, WRITER, new).expect(200)
    for token in (old, new):
        api.call("GET", f"{P}/identity", token=token).expect(200)
    admin(api, "POST", "/v1/admin/tokens/revoke", json={"token_sha256": digest(old)}).expect(200)
    api.call("GET", f"{P}/identity", token=old).expect(401, "authentication_failed")
    api.call("GET", f"{P}/identity", token=new).expect(200)
    boot(api, WRITER, old).expect(403, "identity_mismatch")  # a revoked token stays revoked
    api.call("GET", f"{P}/identity", token=old).expect(401, "authentication_failed")


def test_adm2_bootstrap_and_member_bodies_are_checked(api: Api) -> None:
    bad = [
        {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": "x"},  # no token_sha256
        {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": "x", "token_sha256": "AB" * 32},
        {
            "tenant_id": TENANT,
            "project_id": PROJECT,
            "actor_id": "x",
            "token_sha256": "ab",
            "role": "king",
        },
        {
            "tenant_id": TENANT,
            "project_id": PROJECT,
            "actor_id": "x",
            "token_sha256": "ab" * 32,
            "extra": 1,
        },
    ]
    for body in bad:
        admin(api, "POST", "/v1/admin/bootstrap", json=body).expect(400, "invalid_command")
    no_change = {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": WRITER}
    admin(api, "POST", "/v1/admin/members", json=no_change).expect(400, "invalid_command")


# -- AUTH-5/6: members and tokens over HTTP ---------------------------------------------------


def _member(api: Api, actor: str, **change: str) -> Reply:
    body = {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": actor, **change}
    return admin(api, "POST", "/v1/admin/members", json=body)


def test_auth5_suspension_and_role_changes_take_effect_on_the_next_request(api: Api) -> None:
    api.session("s1")
    answer = _member(api, WRITER, status="suspended").expect(200)
    assert answer == {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": WRITER,
                      "role": "writer", "status": "suspended"}  # fmt: skip
    api.get(f"{P}/snapshot").expect(403, "project_unauthorized")
    _member(api, WRITER, status="active").expect(200)
    api.get(f"{P}/snapshot").expect(200)
    _member(api, WRITER, role="reader").expect(200)
    api.get(f"{P}/snapshot").expect(200)
    fact = {"command_id": "cmd_fx", "payload": {"fact_id": "fx", "session_id": "s1",
                                                "content": "x"}}  # fmt: skip
    api.post(f"{P}/facts", fact).expect(403, "project_unauthorized")
    _member(api, WRITER, role="writer").expect(200)
    api.post(f"{P}/facts", fact).expect(200)
    _member(api, "nobody", status="suspended").expect(404, "resource_not_found")
    # A member of another project is not a member here.
    _member(api, OUTSIDER, role="reader").expect(404, "resource_not_found")


def test_auth6_revoke_stops_the_token_on_the_next_request(api: Api) -> None:
    api.get(f"{P}/identity", HERMES).expect(200)
    body = {"token_sha256": digest(api.tokens[HERMES])}
    assert admin(api, "POST", "/v1/admin/tokens/revoke", json=body).expect(200) == {"revoked": True}
    api.get(f"{P}/identity", HERMES).expect(401, "authentication_failed")
    api.get(f"{P}/identity", WRITER).expect(200)
    unknown = {"token_sha256": digest(secrets.token_hex(32))}
    admin(api, "POST", "/v1/admin/tokens/revoke", json=unknown).expect(404, "resource_not_found")
    admin(api, "POST", "/v1/admin/tokens/revoke", json={"token_sha256": "zz"}).expect(
        400, "invalid_command"
    )


# -- ARC: export, import, delete over HTTP ----------------------------------------------------


def test_adm3_arc1_export_is_ndjson_with_a_verified_manifest(api: Api) -> None:
    populate(api)
    data = export(api)
    lines = data.splitlines(keepends=True)
    manifest = json.loads(lines[-1])
    assert manifest["type"] == "manifest"
    assert manifest["lines_sha256"] == hashlib.sha256(b"".join(lines[:-1])).hexdigest()
    kinds = [json.loads(line)["type"] for line in lines[:-1]]
    assert kinds[0] == "header" and "token" not in kinds
    assert manifest["counts"]["change"] == api.head()  # OTHER_PROJECT has no changes
    with_tokens = export(api, include_token_digests="true")
    assert json.loads(with_tokens.splitlines()[-1])["counts"]["token"] == 5
    one = records(export(api, project_id=OTHER_PROJECT))
    assert {r["project_id"] for r in one if "project_id" in r} == {OTHER_PROJECT}
    assert {r["actor_id"] for r in one if r["type"] == "actor"} == {OUTSIDER}
    admin(api, "GET", "/v1/admin/tenants/tenant_none/export").expect(404, "resource_not_found")
    missing = admin(api, "GET", f"/v1/admin/tenants/{TENANT}/export",
                    query={"project_id": "project_none"})  # fmt: skip
    missing.expect(404, "resource_not_found")
    odd = admin(api, "GET", f"/v1/admin/tenants/{TENANT}/export", query={"bogus": "1"})
    odd.expect(400, "invalid_command")


def test_adm3_arc5_export_then_import_into_a_fresh_backend_is_identical_apart_from_the_epoch(
    api: Api, tmp_path: Path
) -> None:
    populate(api)
    source_views = views(api)
    old_epoch = api.get(f"{P}/identity").expect(200)["project_epoch"]
    data = export(api, include_token_digests="true")
    # A fresh backend of the same kind, reached through HTTP only (for the socket backend the
    # shared server now serves the fresh app, so the source was read completely above).
    fresh = BACKENDS[api.backend_name](tmp_path / "fresh", api.clock)
    try:
        target = Api(api.backend_name, fresh.client, fresh.identity, api.clock,
                     dict(api.tokens), fresh.admin_token)  # fmt: skip
        summary = import_(target, data).expect(200)
        assert summary["tenant_id"] == TENANT
        assert set(summary["project_epochs"]) == {PROJECT, OTHER_PROJECT}
        assert summary["project_epochs"][PROJECT] != old_epoch
        assert summary["counts"]["token"] == 5 and summary["counts"]["actor"] == 5
        # The imported token digests authenticate the same members.
        assert views(target) == source_views
        new_epoch = target.get(f"{P}/identity").expect(200)["project_epoch"]
        assert new_epoch == summary["project_epochs"][PROJECT]
        stale = {"project_epoch": old_epoch, "after_seq": 0}
        target.get(f"{P}/changes", query=stale).expect(409, "cursor_epoch_mismatch")
        again = export(target, include_token_digests="true")
        assert records(again) == records(data)
        import_(target, data).expect(409, "resource_already_exists")
        assert records(export(target, include_token_digests="true")) == records(data)
    finally:
        fresh.close()


def test_arc2_import_refuses_malformed_bodies_and_wrong_content_type(api: Api) -> None:
    populate(api)
    data = export(api)
    lines = data.splitlines(keepends=True)
    tampered = data.replace(b'"role":"writer"', b'"role":"owner"')
    for bad in (tampered, b"".join(lines[:-1]), b"".join(lines[1:]), b"not json\n"):
        import_(api, bad).expect(400, "invalid_command")
    sent = admin(api, "POST", "/v1/admin/import", body=data, content_type="application/json")
    sent.expect(415, "unsupported_media_type")
    import_(api, data).expect(409, "resource_already_exists")  # the scopes exist
    assert records(export(api)) == records(data)


def test_adm3_arc4_delete_tenant_counts_rows_and_leaves_other_tenants(api: Api) -> None:
    populate(api)
    keep_token = secrets.token_hex(32)
    keep = {"tenant_id": KEEP, "project_id": PROJECT, "actor_id": "keeper",
            "token_sha256": digest(keep_token), "project_epoch": "epoch_keep"}  # fmt: skip
    admin(api, "POST", "/v1/admin/bootstrap", json=keep).expect(200)
    keep_before = export(api, KEEP, include_token_digests="true")
    path = f"/v1/admin/tenants/{TENANT}"
    admin(api, "DELETE", path, query={"confirm": KEEP}).expect(400, "invalid_command")
    admin(api, "DELETE", path).expect(400, "invalid_command")
    api.get(f"{P}/snapshot").expect(200)  # nothing deleted
    head = api.head()
    answer = admin(api, "DELETE", path, query={"confirm": TENANT}).expect(200)
    assert answer["tenant_id"] == TENANT
    removed = answer["removed"]
    assert removed["tenants"] == 1 and removed["projects"] == 2
    assert removed["actors"] == 5 and removed["memberships"] == 5
    assert removed["changes"] == head and removed["fact_search"] == 3
    # The members are gone: their tokens no longer authenticate. (The edge's per-isolate
    # token cache may still know a token for up to 30 s; the project object then refuses
    # it, because the membership is gone.)
    gone = api.get(f"{P}/snapshot")
    assert (gone.status, gone.code) in {
        (401, "authentication_failed"),
        (403, "project_unauthorized"),
    }, gone.body
    if not api.backend_name.startswith("edge"):
        gone.expect(401, "authentication_failed")
    admin(api, "GET", f"/v1/admin/tenants/{TENANT}/export").expect(404, "resource_not_found")
    admin(api, "DELETE", path, query={"confirm": TENANT}).expect(404, "resource_not_found")
    assert export(api, KEEP, include_token_digests="true") == keep_before
    api.call("GET", f"{P}/identity", token=keep_token).expect(200)


def _with_manifest(lines: list[bytes]) -> bytes:
    """`lines` (header first, manifest left out) with a correct manifest appended, so only
    what the test changed can make an import fail."""
    m = Manifest()
    for data in lines:
        m.add(json.loads(data)["type"], data)
    return b"".join(lines) + m.line()


def test_arc6_import_refuses_identity_after_rows_and_malformed_rows_writing_nothing(
    api: Api,
) -> None:
    populate(api)
    data = export(api, include_token_digests="true")
    admin(api, "DELETE", f"/v1/admin/tenants/{TENANT}", query={"confirm": TENANT}).expect(200)
    lines = data.splitlines(keepends=True)[:-1]
    kinds = [json.loads(data)["type"] for data in lines]
    first_row = kinds.index("resource")
    membership = kinds.index("membership")
    late_identity = [*lines[:membership], *lines[membership + 1 : first_row + 1]]
    late_identity += [lines[membership], *lines[first_row + 1 :]]
    change = kinds.index("change")
    bad_change = json.loads(lines[change])
    bad_change["operation"] = "teleport"
    bad_row = [*lines[:change], json.dumps(bad_change).encode() + b"\n", *lines[change + 1 :]]
    second_header = [*lines, lines[0]]
    for body in (late_identity, bad_row, second_header):
        import_(api, _with_manifest(body)).expect(400, "invalid_command")
        # Nothing was written: the tenant is still absent.
        path = f"/v1/admin/tenants/{TENANT}/export"
        admin(api, "GET", path).expect(404, "resource_not_found")
    summary = import_(api, _with_manifest(lines)).expect(200)
    assert summary["counts"]["token"] == 5
    assert records(export(api, include_token_digests="true")) == records(data)


def test_arc2_import_body_over_1_mib_is_accepted(api: Api) -> None:
    """Imports are exempt from the 1 MiB JSON limit (up to 256 MiB of ndjson)."""
    api.session("s1")
    chunk = "lorem ipsum dolor sit amet " * 2_000  # about 54 KB per fact
    for i in range(24):
        api.fact(f"big{i}", "s1", f"{chunk} {i}")
    views_before = api.get(f"{P}/snapshot").expect(200)
    data = export(api, include_token_digests="true")
    assert len(data) > 1024 * 1024
    admin(api, "DELETE", f"/v1/admin/tenants/{TENANT}", query={"confirm": TENANT}).expect(200)
    summary = import_(api, data).expect(200)
    assert summary["counts"]["resource"] == 25
    snapshot = api.get(f"{P}/snapshot").expect(200)
    assert _no_epoch(snapshot) == _no_epoch(views_before)
    assert records(export(api, include_token_digests="true")) == records(data)


def test_adm1_admin_routes_are_disabled_without_a_configured_token() -> None:
    """An app built without `admin_token_sha256` has administration off: every admin request,
    with any bearer, a member's, a malformed one or none, is 403 `admin_disabled`, whose
    message says how to turn it on."""
    from aidememo.domain.clock import FixedClock
    from aidememo.http.app import HttpApp
    from aidememo.stores.in_memory import InMemoryStore
    from tests.contract.support import ADMIN_TOKEN, START_MS, InProcessClient

    clock = FixedClock(START_MS)
    app = HttpApp(InMemoryStore(), clock=clock)
    closed = Api("closed", InProcessClient(app), app.services.identity, clock)
    token = closed.provision(WRITER, Role.OWNER)
    for method, path, kwargs in _admin_requests():
        headers = {"content-type": kwargs["content_type"]} if "content_type" in kwargs else None
        plain = {k: v for k, v in kwargs.items() if k != "content_type"}
        for bearer in (ADMIN_TOKEN, None, token, "not a token"):
            answer = closed.call(method, path, token=bearer, headers=headers, **plain)
            body = answer.expect(403, "admin_disabled")
            assert "--admin-token-file" in body["error"]["message"]
            assert "ADMIN_TOKEN_SHA256" in body["error"]["message"]
