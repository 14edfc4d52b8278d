"""The one decoder on every backend (CJ-3, CJ-4, HTTP-3, HTTP-7): what it accepts, and what it
refuses in an archive import's lines.

The bodies and query strings it refuses (100,000 levels of nesting, lone surrogates escaped
and raw in keys and values, bytes that are not UTF-8, a byte order mark, a charset other than
UTF-8) are rows of tests/hostile_table.py, run by test_hostile_requests.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from aidememo.service.archive import Manifest
from tests import hostile_table
from tests.contract.support import PROJECT, WRITER, Api, P

NDJSON = "application/x-ndjson"
DEEP_ARRAYS = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECTS = b'{"a":' * 100_000 + b"1" + b"}" * 100_000


def _raw_command(payload: bytes, command_id: bytes = b'"cmd_hostile"') -> bytes:
    return hostile_table.raw_command(payload, command_id).replace(b"{project}", PROJECT.encode())


def _fact(content: bytes) -> bytes:
    return hostile_table.fact_body(content).replace(b"{session}", b"s_hostile")


def _still_answers(api: Api) -> None:
    api.get(f"{P}/identity").expect(200)


def test_cj4_depth_64_is_stored_on_every_route(api: Api) -> None:
    # The command object and the payload object are two of the 64 levels; 65 is a table row.
    at_64 = _raw_command(b'{"a":' + b"[" * 62 + b"]" * 62 + b"}")
    api.call("POST", "/v1/commands", as_=WRITER, body=at_64).expect(200)
    typed = _fact(b"[" * 62 + b'"x"' + b"]" * 62)  # depth 64: refused later, as not a string
    reply = api.call("POST", f"{P}/facts", as_=WRITER, body=typed)
    assert "deeper" not in reply.expect(400, "invalid_command")["error"]["message"]


def test_cj4_escaped_surrogate_pairs_are_one_character(api: Api) -> None:
    raw = _raw_command(b'{"text":"\\ud83d\\ude00 and \\uD83D\\uDE00"}')
    api.call("POST", "/v1/commands", as_=WRITER, body=raw).expect(200)
    note = api.get(f"{P}/resources/custom.note/note_hostile").expect(200)
    assert note["state"]["body"]["text"] == "\U0001f600 and \U0001f600"


def _lines_with_manifest(lines: list[bytes]) -> bytes:
    m = Manifest()
    for data in lines:
        m.add(json.loads(data.decode("latin-1"))["type"], data)  # the type is ASCII
    return b"".join(lines) + m.line()


def test_cj4_archive_import_lines_go_through_the_same_decoder(api: Api) -> None:
    if api.admin_token is None:
        pytest.skip(f"backend {api.backend_name} reports no admin token")
    api.session("s1")
    api.fact("f1", "s1", "cache fallback decided")
    token = {"authorization": f"Bearer {api.admin_token}"}
    exported = api.call("GET", "/v1/admin/tenants/tenant_http/export", headers=token)
    data = exported.expect(200)
    assert isinstance(data, bytes)
    lines = data.splitlines(keepends=True)[:-1]  # the manifest is made again below
    api.call(
        "DELETE", "/v1/admin/tenants/tenant_http", headers=token, query={"confirm": "tenant_http"}
    ).expect(200)
    fact_at = next(i for i, line in enumerate(lines) if b"cache fallback decided" in line)
    for bad, expected in (
        (b"cache \\ud800 decided", f"line {fact_at + 1}: the string at /"),
        (b"cache \xed\xa0\x80 decided", f"line {fact_at + 1}: the string at /"),
        (b"cache \xe9 decided", f"line {fact_at + 1} is not UTF-8: byte 0xE9 at offset"),
    ):
        tampered = list(lines)
        tampered[fact_at] = lines[fact_at].replace(b"cache fallback decided", bad)
        reply = api.call(
            "POST",
            "/v1/admin/import",
            token=api.admin_token,
            body=_lines_with_manifest(tampered),
            headers={"content-type": NDJSON},
        )
        assert expected in reply.expect(400, "invalid_command")["error"]["message"]
    deep = [*lines[:1], DEEP_ARRAYS + b"\n", *lines[1:]]
    reply = api.call(
        "POST",
        "/v1/admin/import",
        token=api.admin_token,
        body=b"".join(deep),
        headers={"content-type": NDJSON},
    )
    assert "line 2 nests" in reply.expect(400, "invalid_command")["error"]["message"]
    # Nothing of the refused imports was written: the intact export imports whole.
    api.call(
        "POST",
        "/v1/admin/import",
        token=api.admin_token,
        body=_lines_with_manifest(lines),
        headers={"content-type": NDJSON},
    ).expect(200)


def test_cj4_percent_encoded_utf8_queries_are_read(api: Api) -> None:
    api.session("s1")
    api.fact("f_cafe", "s1", "le café est prêt")
    found = api.get(f"{P}/search", query="q=caf%C3%A9").expect(200)
    assert [r["fact_id"] for r in found["results"]] == ["f_cafe"], found


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=utf-8",
        "application/json; charset=UTF-8",
        'application/json; charset="utf-8"',
        "application/json;charset=utf8",
        "application/json; charset=UTF8",
    ],
)
def test_http7_utf8_charset_spellings_are_accepted(api: Api, content_type: str) -> None:
    body = _raw_command('{"t":"café"}'.encode())
    reply = api.call(
        "POST", "/v1/commands", as_=WRITER, body=body, headers={"content-type": content_type}
    )
    got: Any = reply.expect(200)
    assert got["revision"] == 1
