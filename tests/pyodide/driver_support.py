"""Runs inside Pyodide (edge_runner.mjs puts it in /harness): what the edge drivers share.

A step is an async function whose return value is its detail; `run_steps` records each as
`{"name", "ok", "detail"}` and goes on after a failure (a `StepFailed` keeps its message, any
other exception its traceback). `call` sends one request through `Default.fetch` the way a
client with a body of known size does, the body as bytes (a `Uint8Array`).
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import edge_harness
from js import Headers, Request
from pyodide.ffi import to_js

BASE = "https://aidememo.test"

Step = Callable[[], Awaitable[Any]]


class StepFailed(AssertionError):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)


async def record(steps: list[dict[str, Any]], name: str, fn: Step) -> None:
    """Run one step and append its record."""
    try:
        steps.append({"name": name, "ok": True, "detail": await fn()})
    except Exception as exc:
        text = str(exc) if isinstance(exc, StepFailed) else traceback.format_exc()
        steps.append({"name": name, "ok": False, "detail": text})


async def run_steps(named: list[tuple[str, Step]]) -> list[dict[str, Any]]:
    """Every step in order, each recorded."""
    steps: list[dict[str, Any]] = []
    for name, fn in named:
        await record(steps, name, fn)
    return steps


async def call(
    method: str,
    path: str,
    *,
    token: str,
    json_body: Any = None,
    raw: bytes | None = None,
    content_type: str = "application/octet-stream",
) -> tuple[int, dict[str, str], bytes]:
    """One request with the bearer `token`; a JSON body, or `raw` bytes of `content_type`."""
    sent = Headers.new()
    sent.set("authorization", f"Bearer {token}")
    init: dict[str, Any] = {"method": method, "headers": sent}
    if json_body is not None:
        raw = json.dumps(json_body).encode()
        sent.set("content-type", "application/json")
    elif raw is not None:
        sent.set("content-type", content_type)
    if raw is not None:
        sent.set("content-length", str(len(raw)))
        init["body"] = to_js(raw)
    resp = await edge_harness.fetch(Request.new(BASE + path, **init))
    data = bytes((await resp.arrayBuffer()).to_bytes())
    return int(resp.status), dict(resp.headers.entries()), data
