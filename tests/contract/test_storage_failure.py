"""HTTP-2 / ERR-2: a storage failure or an unexpected bug is a 503 with Retry-After and the
fixed message, never a 500 and never the internals; the request checks still come first."""

from __future__ import annotations

from typing import Any

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.model import Role
from aidememo.http.app import HttpApp
from aidememo.stores.in_memory import InMemoryStore
from tests.contract.support import START_MS, WRITER, Api, InProcessClient, P


class FlakyStore(InMemoryStore):
    """A memory store whose reads and writes fail once `broken` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.broken: Exception | None = None

    def transaction(self, fn: Any) -> Any:
        if self.broken is not None:
            raise self.broken
        return super().transaction(fn)

    def read(self, fn: Any) -> Any:
        if self.broken is not None:
            raise self.broken
        return super().read(fn)


@pytest.mark.parametrize(
    "error",
    [fail(ErrorCode.STORAGE_FAILURE, "disk I/O error at /secret/path"), RuntimeError("a bug")],
    ids=["storage_failure", "unexpected"],
)
def test_http2_err2_storage_failure_is_503_with_retry_after(error: Exception) -> None:
    store = FlakyStore()
    clock = FixedClock(START_MS)
    app = HttpApp(store, clock=clock)
    api = Api("flaky", InProcessClient(app), app.services.identity, clock)
    api.provision(WRITER, Role.WRITER)
    store.broken = error
    reply = api.get(f"{P}/identity")
    reply.expect(503, "storage_failure")
    assert reply.headers["retry-after"] == "1"
    assert reply.body["error"]["message"] == "canonical storage temporarily unavailable"
    assert "secret" not in str(reply.body)
    # the checks before the store still answer first
    api.get(f"{P}/identity", None).expect(401, "authentication_failed")
    api.call("GET", "/nope").expect(404, "route_not_found")


def _flaky_api() -> tuple[FlakyStore, Api]:
    store = FlakyStore()
    clock = FixedClock(START_MS)
    app = HttpApp(store, clock=clock)
    api = Api("flaky", InProcessClient(app), app.services.identity, clock)
    api.provision(WRITER, Role.WRITER)
    return store, api


def _note(n: int) -> dict[str, object]:
    return {
        "command_id": f"cmd-{n}",
        "project_id": "project_http",
        "operation": "resource.put",
        "resource": {"kind": "custom.note", "id": f"note-{n}"},
        "change": "upsert",
        "payload": {"n": n},
    }


def test_err4_ready1_ready2_storage_full_is_507_without_retry_after() -> None:
    store, api = _flaky_api()
    api.post("/v1/commands", _note(1)).expect(200)
    assert api.get("/ready", None).expect(200)["state"] == "ok"
    store.broken = fail(ErrorCode.STORAGE_FULL, "sqlite commit failed: disk full at /secret")
    reply = api.post("/v1/commands", _note(2))
    reply.expect(507, "storage_full")
    assert "retry-after" not in reply.headers
    assert "secret" not in str(reply.body)
    ready = api.get("/ready", None)
    assert (ready.status, ready.body) == (
        503,
        {"ready": False, "mode": "single_node", "state": "full"},
    )
    assert "retry-after" not in ready.headers
    health = api.get("/health", None).expect(200)  # liveness: the process still serves
    assert health["state"] == "full"
    store.broken = None
    api.post("/v1/commands", _note(2)).expect(200)  # a write that commits: ready again
    assert api.get("/ready", None).expect(200)["state"] == "ok"


def test_err2_ready1_transient_storage_failure_is_unavailable_and_keeps_retry_after() -> None:
    store, api = _flaky_api()
    store.broken = fail(ErrorCode.STORAGE_FAILURE, "connection refused")
    reply = api.post("/v1/commands", _note(1))
    reply.expect(503, "storage_failure")
    assert reply.headers["retry-after"] == "1"
    assert api.get("/ready", None).status == 503
    assert api.get("/health", None).expect(200)["state"] == "unavailable"
    store.broken = None
    api.post("/v1/commands", _note(1)).expect(200)
    assert api.get("/ready", None).expect(200) == {
        "ready": True,
        "mode": "single_node",
        "state": "ok",
    }
