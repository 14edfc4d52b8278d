"""The pure parts of the edge, on plain CPython: routing rules, the token cache, the RPC
envelope and its pages."""

from __future__ import annotations

import json

import pytest

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.http.pipeline import Admission
from aidememo.http.routes import COMMAND, resolve
from aidememo.http.types import Request, Response
from aidememo.service.access import Caller
from durable_objects.rpc import (
    PAGE_BYTES,
    answer,
    caller_from,
    caller_payload,
    forwarded_caller,
    forwarded_headers,
    iter_packed,
    pack_pages,
    request_and_caller,
    request_from,
    request_payload,
    request_text,
    response_parts,
    response_payload,
    response_text,
    unpack_page,
    unwrap,
)
from worker.auth_cache import TTL_MS, TokenCache
from worker.routing import insecure, project_object_name, token_shard, var_is_set


def _json_only(value: object) -> object:
    """What survives structured clone as JSON: no tuples, bytes or other types."""
    return json.loads(json.dumps(value))


def test_edge2_insecure_only_for_plain_http_v1() -> None:
    assert insecure("http", "/v1/projects/p/identity", False)
    assert insecure("http", "/v1", False)
    assert insecure("HTTP", "/v1/admin/import", False)
    assert not insecure("https", "/v1/projects/p/identity", False)
    assert not insecure("http", "/health", False)
    assert not insecure("http", "/v10", False)
    assert not insecure("http", "/v1/x", True)


def test_edge2_var_is_set() -> None:
    class Env:
        A = "1"
        B = "false"
        C = ""

    assert var_is_set(Env, "A")
    assert not var_is_set(Env, "B")
    assert not var_is_set(Env, "C")
    assert not var_is_set(Env, "MISSING")


def test_edge1_object_names() -> None:
    assert project_object_name("t1", "p1") == "t1/p1"
    assert token_shard("ab" + "0" * 62) == "tokens-ab"
    assert len({token_shard(f"{n:02x}" + "0" * 62) for n in range(256)}) == 256


def test_edge3_token_cache_window_is_at_most_30_s() -> None:
    with pytest.raises(ValueError, match="at most"):
        TokenCache(ttl_ms=TTL_MS + 1)
    cache = TokenCache()
    who = Caller("t", "a")
    cache.put(b"d", who, 1_000)
    assert cache.get(b"d", 1_000 + TTL_MS - 1) == who
    assert cache.get(b"d", 1_000 + TTL_MS) is None
    cache.put(b"d", who, 0)
    cache.evict(b"d")
    assert cache.get(b"d", 0) is None


def test_edge3_token_cache_is_bounded() -> None:
    cache = TokenCache(max_entries=2)
    for n in range(3):
        cache.put(bytes([n]), Caller("t", str(n)), 0)
    assert cache.get(bytes([0]), 0) is None
    assert cache.get(bytes([2]), 0) == Caller("t", "2")


def test_edge4_answer_and_unwrap_carry_domain_errors_by_code() -> None:
    assert unwrap(_json_only(answer(lambda: {"x": 1}))) == {"x": 1}

    def boom() -> None:
        raise fail(ErrorCode.IDENTITY_MISMATCH, "nope")

    with pytest.raises(AidememoError) as caught:
        unwrap(_json_only(answer(boom)))
    assert (caught.value.code, caught.value.message) == (ErrorCode.IDENTITY_MISMATCH, "nope")
    with pytest.raises(AidememoError) as malformed:
        unwrap({"neither": 1})
    assert malformed.value.code is ErrorCode.STORAGE_FAILURE


def test_edge4_request_payload_is_plain_and_carries_no_credentials() -> None:
    request = Request(
        "POST",
        "/v1/projects/p/facts",
        "a=1",
        {"authorization": "Bearer secret", "cookie": "c", "content-type": "application/json"},
        '{"k": "값"}'.encode(),
        request_id="r1",
    )
    match = resolve("POST", "/v1/projects/p/facts")
    assert match.route is not None
    admission = Admission(match.route, match.params, body=request.body.read())
    payload = request_payload(request, admission)
    assert _json_only(payload) == payload
    # Of the headers only the content type travels: credentials stay at the Worker.
    assert "secret" not in json.dumps(payload) and "cookie" not in json.dumps(payload)
    caller = Caller("t1", "a1")
    back, routed = request_from(payload, caller)
    assert (back.method, back.path, back.query, back.body.read(), back.request_id) == (
        request.method,
        request.path,
        request.query,
        request.body.read(),
        request.request_id,
    )
    assert back.headers == {"content-type": "application/json"}
    # The object serves the Worker's route and caller, not routing or authenticating again.
    assert (routed.route, routed.params, routed.caller) == (match.route, match.params, caller)
    # The body crosses as text; one that is not UTF-8 as base64 text, for the object to refuse.
    assert payload["body"] == '{"k": "값"}'
    # In the framed text of the hop the body follows the JSON head line as it is.
    framed, who = request_and_caller(request_text(request, admission, caller))
    assert framed == payload and caller_from(who) == caller
    binary = request_payload(
        Request("POST", "/v1/commands"), Admission(COMMAND, {}, body=b"\xff\xfe")
    )
    assert "body" not in binary
    assert request_from(_json_only(binary), caller)[0].body.read() == b"\xff\xfe"


def test_edge4_response_and_caller_round_trip() -> None:
    response = Response(201, [("content-type", "application/json")], b'{"a":"\xc3\xa9"}')
    body, status, headers = response_parts(_json_only(response_payload(response)))
    assert (body.encode(), status, list(headers.items())) == (
        response.body,
        response.status,
        response.headers,
    )
    lines = Response(200, [("content-type", "application/x-ndjson")], b'{"a":1}\n{"b":"\\n"}\n')
    assert response_parts(response_text(lines)) == (
        lines.body.decode(),
        200,
        {"content-type": "application/x-ndjson"},
    )  # the framed text: a JSON head line, then the body as it is
    who = Caller("t", "a")
    assert caller_from(_json_only(caller_payload(who))) == who


def test_arc7_edge4_pages_hold_whole_lines_under_the_limit() -> None:
    lines = [("resource", b'{"n":%d}\n' % n) for n in range(50)]
    lines += [("change", b"x" * 90 + b"\n") for _ in range(20)]
    pages = pack_pages(lines, limit=300)
    assert all(sum(len(t.encode()) for _, _, t in page) <= 300 for page in pages)
    flat = [(k, t) for page in pages for k, _, t in page]
    assert "".join(t for _, t in flat).encode() == b"".join(d for _, d in lines)
    assert sum(c for page in pages for _, c, _ in page) == len(lines)
    assert _json_only(pages) == pages
    assert PAGE_BYTES == 1024 * 1024
    big = [("resource", b"y" * 500 + b"\n"), ("resource", b"z\n")]
    assert [len(page) for page in pack_pages(big, limit=300)] == [1, 1]  # a long line alone


def test_arc8_packed_pages_are_the_pages_as_bytes() -> None:
    """`iter_packed` (what a project object stages) unpacks to exactly `pack_pages`, with
    run sizes in bytes, non-ASCII text included; a line longer than the limit is alone."""
    lines = [("resource", '{"n":%d,"t":"서버"}\n'.encode() % n) for n in range(40)]
    lines += [("change", b"x" * 90 + b"\n") for _ in range(20)]
    lines += [("audit", b"a" * 400 + b"\n"), ("audit", b"b\n")]
    packed = list(iter_packed(iter(lines), limit=300))
    assert [unpack_page(runs, data) for runs, data in packed] == pack_pages(lines, limit=300)
    for runs, data in packed:
        assert sum(size for _, _, size in runs) == len(data)
        assert len(data) <= 300 or sum(count for _, count, _ in runs) == 1
    assert b"".join(data for _, data in packed) == b"".join(d for _, d in lines)
    assert list(iter_packed([])) == []


def test_edge4_forwarded_headers_replace_client_identity_and_drop_credentials() -> None:
    sent = {
        "authorization": "Bearer secret",
        "cookie": "c=1",
        "upgrade": "websocket",
        "x-aidememo-actor": "someone_else",
        "x-aidememo-tenant": "other_tenant",
        "x-aidememo-anything": "x",
        "x-request-id": "req1",
    }
    out = forwarded_headers(sent, Caller("t1", "a1"))
    assert out == {
        "upgrade": "websocket",
        "x-request-id": "req1",
        "x-aidememo-tenant": "t1",
        "x-aidememo-actor": "a1",
    }
    assert forwarded_caller(out) == Caller("t1", "a1")


def test_edge4_forwarded_caller_without_identity_is_authentication_failed() -> None:
    for headers in ({}, {"x-aidememo-tenant": "t1"}, {"x-aidememo-actor": "a1"}):
        with pytest.raises(AidememoError) as info:
            forwarded_caller(headers)
        assert info.value.code is ErrorCode.AUTHENTICATION_FAILED
