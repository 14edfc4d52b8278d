"""CMD-7: a replayed command's answer says so in a header, on every backend."""

from __future__ import annotations

from tests.contract.support import PROJECT, WRITER, Api, P


def _create(api: Api, path: str, body: dict[str, object]) -> tuple[int, dict[str, str], object]:
    return api.client.request("POST", path, token=api.tokens[WRITER], json=body)


def test_cmd7_cmd3_a_replay_carries_the_replayed_header(api: Api) -> None:
    session = {"command_id": "cmd_s_rep", "payload": {"session_id": "s_rep", "topic": "t"}}
    first_status, first_headers, first = _create(api, f"{P}/sessions", session)
    assert first_status == 200
    assert "aidememo-replayed" not in {k.lower() for k in first_headers}
    again_status, again_headers, again = _create(api, f"{P}/sessions", session)
    assert again_status == 200 and again == first
    assert {k.lower(): v for k, v in again_headers.items()}["aidememo-replayed"] == "true"
    fact = {
        "command_id": "cmd_f_rep",
        "payload": {"fact_id": "f_rep", "session_id": "s_rep", "content": "replayed once"},
    }
    _, fresh, _ = _create(api, f"{P}/facts", fact)
    _, replay, _ = _create(api, f"{P}/facts", fact)
    assert "aidememo-replayed" not in {k.lower() for k in fresh}
    assert {k.lower(): v for k, v in replay.items()}["aidememo-replayed"] == "true"
    note = {
        "command_id": "cmd_n_rep",
        "project_id": PROJECT,
        "expected_revision": None,
        "operation": "resource.put",
        "resource": {"kind": "custom.note", "id": "n_rep"},
        "change": "upsert",
        "payload": {"v": 1},
    }
    _, raw_first, _ = _create(api, "/v1/commands", note)
    _, raw_again, _ = _create(api, "/v1/commands", note)
    assert "aidememo-replayed" not in {k.lower() for k in raw_first}
    assert {k.lower(): v for k, v in raw_again.items()}["aidememo-replayed"] == "true"
