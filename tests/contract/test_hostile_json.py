"""Hostile bodies and query strings on every backend (CJ-3, CJ-4, HTTP-3, HTTP-7).

One table of bodies a decoder must refuse without a stack overflow, a 5xx or a message in
Python's words: deep nesting (100,000 levels of arrays and of objects), lone surrogates
escaped and raw in keys and values at several depths, bytes that are not UTF-8, a byte order
mark. Each goes to the raw command route, a typed route and an admin route, and the backend
must answer the next request normally. The same rules hold for query strings, for each line
of an archive import, and the charset of `Content-Type` is UTF-8 or 415.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from aidememo.service.archive import Manifest
from tests.contract.support import PROJECT, READER, WRITER, Api, P

NDJSON = "application/x-ndjson"
DEEP_ARRAYS = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECTS = b'{"a":' * 100_000 + b"1" + b"}" * 100_000


def _raw_command(payload: bytes, command_id: bytes = b'"cmd_hostile"') -> bytes:
    return (
        b'{"command_id":' + command_id + b',"project_id":"' + PROJECT.encode() + b'",'
        b'"expected_revision":null,"operation":"resource.put",'
        b'"resource":{"kind":"custom.note","id":"note_hostile"},"change":"upsert",'
        b'"payload":' + payload + b"}"
    )


def _fact(content: bytes) -> bytes:
    return (
        b'{"command_id":"cmd_fact_hostile","payload":{"fact_id":"f_hostile",'
        b'"session_id":"s_hostile","content":' + content + b"}}"
    )


# (route, body, what the message must say)
HOSTILE: list[tuple[str, bytes, str]] = [
    ("/v1/commands", DEEP_ARRAYS, "deeper than 64"),
    ("/v1/commands", DEEP_OBJECTS, "deeper than 64"),
    ("/v1/commands", b"[" * 500_000, "deeper than 64"),
    ("/v1/commands", _raw_command(b'{"x":' * 64 + b"1" + b"}" * 64), "deeper than 64"),
    ("/v1/commands", _raw_command(b'{"content":"a\\ud800b"}'), "string at /payload/content"),
    ("/v1/commands", _raw_command(b'{"content":"\\udfff"}'), "string at /payload/content"),
    ("/v1/commands", _raw_command(b'{"content":"\xed\xa0\x80"}'), "string at /payload/content"),
    ("/v1/commands", _raw_command(b'{"k\\ud800":1}'), "object key at /payload"),
    ("/v1/commands", _raw_command(b'{"k\xed\xb3\xbf":1}'), "object key at /payload"),
    ("/v1/commands", _raw_command(b'{"a":{"b\\udc00":1}}'), "object key at /payload/a"),
    ("/v1/commands", _raw_command(b'{"list":["ok","\\ud83d"]}'), "string at /payload/list/1"),
    ("/v1/commands", _raw_command(b"{}", b'"cmd_\\ud800"'), "string at /command_id"),
    ("/v1/commands", _raw_command(b'{"t":"caf\xe9"}'), "not UTF-8: byte 0xE9 at offset"),
    ("/v1/commands", b"\xef\xbb\xbf" + _raw_command(b"{}"), "byte order mark"),
    (f"{P}/facts", DEEP_ARRAYS, "deeper than 64"),
    (f"{P}/facts", DEEP_OBJECTS, "deeper than 64"),
    (f"{P}/facts", _fact(b'"redis \\ud800 down"'), "string at /payload/content"),
    (f"{P}/facts", _fact(b'"redis \xed\xbf\xbf down"'), "string at /payload/content"),
    (f"{P}/facts", _fact(b'"caf\xc3"'), "not UTF-8: byte 0xC3 at offset"),
    (
        f"{P}/sessions",
        b'{"command_id":"c","payload":{"session_id":"s","topic":"\\udbff"}}',
        "string at /payload/topic",
    ),
    (
        f"{P}/handoffs",
        b'{"command_id":"c","payload":{"handoff_id":"h","session_id":"s",'
        b'"to_actor":"codex-p2","focus":"\\ud800\\u0041"}}',
        "string at /payload/focus",
    ),
]


def _id(case: tuple[str, bytes, str]) -> str:
    route, body, _ = case
    return f"{route.rsplit('/', 1)[-1]}-{body[:16]!r}-{len(body)}"


def _still_answers(api: Api) -> None:
    api.get(f"{P}/identity").expect(200)


@pytest.mark.parametrize("case", HOSTILE, ids=[_id(c) for c in HOSTILE])
def test_cj3_cj4_hostile_bodies_are_400_and_the_backend_answers_on(
    api: Api, case: tuple[str, bytes, str]
) -> None:
    route, body, expected = case
    reply = api.call("POST", route, as_=WRITER, body=body)
    reply.expect(400, "invalid_command")
    message = reply.body["error"]["message"]
    assert expected in message, message
    assert "codec" not in message and "Traceback" not in message
    _still_answers(api)


def test_cj4_depth_64_is_stored_and_65_refused_on_every_route(api: Api) -> None:
    # The command object and the payload object are two of the 64 levels.
    at_64 = _raw_command(b'{"a":' + b"[" * 62 + b"]" * 62 + b"}")
    api.call("POST", "/v1/commands", as_=WRITER, body=at_64).expect(200)
    at_65 = _raw_command(b'{"a":' + b"[" * 63 + b"]" * 63 + b"}")
    reply = api.call("POST", "/v1/commands", as_=WRITER, body=at_65)
    assert "deeper than 64" in reply.expect(400, "invalid_command")["error"]["message"]
    typed = _fact(b"[" * 62 + b'"x"' + b"]" * 62)  # depth 64: refused later, as not a string
    reply = api.call("POST", f"{P}/facts", as_=WRITER, body=typed)
    assert "deeper" not in reply.expect(400, "invalid_command")["error"]["message"]


def test_cj4_escaped_surrogate_pairs_are_one_character(api: Api) -> None:
    raw = _raw_command(b'{"text":"\\ud83d\\ude00 and \\uD83D\\uDE00"}')
    api.call("POST", "/v1/commands", as_=WRITER, body=raw).expect(200)
    note = api.get(f"{P}/resources/custom.note/note_hostile").expect(200)
    assert note["state"]["body"]["text"] == "\U0001f600 and \U0001f600"


def test_cj4_admin_bodies_go_through_the_same_decoder(api: Api) -> None:
    if api.admin_token is None:
        pytest.skip(f"backend {api.backend_name} reports no admin token")
    for body, expected in (
        (DEEP_ARRAYS, "deeper than 64"),
        (b'{"tenant_id":"t\\ud800","project_id":"p","actor_id":"a"}', "string at /tenant_id"),
        (b'{"tenant_id":"t","proj\xed\xa0\x80":1}', "object key at the top level"),
        (b'{"tenant_id":"\xff"}', "not UTF-8: byte 0xFF at offset 14"),
    ):
        reply = api.call("POST", "/v1/admin/bootstrap", token=api.admin_token, body=body)
        assert expected in reply.expect(400, "invalid_command")["error"]["message"]
    _still_answers(api)


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


@pytest.mark.parametrize(
    ("path", "query", "code", "expected"),
    [
        (f"{P}/search", "q=%ff", "invalid_command", "query parameter q is not UTF-8: byte 0xFF"),
        (f"{P}/search", "q=ab%C3", "invalid_command", "query parameter q is not UTF-8"),
        (f"{P}/search", "q=%ED%A0%80", "invalid_command", "q holds a lone surrogate U+D800"),
        (f"{P}/search", "q=x&%ff=1", "invalid_command", "a query parameter name is not UTF-8"),
        (f"{P}/search", "q=x&limit=0", "invalid_command", "limit must be an integer 1-100"),
        (f"{P}/search", "q=x&limit=101", "invalid_command", "limit must be an integer 1-100"),
        (f"{P}/search", "q=x&limit=-1", "invalid_command", "limit must be an integer 1-100"),
        (f"{P}/handoffs", "box=inbox&limit=0", "invalid_command", "must be an integer 1-100"),
        (f"{P}/handoffs", "box=inbox&limit=101", "invalid_command", "must be an integer 1-100"),
        (f"{P}/changes", "limit=0", "invalid_change_batch", "limit must be an integer 1-10000"),
        (f"{P}/changes", "limit=10001", "invalid_change_batch", "must be an integer 1-10000"),
    ],
)
def test_cj4_http3_hostile_query_strings_name_the_parameter_and_bounds(
    api: Api, path: str, query: str, code: str, expected: str
) -> None:
    reply = api.call("GET", path, as_=READER, query=query)
    assert expected in reply.expect(400, code)["error"]["message"]
    _still_answers(api)


def test_cj4_percent_encoded_utf8_queries_are_read(api: Api) -> None:
    api.session("s1")
    api.fact("f_cafe", "s1", "le café est prêt")
    found = api.get(f"{P}/search", query="q=caf%C3%A9").expect(200)
    assert [r["fact_id"] for r in found["results"]] == ["f_cafe"], found


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=latin-1",
        "application/json; charset=ISO-8859-1",
        "application/json; charset=utf-16",
        'application/json;charset="windows-1252"',
    ],
)
def test_http7_non_utf8_charset_is_415_before_authentication(api: Api, content_type: str) -> None:
    body = _raw_command(b'{"t":"caf\xe9"}')
    for token in (None, api.tokens[WRITER]):
        reply = api.call(
            "POST", "/v1/commands", token=token, body=body, headers={"content-type": content_type}
        )
        assert "UTF-8" in reply.expect(415, "unsupported_media_type")["error"]["message"]
    _still_answers(api)


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
