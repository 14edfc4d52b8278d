"""Every HTTP rule answers the same however a request body's bytes arrive (SPEC.md HTTP-1,
ART-3), against a real `aidememo serve` on SQLite.

Each body-bearing route of the route table gets the same requests in three framings: with a
`Content-Length` in one write (collected whole before the request runs), chunked in one chunk
in one write, and chunked in several chunks written apart (both read by the core as they
arrive). A request's status and error code must not depend on
the framing; the one rule about the framing itself is ART-3's: an upload without a
`Content-Length` is 411 `length_required`, in one chunk as in several.
"""

from __future__ import annotations

import json
import select
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from aidememo.http.routes import ROUTES, Route
from tests.origin.http_support import Answer, Conn
from tests.origin.test_serve_process import ServeProcess

PROJECT = "/v1/projects/demo"
FRAMINGS = ("length", "one_chunk", "chunks")
UPLOAD = b"twelve bytes"
Case = tuple[str, dict[str, str], bytes]  # path, headers, body
CaseMaker = Callable[[str], Case]  # of a framing's name: its own ids, so each can succeed


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServeProcess, str]]:
    from aidememo.cli.main import main

    tmp = tmp_path_factory.mktemp("framing")
    home = tmp / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIDEMEMO_HOME", str(home))
        token_file = tmp / "demo.token"
        assert main(["token", "new", "--out", str(token_file)]) == 0
        args = ["--tenant-id", "local", "--project-id", "demo", "--actor-id", "demo-agent"]
        assert main(["bootstrap", *args, "--token-file", str(token_file)]) == 0
    token = token_file.read_text().strip()
    server = ServeProcess(home, tmp / "serve.log")
    try:
        auth = {"authorization": f"Bearer {token}"}
        session = {"command_id": "framing.s1", "payload": {"session_id": "s1", "topic": "t"}}
        reply = httpx.post(f"{server.url}{PROJECT}/sessions", json=session, headers=auth)
        assert reply.status_code == 200, reply.text
        yield server, token
    finally:
        server.kill()


def send(port: int, method: str, case: Case, framing: str) -> Answer:
    """`case` sent as `framing`; the answer read back (sending stops once one arrives)."""
    path, headers, body = case
    lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if framing == "length":
        lines.append(f"content-length: {len(body)}")
        writes = [body]
    else:
        lines.append("transfer-encoding: chunked")
        size = len(body) if framing == "one_chunk" else max(1, -(-len(body) // 3))
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        frames = [b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces] + [b"0\r\n\r\n"]
        writes = [b"".join(frames)] if framing == "one_chunk" else frames
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    with Conn(port) as conn:
        conn.send(head + writes[0])
        for data in writes[1:]:  # apart: each piece its own read at the server
            if select.select([conn.sock], [], [], 0.05)[0]:
                break  # answered before the whole body (refused unread)
            try:
                conn.send(data)
            except OSError:
                break
        return conn.read(head_only=method == "HEAD")


def outcome(answer: Answer) -> tuple[int, str | None]:
    """The status and, for an error, its code."""
    status = int(answer.status_line.split(b" ")[1])
    code = None
    if status >= 400:
        code = answer.json()["error"]["code"]
    return status, code


def _path(route: Route, **params: str) -> str:
    values = {"project_id": "demo", "handoff_id": "h_none", "reservation_id": "r_none"}
    values |= {"artifact_id": "a_none", **params}
    path = route.path
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    return path


def valid(route: Route, token: str) -> CaseMaker | None:
    """A well-formed request of `route` for a framing, with ids of its own."""
    member = {"authorization": f"Bearer {token}", "content-type": "application/json"}

    def body_of(payload: Any) -> Callable[[str], Case]:
        def make(framing: str) -> Case:
            text = json.dumps(payload(framing)).encode()
            return _path(route), member, text

        return make

    makers: dict[str, Callable[[str], Any]] = {
        "command": lambda f: {
            "command_id": f"framing.c.{f}",
            "project_id": "demo",
            "expected_revision": None,
            "operation": "resource.put",
            "resource": {"kind": "custom.note", "id": f"n_{f}"},
            "change": "upsert",
            "payload": {"framing": f},
        },
        "create_session": lambda f: {
            "command_id": f"framing.s.{f}",
            "payload": {"session_id": f"s_{f}", "topic": "framing"},
        },
        "create_fact": lambda f: {
            "command_id": f"framing.f.{f}",
            "payload": {"fact_id": f"f_{f}", "session_id": "s1", "content": f"sent {f}"},
        },
        "accept": lambda f: {
            "command_id": f"framing.a.{f}",
            "expected_revision": 1,
            "payload": {"claim_id": f"c_{f}"},
        },
        "mcp": lambda f: {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        "artifact_reserve": lambda f: {
            "command_id": f"framing.r.{f}",
            "payload": {"path": f"sessions/s1/artifacts/{f}.bin", "size_bytes": 12},
        },
    }
    maker = makers.get(route.name)
    return None if maker is None else body_of(maker)


def cases(route: Route, token: str) -> dict[str, CaseMaker]:
    """The requests every framing of `route` gets: refusals of HTTP-1's order, and a
    well-formed one where the route has one here."""
    media = route.media_type
    bearer = {"authorization": f"Bearer {token}"}
    path = _path(route)
    out: dict[str, CaseMaker] = {
        "malformed": lambda f: (path, {**bearer, "content-type": media}, b"{nope, " * 40),
        "media type": lambda f: (path, {**bearer, "content-type": "text/plain"}, b"{}"),
        "no token": lambda f: (path, {"content-type": media}, b"{}"),
        "bad token": lambda f: (path, {"authorization": "Bearer x", "content-type": media}, b"{}"),
    }
    made = valid(route, token)
    if made is not None:
        out["valid"] = made
    return out


BODY_ROUTES = [route for route in ROUTES if route.body is not None]


@pytest.mark.parametrize("route", BODY_ROUTES, ids=[route.name for route in BODY_ROUTES])
def test_http1_a_body_route_answers_alike_however_its_body_is_framed(
    served: tuple[ServeProcess, str], route: Route
) -> None:
    server, token = served
    for name, make in cases(route, token).items():
        answers = {f: outcome(send(server.port, route.method, make(f), f)) for f in FRAMINGS}
        assert len(set(answers.values())) == 1, f"{route.name} {name}: {answers}"
        if name == "valid":
            assert answers["length"][0] == 200 or route.name == "accept", answers


def test_art3_an_upload_without_a_length_is_411_in_one_chunk_or_several(
    served: tuple[ServeProcess, str],
) -> None:
    server, token = served
    bearer = {"authorization": f"Bearer {token}"}
    route = next(route for route in ROUTES if route.name == "artifact_upload")
    answers = {}
    for framing in FRAMINGS:
        reserve = {
            "command_id": f"framing.up.{framing}",
            "payload": {"path": f"sessions/s1/artifacts/up_{framing}.bin", "size_bytes": 12},
        }
        reply = httpx.post(
            f"{server.url}{PROJECT}/artifact-reservations", json=reserve, headers=bearer
        )
        assert reply.status_code == 200, reply.text
        path = _path(route, reservation_id=reply.json()["reservation_id"])
        headers = {**bearer, "content-type": "application/octet-stream"}
        answers[framing] = outcome(send(server.port, "PUT", (path, headers, UPLOAD), framing))
    assert answers == {
        "length": (200, None),
        "one_chunk": (411, "length_required"),
        "chunks": (411, "length_required"),
    }
