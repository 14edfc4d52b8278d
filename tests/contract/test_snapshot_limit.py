"""SNAP-2: a snapshot of more resources than the limit is refused, on every backend."""

from __future__ import annotations

import pytest

from aidememo.domain import limits
from aidememo.service import queries
from tests.contract.support import PROJECT, READER, Api, P


def test_snap2_more_resources_than_the_limit_is_413_snapshot_too_large(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert limits.SNAPSHOT_MAX_RESOURCES == 10_000
    # The real limit needs 10,001 writes per backend; the same check at a limit of 3 does not.
    monkeypatch.setattr(queries, "SNAPSHOT_MAX_RESOURCES", 3)
    for i in range(3):
        api.put_note(f"n{i}", {"v": i}).expect(200)
    assert len(api.get(f"{P}/snapshot", READER).expect(200)["resources"]) == 3
    api.put_note("n3", {"v": 3}).expect(200)
    reply = api.get(f"{P}/snapshot", READER)
    reply.expect(413, "snapshot_too_large")
    # A tombstone is a resource of the snapshot too: deleting one does not get under the limit.
    delete = {
        "command_id": "cmd_delete_n3",
        "project_id": PROJECT,
        "expected_revision": 1,
        "operation": "resource.delete",
        "resource": {"kind": "custom.note", "id": "n3"},
        "change": "delete",
        "payload": None,
    }
    api.post("/v1/commands", delete).expect(200)
    api.get(f"{P}/snapshot", READER).expect(413, "snapshot_too_large")
    monkeypatch.setattr(queries, "SNAPSHOT_MAX_RESOURCES", 4)
    snapshot = api.get(f"{P}/snapshot", READER).expect(200)
    assert len(snapshot["resources"]) == 4 and snapshot["at_seq"] == 5
