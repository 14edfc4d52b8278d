"""The request pipeline's two stages (`aidememo.http.pipeline`), driven by both drivers."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from aidememo.domain.clock import FixedClock, RandomIds
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.http.admin_routes import ADMIN_IMPORT
from aidememo.http.app import HttpApp
from aidememo.http.body import Body, StreamBody, read_async
from aidememo.http.member_handlers import command_project_id
from aidememo.http.pipeline import (
    Admission,
    Authenticate,
    RateLimit,
    ReadBody,
    admit,
    drive,
    drive_async,
)
from aidememo.http.routes import COMMAND, ROUTES, route_named
from aidememo.http.scan import top_level_string
from aidememo.http.types import Request
from aidememo.service.access import Caller
from aidememo.service.identity import IdentityService
from aidememo.stores.in_memory import InMemoryStore

TOKEN, ADMIN = "member-token-1", "admin-token-1"
ADMIN_DIGEST = hashlib.sha256(ADMIN.encode()).digest()
P = "/v1/projects/p1"
JSON_CT = {"content-type": "application/json"}
NDJSON = "application/x-ndjson"


def _app() -> HttpApp:
    store = InMemoryStore()
    IdentityService(store, FixedClock(1_000), RandomIds()).bootstrap(
        tenant_id="t1",
        project_id="p1",
        actor_id="a1",
        token_sha256=hashlib.sha256(TOKEN.encode()).digest(),
    )
    return HttpApp(store, clock=FixedClock(2_000), admin_token_sha256=ADMIN_DIGEST)


class Recording:
    """A body still arriving whose every chunk read is recorded."""

    def __init__(self, chunks: list[bytes], length: int | None = None) -> None:
        self.reads = 0
        self.chunks = chunks
        self.body = StreamBody(self._source(), length)

    def _source(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.reads += 1
            yield chunk


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", **JSON_CT}


def test_http1_unauthenticated_post_reads_no_body() -> None:
    app = _app()
    for headers in (JSON_CT, _bearer("unknown-token"), {"authorization": "Basic x", **JSON_CT}):
        rec = Recording([b'{"command_id":', b'"c1"}'])
        response = app.dispatch(Request("POST", f"{P}/sessions", "", headers, rec.body))
        assert response.status == 401
        assert json.loads(response.body)["error"]["code"] == "authentication_failed"
        assert rec.reads == 0


def test_http1_refusals_before_authentication_read_no_body() -> None:
    app = _app()
    cases = [
        ("POST", "/v1/nowhere", {}, None, 404),
        ("PUT", "/v1/commands", {}, None, 405),
        ("POST", f"{P}/sessions", {"content-type": "text/plain"}, None, 415),
        ("POST", f"{P}/sessions", JSON_CT, 2 * 1024 * 1024, 413),  # declared too large
        ("POST", "/v1/admin/members", _bearer(TOKEN), None, 403),  # a member on an admin route
    ]
    for method, path, headers, length, status in cases:
        rec = Recording([b"{}"], length)
        response = app.dispatch(Request(method, path, "", headers, rec.body))
        assert response.status == status, (method, path, response.body)
        assert rec.reads == 0


def test_http1_body_of_undeclared_size_is_counted_as_it_is_read() -> None:
    app = _app()
    rec = Recording([b" " * (256 * 1024)] * 8)
    response = app.dispatch(Request("POST", f"{P}/sessions", "", _bearer(TOKEN), rec.body))
    assert response.status == 413
    assert json.loads(response.body)["error"]["code"] == "payload_too_large"
    assert rec.reads == 5  # passed 1 MiB at the fifth chunk; the rest is never read


def test_http1_admitted_body_is_read_whole_once() -> None:
    app = _app()
    body = json.dumps({"command_id": "c1", "payload": {"session_id": "s1", "topic": "t"}})
    rec = Recording([body[:10].encode(), body[10:].encode()])
    response = app.dispatch(Request("POST", f"{P}/sessions", "", _bearer(TOKEN), rec.body))
    assert response.status == 200, response.body
    assert rec.reads == 2 and rec.body.complete


def test_http1_streamed_route_gets_no_body_step() -> None:
    headers = {**_bearer(ADMIN), "content-type": "application/x-ndjson"}
    request = Request("POST", "/v1/admin/import", "", headers, StreamBody(iter(())))
    steps = admit(request, ADMIN_DIGEST)
    assert next(steps) == RateLimit(ADMIN_DIGEST)  # the admin token needs no lookup
    with pytest.raises(StopIteration) as done:
        steps.send(None)
    admission: Admission = done.value.value
    assert admission.route is ADMIN_IMPORT and admission.body is None


def test_http1_member_steps_in_order() -> None:
    digest = hashlib.sha256(TOKEN.encode()).digest()
    request = Request("POST", f"{P}/facts", "", _bearer(TOKEN), b"{}")
    steps = admit(request, None)
    assert next(steps) == Authenticate(digest)
    assert steps.send(Caller("t1", "a1")) == RateLimit(digest)
    assert steps.send(None) == ReadBody(1024 * 1024)
    with pytest.raises(StopIteration) as done:
        steps.send(b"{}")
    admission: Admission = done.value.value
    assert (admission.caller, admission.digest, admission.body) == (
        Caller("t1", "a1"),
        digest,
        b"{}",
    )


# -- the two drivers agree ------------------------------------------------------------------

_TABLE: list[tuple[str, str, dict[str, str], bytes, bool]] = [
    ("GET", "/health", {}, b"", False),
    ("GET", "/openapi.json", {"authorization": "Bearer whatever"}, b"", False),
    ("GET", f"{P}/identity", _bearer(TOKEN), b"", False),
    ("GET", f"{P}/identity", {}, b"", False),
    ("GET", f"{P}/identity", _bearer("nope"), b"", False),
    ("GET", f"{P}/identity", _bearer(TOKEN), b"x" * 10, False),  # a GET sent a body anyway
    ("GET", f"{P}/changes/live", _bearer(TOKEN), b"", True),
    ("GET", f"{P}/identity", _bearer(TOKEN), b"", True),  # an upgrade of another route
    ("POST", f"{P}/facts", _bearer(TOKEN), b'{"a": 1}', False),
    ("POST", f"{P}/facts", {"authorization": f"Bearer {TOKEN}"}, b"{}", False),
    ("POST", f"{P}/facts", {**_bearer(TOKEN), "content-type": "text/plain"}, b"{}", False),
    ("POST", f"{P}/facts", _bearer(TOKEN), b"x" * (1024 * 1024 + 1), False),
    ("DELETE", f"{P}/facts", _bearer(TOKEN), b"", False),
    ("POST", "/v1/admin/bootstrap", _bearer(ADMIN), b"{}", False),
    ("POST", "/v1/admin/bootstrap", _bearer(TOKEN), b"{}", False),
    ("POST", "/v1/admin/bootstrap", _bearer("nope"), b"{}", False),
    (
        "POST",
        "/v1/admin/import",
        {**_bearer(ADMIN), "content-type": "application/x-ndjson"},
        b"",
        False,
    ),
    ("GET", "/nowhere", {}, b"", False),
]


def _outcome(run: Any) -> tuple[Any, ...]:
    try:
        a: Admission = run()
    except AidememoError as error:
        return ("error", error.code, error.message)
    return (a.route.name, a.params, a.caller, a.digest, a.body)


def test_http1_a_front_without_a_rate_limit_gets_no_rate_limit_step() -> None:
    digest = hashlib.sha256(TOKEN.encode()).digest()
    request = Request("POST", f"{P}/facts", "", _bearer(TOKEN), b"{}")
    steps = admit(request, None, rate_limited=False)
    assert next(steps) == Authenticate(digest)
    assert steps.send(Caller("t1", "a1")) == ReadBody(1024 * 1024)
    with pytest.raises(StopIteration) as done:
        steps.send(b"{}")
    assert done.value.value.digest == digest


def test_http1_sync_and_async_drivers_give_the_same_answers() -> None:
    app = _app()
    limited = {hashlib.sha256(b"nope").digest()}

    def limit(digest: bytes) -> None:
        if digest in limited:
            raise fail(ErrorCode.RATE_LIMITED, "slow down")

    async def authenticate_async(digest: bytes) -> Caller:
        return app.authenticate(digest)

    async def limit_async(digest: bytes) -> None:
        limit(digest)

    def sync(req: Request) -> Admission:
        return drive(admit(req, ADMIN_DIGEST), app.authenticate, lambda _: req.body.read(), limit)

    def run_async(req: Request, data: bytes) -> Admission:
        async def read_async_body(limit_: int) -> bytes:
            async def chunks() -> Any:
                yield data

            return await read_async(chunks(), limit_)

        steps = admit(req, ADMIN_DIGEST)
        return asyncio.run(drive_async(steps, authenticate_async, read_async_body, limit_async))

    for method, path, headers, data, upgrade in _TABLE:
        first, second = (
            Request(method, path, "", headers, Body.of(data), upgrade=upgrade) for _ in range(2)
        )
        expected = _outcome(lambda first=first: sync(first))
        got = _outcome(lambda second=second, data=data: run_async(second, data))
        assert got == expected, (method, path)


def test_http1_dispatch_answers_match_the_driven_admission() -> None:
    app = _app()
    answers = {}
    for method, path, headers, data, upgrade in _TABLE:
        response = app.dispatch(Request(method, path, "", headers, data, upgrade=upgrade))
        answers[(method, path, upgrade, len(data))] = response.status
        assert response.status < 500
    assert answers[("GET", "/health", False, 0)] == 200
    # Admitted, then refused by the subscription's own checks (its cursor is missing).
    assert answers[("GET", f"{P}/changes/live", True, 0)] == 400


# -- routes --------------------------------------------------------------------------------


def test_edge4_routes_have_unique_names_and_cross_rpc_by_them() -> None:
    assert len({route.name for route in ROUTES}) == len(ROUTES)
    for route in ROUTES:
        assert route_named(route.name) is route
    with pytest.raises(AidememoError) as missing:
        route_named("no_such_route")
    assert missing.value.code is ErrorCode.ROUTE_NOT_FOUND


# -- the command body's project, without a decode ------------------------------------------


def test_edge4_top_level_string_finds_only_the_top_level_plain_key() -> None:
    assert top_level_string(b'{"project_id": "p1"}', "project_id") == "p1"
    assert top_level_string(b' {"a": {"project_id": "x"}, "project_id":"p2"}', "project_id") == "p2"
    assert top_level_string(b'{"a": ["project_id", "x"], "project_id": "p3"}', "project_id") == "p3"
    assert (
        top_level_string(b'{"a": "q\\"project_id\\": ", "project_id": "p4"}', "project_id") == "p4"
    )
    assert top_level_string(b'{"payload": {"project_id": "x"}}', "project_id") is None
    assert top_level_string(b'{"project\\u005fid": "x", "project_id": "p"}', "project_id") is None
    assert top_level_string(b'{"project_id": "p\\u0031"}', "project_id") is None
    assert top_level_string(b'{"project_id": 7}', "project_id") is None
    assert top_level_string(b'["project_id", "p"]', "project_id") is None
    assert top_level_string(b'{"project_id" "p"}', "project_id") is None
    assert top_level_string(b'{"a": "unterminated', "project_id") is None
    assert top_level_string(b"", "project_id") is None


def test_edge4_command_project_falls_back_to_the_handlers_error() -> None:
    request = Request("POST", "/v1/commands", "", JSON_CT)
    assert command_project_id(request, b'{"project_id": "p1", "x": [1]}') == "p1"
    for body, code in [
        (b"{not json", ErrorCode.INVALID_COMMAND),
        (b'{"project_id": "has/slash"}', None),
        (b'{"project_id": 5}', None),
    ]:
        with pytest.raises(AidememoError) as refused:
            command_project_id(request, body)
        if code is not None:
            assert refused.value.code is code
    assert COMMAND.body == "RawCommand"
