"""SEC-*: secrets are refused on write, on every backend.

A secret in any screened field is 422 `secret_rejected` naming the kind and the field and
never the value, and nothing is written: no resource, no change, no search hit. Membership
comes first (a reader's write stays 403); an admin import and the replay of a stored receipt
are exempt. The sample secrets are assembled at run time, so this file holds none.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from aidememo.domain.envelope import Command
from aidememo.domain.model import ChangeOp, ResourceRef
from aidememo.service.archive import Manifest
from aidememo.service.ledger import command_fingerprint
from tests.contract.support import (
    EPOCH,
    OUTSIDER,
    PROJECT,
    READER,
    RECEIVER,
    TENANT,
    Api,
    P,
    Reply,
)
from tests.contract.test_admin import admin, export, import_

GITHUB = "gh" + "p_" + "Zq9" * 12
AWS_SECRET = "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfi" + "CYEXAMPLEKEY"
SLACK = "xo" + "xb-" + "123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
GITLAB = "gl" + "pat-" + "Xy7" * 7
PASSWORD = "pass" + "word=" + "Tr0ub4dor" * 2
PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow"
MARK = "zqxwvmark"  # a search term only the refused texts carry


def _refused(reply: Reply, kind: str, field: str, value: str) -> None:
    body = reply.expect(422, "secret_rejected")
    message = body["error"]["message"]
    assert kind in message and field in message, message
    assert value not in message and value not in json.dumps(body)


def _nothing_written(api: Api, head: int, *refs: tuple[str, str]) -> None:
    assert api.head() == head
    feed = {"project_epoch": EPOCH, "after_seq": head}
    assert api.get(f"{P}/changes", query=feed).expect(200)["entries"] == []
    for kind, rid in refs:
        api.get(f"{P}/resources/{kind}/{rid}").expect(404, "resource_not_found")
    assert api.get(f"{P}/search", query={"q": MARK}).expect(200)["results"] == []


def _typed_cases() -> list[tuple[str, dict[str, Any], str, str, str, tuple[str, str]]]:
    """(route, payload, kind, pointer, secret, resource) of every screened typed field."""
    route = {"to_actor": RECEIVER, "session_id": "s1"}
    return [
        ("sessions", {"session_id": "s_sec", "topic": f"{MARK} {GITHUB}"},
         "github_token", "/payload/topic", GITHUB, ("session", "s_sec")),
        ("facts", {"fact_id": "f_sec", "session_id": "s1", "content": f"{MARK}\n{PEM}"},
         "private_key", "/payload/content", PEM, ("fact", "f_sec")),
        ("facts", {"fact_id": "f_aws", "session_id": "s1", "content": f"{MARK} {AWS_SECRET}"},
         "aws_secret_access_key", "/payload/content", AWS_SECRET, ("fact", "f_aws")),
        ("handoff-contexts", {"context_id": "c_sec", "handoff_id": "h_sec", **route,
                              "content": f"{MARK} use {SLACK}"},
         "slack_token", "/payload/content", SLACK, ("handoff_context", "c_sec")),
        ("handoffs", {"handoff_id": "h_sec", **route, "focus": f"{MARK} {GITLAB}"},
         "gitlab_token", "/payload/focus", GITLAB, ("handoff", "h_sec")),
        ("handoffs", {"handoff_id": "h_sec", **route, "focus": "rotate keys",
                      "done_when": f"{MARK} {PASSWORD} works"},
         "generic_api_key", "/payload/done_when", PASSWORD, ("handoff", "h_sec")),
    ]  # fmt: skip


def test_sec1_sec3_a_secret_in_any_typed_field_is_refused_and_nothing_is_written(
    api: Api,
) -> None:
    api.session("s1")
    head = api.head()
    for route, payload, kind, pointer, secret, ref in _typed_cases():
        reply = api.post(f"{P}/{route}", {"command_id": f"cmd_{kind}", "payload": payload})
        _refused(reply, kind, pointer, secret)
        _nothing_written(api, head, ref)


def test_sec1_sec3_a_secret_in_a_custom_key_or_string_is_refused(api: Api) -> None:
    head = api.head()
    cases: list[tuple[dict[str, Any], str, str, str]] = [
        ({"notes": [{"text": "ok"}, {"text": f"{MARK} {GITHUB}"}]},
         "github_token", "/payload/notes/1/text", GITHUB),
        ({"meta": {f"{MARK} {SLACK}": 1}}, "slack_token", "/payload/meta", SLACK),
        ({"a/b": {"pass" + "word": "Tr0ub4dor" * 2}},
         "generic_api_key", "/payload/a~1b/password", "Tr0ub4dor" * 2),
    ]  # fmt: skip
    for i, (payload, kind, pointer, secret) in enumerate(cases):
        reply = api.put_note(f"n_sec{i}", payload)
        _refused(reply, kind, pointer, secret)
        _nothing_written(api, head, ("custom.note", f"n_sec{i}"))
    # A clean note is written; a clean note that names a secret without its value too.
    api.put_note("n_ok", {"text": "the token lives in the vault", "password": "REDACTED"})
    assert api.head() == head + 1


def test_sec3_membership_comes_first_a_readers_secret_is_403(api: Api) -> None:
    api.session("s1")
    head = api.head()
    body = {"command_id": "cmd_r", "payload": {"fact_id": "f_r", "session_id": "s1",
                                              "content": f"{MARK} {GITHUB}"}}  # fmt: skip
    for actor in (READER, OUTSIDER):
        api.post(f"{P}/facts", body, actor).expect(403, "project_unauthorized")
        api.put_note("n_r", {"text": GITHUB}, as_=actor).expect(403, "project_unauthorized")
    api.call("POST", f"{P}/facts", json=body).expect(401, "authentication_failed")
    _nothing_written(api, head, ("fact", "f_r"), ("custom.note", "n_r"))


def _fact_payload(content: str) -> dict[str, Any]:
    return {"fact_id": "f_imp", "session_id": "s1", "content": content}


def _fingerprint(content: str) -> str:
    cmd = Command("cmd_f_imp", PROJECT, None, "fact.create", ResourceRef("fact", "f_imp"),
                  ChangeOp.UPSERT, _fact_payload(content))  # fmt: skip
    return command_fingerprint(cmd)


def test_sec4_admin_import_and_receipt_replay_are_exempt(api: Api) -> None:
    if api.admin_token is None:
        pytest.skip(f"backend {api.backend_name} reports no admin token")
    api.session("s1")
    clean = f"{MARK} deploy key is XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"
    leaked = f"{MARK} deploy key is {GITHUB}"
    api.fact("f_imp", "s1", clean)
    data = export(api, include_token_digests="true")
    admin(api, "DELETE", f"/v1/admin/tenants/{TENANT}", query={"confirm": TENANT}).expect(200)
    # The archive as if the secret had been stored before the screen existed: the fact, its
    # change and its receipt's fingerprint carry it; the manifest is recomputed.
    lines = data.replace(clean.encode(), leaked.encode())
    lines = lines.replace(_fingerprint(clean).encode(), _fingerprint(leaked).encode())
    rows = lines.splitlines(keepends=True)[:-1]
    manifest = Manifest()
    for row in rows:
        manifest.add(json.loads(row)["type"], row)
    import_(api, b"".join(rows) + manifest.line()).expect(200)
    fact = api.get(f"{P}/resources/fact/f_imp").expect(200)
    assert GITHUB in json.dumps(fact)
    assert api.get(f"{P}/search", query={"q": MARK}).expect(200)["results"]
    # A retry of the stored command returns its receipt (SEC-4); a new command is refused.
    head = api.head()
    retry = {"command_id": "cmd_f_imp", "payload": _fact_payload(leaked)}
    receipt = api.post(f"{P}/facts", retry).expect(200)
    assert receipt["project_seq"] <= head
    fresh = {"command_id": "cmd_f_new", "payload": {**_fact_payload(leaked), "fact_id": "f2"}}
    _refused(api.post(f"{P}/facts", fresh), "github_token", "/payload/content", GITHUB)
    assert api.head() == head
