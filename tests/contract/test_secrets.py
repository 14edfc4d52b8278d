"""SEC-*: secrets are refused on write, on every backend.

A secret in any screened field is 422 `secret_rejected` naming the kind and the field and
never the value, and nothing is written; membership comes first (a reader's write stays 403):
those refusals are rows of tests/hostile_table.py, run by test_hostile_requests.py. Here: a
clean text that names a secret is written, and an admin import and the replay of a stored
receipt are exempt. The sample secrets are assembled at run time, so this file holds none.
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
    PROJECT,
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


def test_sec5_a_note_naming_a_secret_without_its_value_is_written(api: Api) -> None:
    head = api.head()
    api.put_note("n_ok", {"text": "the token lives in the vault", "password": "REDACTED"})
    assert api.head() == head + 1


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
