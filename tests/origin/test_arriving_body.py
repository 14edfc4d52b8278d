"""A body the core reads while the loop receives it (SPEC.md HTTP-9, `ArrivingBody` of
`origin.exchange`): the chunks in order, reading paused while more than `HIGH_WATER` bytes wait
for the reader and resumed once it caught up, `100 Continue` asked for at the first read, and
a client that goes away failing the read instead of ending it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from aidememo.domain.errors import AidememoError
from origin.exchange import HIGH_WATER, ArrivingBody

WAIT_S = 10.0  # a bound on waiting for what must happen, never a measured expectation


class Reading:
    """The connection's side: whether it reads, and what the body asked of it."""

    def __init__(self) -> None:
        self.reading = True
        self.pauses = 0
        self.resumed = asyncio.Event()
        self.continued = 0

    def pause(self) -> None:
        self.reading = False
        self.pauses += 1

    def resume(self) -> None:
        self.reading = True
        self.resumed.set()

    def first_read(self) -> None:
        self.continued += 1


def test_http9_an_arriving_body_pauses_reading_past_high_water_and_resumes_when_drained() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        side = Reading()
        chunk = b"x" * (HIGH_WATER // 4)
        body = ArrivingBody(None, loop, side.pause, side.resume, side.first_read)
        for _ in range(6):  # 1.5 x HIGH_WATER before anyone reads
            body.put(chunk)
        assert not side.reading and side.pauses >= 1
        body.end()
        read = await asyncio.wait_for(loop.run_in_executor(None, body.read), WAIT_S)
        await asyncio.wait_for(side.resumed.wait(), WAIT_S)
        assert read == chunk * 6 and side.reading and side.continued == 1
        assert body.complete and not body.aborted

    asyncio.run(main())


def test_http9_an_arriving_body_whose_client_went_away_fails_the_read() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        side = Reading()
        body = ArrivingBody(10, loop, side.pause, side.resume, None)
        body.put(b"half")
        started = threading.Event()

        def read() -> bytes:
            started.set()
            return body.read()

        reader = loop.run_in_executor(None, read)
        await loop.run_in_executor(None, started.wait, WAIT_S)
        body.gone()
        with pytest.raises(AidememoError):
            await asyncio.wait_for(reader, WAIT_S)
        assert body.aborted and not body.complete and side.continued == 0

    asyncio.run(main())
