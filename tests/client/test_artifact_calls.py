"""`Client.artifacts` and its twin `AsyncClient.artifacts` on every contract backend
(ART-2..ART-6, CLIENT-3): one plan (`aidememo.client.artifact_plans`) behind both."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Callable

import pytest

from aidememo.client import AidememoClientError, AsyncClient, Client
from tests.client.transports import Faulty, async_transport_for
from tests.contract.support import PROJECT, READER, WRITER, Api

Connect = Callable[..., tuple[Client, Faulty]]
PATH = "sessions/s1/artifacts/out.bin"


def test_art4_art6_client_put_get_replace_and_abort(api: Api, connect: Connect) -> None:
    writer, _ = connect(WRITER)
    reader, _ = connect(READER)
    data = os.urandom(150_000)
    first = writer.artifacts.put(PATH, data, content_type="text/plain")
    assert first["revision"] == 1 and first["size_bytes"] == len(data)
    assert reader.artifacts.get(PATH) == data
    second = writer.artifacts.put(PATH, io.BytesIO(b"from a file"))
    assert (second["artifact_id"], second["revision"]) == (first["artifact_id"], 2)
    assert reader.artifacts.get(PATH) == b"from a file"
    assert reader.artifacts.get(PATH, revision=1) == data
    assert reader.artifacts.resolve(PATH)["revision"] == 2
    with pytest.raises(AidememoClientError) as denied:
        reader.artifacts.put(PATH, b"x")
    assert denied.value.code == "project_unauthorized"
    with pytest.raises(AidememoClientError) as kept:
        writer.artifacts.put(PATH, b"x", replace=False)
    assert kept.value.code == "artifact_conflict"


def test_art4_art6_client3_async_client_artifacts_are_the_twin(api: Api) -> None:
    async def run() -> None:
        def client(actor: str) -> AsyncClient:
            base_url, transport = async_transport_for(api.client)
            return AsyncClient(base_url, api.tokens[actor], PROJECT, transport=transport)

        async with client(WRITER) as writer, client(READER) as reader:
            data = os.urandom(150_000)
            first = await writer.artifacts.put(PATH, data, content_type="text/plain")
            assert first["revision"] == 1
            assert await reader.artifacts.get(PATH) == data
            meta = await reader.artifacts.resolve(PATH)
            assert meta["sha256"] == first["sha256"]
            second = await writer.artifacts.put(PATH, io.BytesIO(b"async file"))
            assert second["revision"] == 2
            assert await reader.artifacts.get(PATH) == b"async file"
            chunks = [c async for c in reader.artifacts.download(first["artifact_id"], 1)]
            assert b"".join(chunks) == data
            with pytest.raises(AidememoClientError) as refused:
                await reader.artifacts.get("sessions/s1/artifacts/missing.bin")
            assert refused.value.code == "artifact_not_found"
            with pytest.raises(AidememoClientError) as kept:
                await writer.artifacts.put(PATH, b"x", replace=False)
            assert kept.value.code == "artifact_conflict"

    asyncio.run(run())


def test_art5_async_abort_of_a_reservation(api: Api) -> None:
    body = {"command_id": "cmd_abort_async", "payload": {"path": PATH, "size_bytes": 1}}
    r = api.post(f"/v1/projects/{PROJECT}/artifact-reservations", body).expect(200)

    async def run() -> dict[str, object]:
        base_url, transport = async_transport_for(api.client)
        async with AsyncClient(base_url, api.tokens[WRITER], PROJECT, transport=transport) as c:
            return await c.artifacts.abort(r["reservation_id"])

    assert asyncio.run(run())["reservation_id"] == r["reservation_id"]
