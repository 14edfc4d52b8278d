"""`aidememo.client` uses grants when the server offers them (SPEC.md GRANT-8): against an
origin with S3 bodies on SeaweedFS and the edge double with R2 grants, `Client.artifacts.put`
PUTs straight to the store with the grant's headers and downloads read download grants; the
service never carries the body, and a server without grants is served directly."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from aidememo.client import Client
from aidememo.client.errors import AidememoClientError
from aidememo.client.transport import Answer, Request, Timeouts, Transport
from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from origin.s3_bodies import S3Bodies
from tests.client.transports import Faulty, _body, _read, transport_for
from tests.contract.support import LEASE_MS, PROJECT, READER, START_MS, WRITER, Api
from tests.edge.backend import EdgeIdentity, project_store
from tests.edge.runtime import EdgeClient, Runtime
from tests.edge.test_edge_grants import r2_vars
from tests.s3 import S3Endpoint, s3_endpoint
from tests.s3bodies.test_upload_grants import _api, _bodies

PATH = "sessions/s1/artifacts/client.bin"


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


@pytest.fixture(params=["origin_s3", "edge_grants"])
def api(request: pytest.FixtureRequest, tmp_path: Path, s3: S3Endpoint) -> Iterator[Api]:
    if request.param == "origin_s3":
        bodies: S3Bodies = _bodies(s3)
        yield from _api(tmp_path, bodies)
        return
    clock = FixedClock(START_MS)
    variables = {"HANDOFF_LEASE_MS": str(LEASE_MS), **r2_vars(s3)}
    runtime = Runtime(tmp_path / "edge", clock, vars=variables)
    api = Api("edge-grants", EdgeClient(runtime), EdgeIdentity(runtime), clock,  # type: ignore[arg-type]
              store=lambda: project_store(runtime))  # fmt: skip
    api.provision(WRITER, Role.WRITER)
    api.provision(READER, Role.READER)
    try:
        yield api
    finally:
        runtime.close()


def _client(api: Api, actor: str) -> tuple[Client, Faulty]:
    base_url, inner = transport_for(api.client)
    transport = Faulty(inner)
    return Client(base_url, api.tokens[actor], PROJECT, transport=transport), transport


class _Recording:
    """The service transport, remembering the request paths and body sizes it carried."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.sent: list[tuple[str, int]] = []

    def exchange(self, request: Request, *, stream: bool = False) -> Answer:
        request = _read(request)
        self.sent.append((urlsplit(request.url).path, len(_body(request))))
        return self.inner.exchange(request, stream=stream)

    def close(self) -> None:
        self.inner.close()


def test_grant8_client_puts_and_gets_through_grants(api: Api) -> None:
    base_url, inner = transport_for(api.client)
    recording = _Recording(inner)
    writer = Client(base_url, api.tokens[WRITER], PROJECT, transport=recording)
    data = os.urandom(200_000)
    ref = writer.artifacts.put(PATH, io.BytesIO(data), content_type="application/x-test")
    assert ref["revision"] == 1 and ref["size_bytes"] == len(data)
    paths = [p for p, _ in recording.sent]
    assert any(p.endswith("/upload-grants") for p in paths)
    assert not any(p.endswith("/body") for p in paths)
    assert max(n for _, n in recording.sent) < 10_000  # the body never went through the service
    reader = Client(base_url, api.tokens[READER], PROJECT, transport=recording)
    recording.sent.clear()
    assert reader.artifacts.get(PATH) == data
    assert any(p.endswith("/download-grants") for p, _ in recording.sent)
    assert not any(p.endswith("/downloads") for p, _ in recording.sent)
    again = writer.artifacts.put(PATH, b"second body")  # a replacement, through a grant too
    assert again["revision"] == 2
    assert reader.artifacts.get(PATH) == b"second body"
    assert b"".join(reader.artifacts.download(ref["artifact_id"], 1)) == data
    with pytest.raises(AidememoClientError) as refused:
        b"".join(reader.artifacts.download(ref["artifact_id"], 3))
    assert refused.value.code == "artifact_not_found"
    for c in (writer, reader):
        c.close()


def test_grant8_client_resends_a_lost_grant_put(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first PUT reaches the store but its answer is lost; the resend is 412 and the body
    # the first one stored is published.
    from aidememo.client.connection import KeepAliveTransport
    from aidememo.client.transport import unreachable

    real = KeepAliveTransport.exchange
    calls = {"n": 0}

    def lossy(self: KeepAliveTransport, request: Request, *, stream: bool = False) -> Answer:
        answer = real(self, request, stream=stream)
        if request.method == "PUT":  # the grant PUTs go to the store on their own transport
            calls["n"] += 1
            if calls["n"] == 1:
                raise unreachable("ReadTimeout", "the answer was lost")
        return answer

    monkeypatch.setattr(KeepAliveTransport, "exchange", lossy)
    writer, _ = _client(api, WRITER)
    ref = writer.artifacts.put(PATH, b"sent twice")
    assert calls["n"] == 2 and ref["size_bytes"] == len(b"sent twice")
    monkeypatch.undo()
    assert writer.artifacts.get(PATH) == b"sent twice"
    writer.close()


def test_grant8_async_transfers_move_the_same_bytes(api: Api) -> None:
    import asyncio
    import hashlib

    from aidememo.client.async_artifacts import _download, _upload
    from tests.contract.support import P

    data = os.urandom(70_000)
    payload = {"path": PATH, "size_bytes": len(data), "content_type": "text/plain",
               "sha256": hashlib.sha256(data).hexdigest()}  # fmt: skip
    r = api.post(f"{P}/artifact-reservations", {"command_id": "as1", "payload": payload})
    rid = r.expect(200)["reservation_id"]
    g = api.call("POST", f"{P}/artifact-reservations/{rid}/upload-grants", as_=WRITER).expect(200)
    timeout = Timeouts(30.0, 30.0)
    asyncio.run(_upload(g, io.BytesIO(data), len(data), 1, timeout))
    ref = api.post(f"{P}/artifact-reservations/{rid}/publish", {"command_id": "as1.p"}).expect(200)
    dg = api.call("POST", f"{P}/artifacts/{ref['artifact_id']}/download-grants", as_=READER,
                  json={"revision": 1}).expect(200)  # fmt: skip

    async def read() -> bytes:
        return b"".join([c async for c in _download(dg, timeout)])

    assert asyncio.run(read()) == data
    with pytest.raises(AidememoClientError) as refused:  # a replayed grant PUT is refused
        asyncio.run(_upload(g, data, len(data), 0, timeout))
    assert refused.value.status == 412
