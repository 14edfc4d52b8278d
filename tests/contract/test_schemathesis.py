"""Schemathesis against a live uvicorn server: no 5xx, no answer outside the OpenAPI document.

The server runs in a thread on a loopback socket, over a SQLite file, with a bootstrapped
writer token sent as the bearer on every case. Generation is derandomized and bounded, so the
run is deterministic and short. Valid project ids are pinned to the provisioned project so
cases reach the domain rules instead of stopping at 403.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
uvicorn = pytest.importorskip("uvicorn")
requests = pytest.importorskip("requests")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from aidememo.domain.ids import is_valid_id  # noqa: E402
from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES  # noqa: E402
from aidememo.domain.model import Role  # noqa: E402
from aidememo.http.app import HttpApp  # noqa: E402
from aidememo.http.openapi import document  # noqa: E402
from aidememo.http.types import Request  # noqa: E402
from aidememo.stores.sqlite.store import SqliteStore  # noqa: E402
from tests.contract.support import EPOCH, PROJECT, RECEIVER, TENANT, WRITER  # noqa: E402

MAX_EXAMPLES = 20
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def shim_asgi_app(app: HttpApp) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """A minimal ASGI adapter, used only while `origin.asgi` is not available."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
        body = b"".join(chunks)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        too_large = size > MAX_REQUEST_BODY_BYTES
        response = app.dispatch(
            Request(
                scope["method"],
                scope["path"],
                scope.get("query_string", b"").decode("latin-1"),
                headers,
                b"" if too_large else body,
                too_large,
            )
        )
        raw_headers = [(k.encode(), v.encode()) for k, v in response.headers]
        await send(
            {"type": "http.response.start", "status": response.status, "headers": raw_headers}
        )
        await send({"type": "http.response.body", "body": response.body})

    return asgi


def asgi_app(app: HttpApp) -> Any:
    try:
        from origin.asgi import create_asgi_app
    except ImportError:
        return shim_asgi_app(app)
    return create_asgi_app(app)


class LiveServer:
    """uvicorn serving one HttpApp on a loopback port, in a thread."""

    def __init__(self, app: HttpApp) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(
            asgi_app(app), log_level="warning", access_log=False, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Any]]:
    """`(base_url, writer token, keep-alive session)` of a live server on a fresh project."""
    path: Path = tmp_path_factory.mktemp("schemathesis") / "ssot.sqlite"
    store = SqliteStore.open_file(path, synchronous="OFF")  # durability is not tested here
    app = HttpApp(store)
    tokens: dict[str, str] = {}
    for actor, role in ((WRITER, Role.WRITER), (RECEIVER, Role.WRITER)):
        tokens[actor] = secrets.token_hex(32)
        app.services.identity.bootstrap(
            tenant_id=TENANT,
            project_id=PROJECT,
            actor_id=actor,
            role=role,
            project_epoch=EPOCH,
            token_sha256=hashlib.sha256(tokens[actor].encode()).digest(),
        )
    try:
        with LiveServer(app) as server, requests.Session() as session:
            yield server.url, tokens[WRITER], session
    finally:
        store.close()


# Admin imports are JSON Lines: sent as the text they are.
schemathesis.serializer.alias("application/x-ndjson", "text/plain")
schema = schemathesis.openapi.from_dict(document())


@schema.parametrize()  # type: ignore[untyped-decorator]
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_openapi_schemathesis_no_5xx_and_every_answer_in_the_schema(
    case: Any, live: tuple[str, str, Any]
) -> None:
    base_url, token, session = live
    if is_valid_id(case.path_parameters.get("project_id") if case.path_parameters else None):
        case.path_parameters["project_id"] = PROJECT
    if isinstance(case.body, dict) and is_valid_id(case.body.get("project_id")):
        case.body["project_id"] = PROJECT
    case.call_and_validate(
        base_url=base_url,
        session=session,
        headers={"Authorization": f"Bearer {token}"},
        checks=CHECKS,
        timeout=30,
    )
