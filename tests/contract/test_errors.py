"""Errors: one shape and one status per code (ERR-1); `conformance_violation` belongs to the
conformance suite and never reaches HTTP (ERR-3)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from aidememo.conformance.harness import ConformanceViolation, expect
from aidememo.domain.clock import FixedClock
from aidememo.domain.errors import HTTP_STATUS, ErrorCode
from aidememo.domain.model import Role
from aidememo.http.app import HttpApp
from tests.contract.support import EPOCH, PROJECT, READER, START_MS, WRITER, Api, InProcessClient, P
from tests.contract.test_storage_failure import FlakyStore

ROOT = Path(__file__).resolve().parents[2]


def _note(command_id: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "command_id": command_id,
        "project_id": PROJECT,
        "expected_revision": None,
        "operation": "resource.put",
        "resource": {"kind": "custom.note", "id": "n"},
        "change": "upsert",
        "payload": {"v": 1},
    }
    body.update(overrides)
    return body


def test_err1_every_error_code_has_one_http_status() -> None:
    assert set(HTTP_STATUS) == set(ErrorCode)
    assert all(400 <= status <= 599 for status in HTTP_STATUS.values())
    assert all(re.fullmatch(r"[a-z]+(_[a-z0-9]+)*", code.value) for code in ErrorCode)


def test_err1_every_error_answer_is_code_and_message_with_the_codes_status(api: Api) -> None:
    api.put_note("n", {"v": 1}).expect(200)
    replies = [
        api.call("GET", "/v1/nowhere", as_=WRITER),
        api.call("DELETE", "/v1/commands", as_=WRITER),
        api.get(f"{P}/identity", None),
        api.get("/v1/projects/bad%20id/identity"),
        api.post("/v1/commands", _note("cmd_x", operation="fact.add")),
        api.post("/v1/commands", _note("cmd_y"), READER),
        api.post("/v1/commands", _note("cmd_z", expected_revision=7)),
        api.post("/v1/commands", _note("cmd_put_n", payload={"v": 2})),
        api.get(f"{P}/resources/custom.note/missing"),
        api.get(f"{P}/changes", query={"project_epoch": "epoch_other", "after_seq": 0}),
        api.get(f"{P}/changes", query={"project_epoch": EPOCH, "after_seq": 9}),
        api.get(f"{P}/changes", query={"project_epoch": EPOCH, "after_seq": 0, "limit": 0}),
    ]
    codes = []
    for reply in replies:
        assert isinstance(reply.body, dict) and set(reply.body) == {"error"}, reply.body
        error = reply.body["error"]
        assert set(error) == {"code", "message"}, error
        assert isinstance(error["message"], str) and error["message"], error
        code = ErrorCode(error["code"])
        assert reply.status == HTTP_STATUS[code], (reply.status, code)
        codes.append(code)
    assert len(set(codes)) == len(replies), codes  # one request per code


def test_err3_a_conformance_violation_inside_the_app_is_never_its_answer() -> None:
    store = FlakyStore()
    clock = FixedClock(START_MS)
    app = HttpApp(store, clock=clock)
    api = Api("flaky", InProcessClient(app), app.services.identity, clock)
    api.provision(WRITER, Role.WRITER)
    try:
        expect(False, "the store broke the contract")
    except ConformanceViolation as violation:
        assert violation.code is ErrorCode.CONFORMANCE_VIOLATION
        store.broken = violation
    reply = api.get(f"{P}/identity")
    reply.expect(503, "storage_failure")
    assert "contract" not in reply.body["error"]["message"]


def _route_error_codes(document: Any) -> set[str]:
    """Every code a route of the OpenAPI document lists as one of its answers."""
    codes: set[str] = set()
    for methods in document["paths"].values():
        for operation in methods.values():
            for response in operation.get("responses", {}).values():
                text = json.dumps(response)
                for found in re.findall(r'"code": \{"enum": \[([^\]]*)\]', text):
                    codes.update(json.loads(f"[{found}]"))
    return codes


def test_err3_no_route_answers_conformance_violation_and_only_the_suite_raises_it() -> None:
    document = json.loads((ROOT / "openapi.json").read_text(encoding="utf-8"))
    listed = _route_error_codes(document)
    assert {"storage_failure", "invalid_command"} <= listed  # the walk finds the lists
    assert "conformance_violation" not in listed
    raising = {
        path.relative_to(ROOT).as_posix()
        for package in ("aidememo", "origin", "worker", "durable_objects")
        for path in (ROOT / package).rglob("*.py")
        if re.search(r"CONFORMANCE_VIOLATION|conformance_violation", path.read_text("utf-8"))
    }
    assert {p for p in raising if not p.startswith("aidememo/conformance/")} == {
        "aidememo/domain/errors.py"
    }
