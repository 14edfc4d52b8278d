"""The command pipeline's order and its one write (CMD-5, CMD-6), deletes of nothing (REV-3)
and kind names (ID-2), over HTTP on every backend."""

from __future__ import annotations

import json
from typing import Any

from aidememo.domain.model import MemberStatus, Role
from tests.contract.support import EPOCH, PROJECT, READER, RECEIVER, WRITER, Api, P
from tests.contract.test_admin import export

SESSION = "session_cmd"


def _command(command_id: str, note_id: str = "n", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "command_id": command_id,
        "project_id": PROJECT,
        "expected_revision": None,
        "operation": "resource.put",
        "resource": {"kind": "custom.note", "id": note_id},
        "change": "upsert",
        "payload": {"v": command_id},
    }
    body.update(overrides)
    return body


def _delete(command_id: str, note_id: str = "n", **overrides: Any) -> dict[str, Any]:
    return _command(
        command_id, note_id, operation="resource.delete", change="delete", payload=None, **overrides
    )


def _counts(api: Api) -> dict[str, int]:
    """Rows per type of the tenant's export: what the write transactions left behind."""
    manifest = json.loads(export(api).splitlines()[-1])
    counts: dict[str, int] = manifest["counts"]
    return counts


def test_cmd5_membership_is_checked_before_the_receipt(api: Api) -> None:
    receipt = api.post("/v1/commands", _command("cmd_a")).expect(200)
    api.set_status(WRITER, MemberStatus.SUSPENDED)
    api.post("/v1/commands", _command("cmd_a")).expect(403, "project_unauthorized")
    api.set_status(WRITER, MemberStatus.ACTIVE)
    api.set_role(WRITER, Role.READER)
    api.post("/v1/commands", _command("cmd_a")).expect(403, "project_unauthorized")
    api.set_role(WRITER, Role.WRITER)
    assert api.post("/v1/commands", _command("cmd_a")).expect(200) == receipt
    assert api.head() == 1


def test_cmd5_the_receipt_is_checked_before_the_operations_own_checks(api: Api) -> None:
    first = api.post("/v1/commands", _command("cmd_a")).expect(200)
    second = api.post("/v1/commands", _command("cmd_b", expected_revision=1)).expect(200)
    gone = api.post("/v1/commands", _delete("cmd_c", expected_revision=2)).expect(200)
    # Each replay would now fail its own checks (stale revision, a deleted resource), but the
    # stored receipt answers first, unchanged.
    assert api.post("/v1/commands", _command("cmd_b", expected_revision=1)).expect(200) == second
    assert api.post("/v1/commands", _delete("cmd_c", expected_revision=2)).expect(200) == gone
    assert api.post("/v1/commands", _command("cmd_a")).expect(200) == first
    # The same id with another intent is a conflict, before the revision is looked at.
    other = _command("cmd_b", expected_revision=3)
    api.post("/v1/commands", other).expect(409, "command_conflict")
    # A new command with the same stale expectation meets the operation's check.
    api.post("/v1/commands", _command("cmd_d", expected_revision=1)).expect(409, "stale_revision")
    assert api.head() == 3


def test_cmd6_one_write_leaves_resource_change_audit_receipt_and_index_rows(api: Api) -> None:
    before = _counts(api)
    api.session(SESSION, source_id="src")
    receipt = api.fact("fact_cmd", SESSION, "unique zebra words")
    seq = receipt["project_seq"]
    assert seq == api.head() == 2
    body = {"fact_id": "fact_cmd", "session_id": SESSION, "content": "unique zebra words"}
    resource = api.get(f"{P}/resources/fact/fact_cmd", READER).expect(200)
    assert resource["revision"] == 1 and resource["state"]["body"]["content"] == body["content"]
    page = api.get(
        f"{P}/changes/materialized", READER, query={"project_epoch": EPOCH, "after_seq": seq - 1}
    ).expect(200)
    (entry,) = page["entries"]
    assert entry["change"]["seq"] == seq
    assert entry["resource"]["state"] == resource["state"]
    found = api.get(f"{P}/search", READER, query={"q": "zebra", "at_least_seq": seq}).expect(200)
    assert [r["fact_id"] for r in found["results"]] == ["fact_cmd"]
    assert found["index_seq"] == seq
    sent = api.send("handoff_cmd", SESSION, RECEIVER).expect(200)
    inbox = api.get(f"{P}/handoffs", RECEIVER, query="box=inbox").expect(200)
    assert [a["record"]["handoff_id"] for a in inbox["assignments"]] == ["handoff_cmd"]
    assert sent["project_seq"] == api.head() == 3
    after = _counts(api)
    for kind in ("resource", "change", "audit", "receipt"):
        assert after.get(kind, 0) - before.get(kind, 0) == 3, kind
    # A refused command writes none of it.
    api.send("handoff_cmd", SESSION, RECEIVER, as_=READER).expect(403, "project_unauthorized")
    api.post("/v1/commands", _command("cmd_stale", expected_revision=4)).expect(
        404, "resource_not_found"
    )
    assert _counts(api) == after and api.head() == 3


def test_rev3_deleting_a_resource_never_written_is_404(api: Api) -> None:
    api.post("/v1/commands", _delete("cmd_del_nothing")).expect(404, "resource_not_found")
    api.post("/v1/commands", _delete("cmd_del_pinned", expected_revision=1)).expect(
        404, "resource_not_found"
    )
    assert api.head() == 0
    api.get(f"{P}/resources/custom.note/n").expect(404, "resource_not_found")
    api.post("/v1/commands", _command("cmd_put")).expect(200)
    deleted = api.post("/v1/commands", _delete("cmd_del")).expect(200)
    assert (deleted["project_seq"], deleted["revision"]) == (2, 2)


def test_id2_kind_names_are_1_to_96_bytes_of_lower_case_letters_digits_and_dot_dash(
    api: Api,
) -> None:
    longest = "custom." + "k" * 89
    assert len(longest) == 96
    ok = {"kind": longest, "id": "n"}
    api.post("/v1/commands", _command("cmd_long", resource=ok)).expect(200)
    api.get(f"{P}/resources/{longest}/n").expect(200)
    for kind in ("custom.k-_.9", "custom.x"):
        resource = {"kind": kind, "id": "n"}
        api.post("/v1/commands", _command(f"cmd_{len(kind)}", resource=resource)).expect(200)
    for kind in (longest + "k", "custom.Note", "custom.a b", "custom.a/b", "custom.é", ""):
        resource = {"kind": kind, "id": "n"}
        api.post("/v1/commands", _command("cmd_bad", resource=resource)).expect(
            400, "invalid_command"
        )
    for operation in ("Resource.put", "resource put", "r" * 97, ""):
        api.post("/v1/commands", _command("cmd_bad", operation=operation)).expect(
            400, "invalid_command"
        )
    assert api.head() == 3
