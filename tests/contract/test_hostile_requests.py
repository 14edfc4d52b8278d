"""The table of hostile requests (tests/hostile_table.py) on every contract backend.

One test per rule group of the table. Each row must get its status and error code (and the
words its message must hold, never the secret it refused); after each row the project's head
has not moved and the backend answers a normal request. Rows sent with the admin token are
skipped on a backend that reports none. The Pyodide tier runs the same table through the real
Workers SDK (tests/pyodide/edge_driver.py).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.contract.support import EPOCH, OUTSIDER, PROJECT, READER, RECEIVER, WRITER, Api, P
from tests.hostile_table import Hostile, groups, rows

ACTORS = {"writer": WRITER, "reader": READER, "outsider": OUTSIDER}
NAMES = {"project": PROJECT, "epoch": EPOCH, "receiver": RECEIVER, "session": "s_hostile"}


def _token(api: Api, actor: str | None) -> str | None:
    if actor is None:
        return None
    if actor == "admin":
        return api.admin_token
    return api.tokens[ACTORS[actor]]


def run_rows(api: Api, rules: str) -> None:
    """Send every row of one group; check its answer, an unmoved head and a normal answer."""
    api.session(NAMES["session"])
    head = api.head()
    for row in rows(rules):
        if row.actor == "admin" and api.admin_token is None:
            continue
        check_row(api, row)
        assert api.head() == head, f"{row.id} wrote something"
        api.get(f"{P}/identity").expect(200)


def check_row(api: Api, row: Hostile) -> None:
    path, query, headers, body = row.render(NAMES)
    reply = api.call(
        row.method,
        path,
        token=_token(api, row.actor),
        query=query or None,
        headers=headers,
        body=body if row.body is not None else None,
    )
    got = (reply.status, reply.code or "")
    assert got == (row.status, row.code), f"{row.id}: {reply.status} {str(reply.body)[:300]}"
    if row.status == 200:
        return
    message = reply.body["error"]["message"]
    for words in row.says:
        assert words in message, f"{row.id}: {words!r} not in {message!r}"
    assert "codec" not in message and "Traceback" not in message, f"{row.id}: {message}"
    if row.hides:
        assert row.hides not in json.dumps(reply.body), f"{row.id} echoes what it refused"


def test_http1_route_method_size_and_media_type_before_authentication(api: Api) -> None:
    run_rows(api, "HTTP-1")


def test_auth2_missing_malformed_or_unknown_bearer_is_401_first(api: Api) -> None:
    run_rows(api, "AUTH-2")


def test_cj3_malformed_json_is_400_before_authorization(api: Api) -> None:
    run_rows(api, "CJ-3")


def test_cj3_cj4_hostile_bodies_are_400_naming_why(api: Api) -> None:
    run_rows(api, "CJ-3 CJ-4")


def test_cj4_http3_hostile_query_strings_name_the_parameter_and_bounds(api: Api) -> None:
    run_rows(api, "CJ-4 HTTP-3")


def test_http7_non_utf8_charset_is_415_before_authentication(api: Api) -> None:
    run_rows(api, "HTTP-7")


def test_cmd2_identity_unknown_fields_and_session_shape_are_400(api: Api) -> None:
    run_rows(api, "CMD-2")


def test_cmd1_cmd4_id2_raw_command_shape_violations_are_400(api: Api) -> None:
    run_rows(api, "CMD-1 CMD-4 ID-2")


def test_id1_malformed_identifier_in_path_is_400_invalid_identifier(api: Api) -> None:
    run_rows(api, "ID-1")


def test_id3_text_over_its_utf8_byte_limit_is_400(api: Api) -> None:
    run_rows(api, "ID-3")


def test_feed5_change_limit_out_of_range_is_invalid_change_batch(api: Api) -> None:
    run_rows(api, "FEED-5")


def test_http3_unknown_repeated_missing_and_malformed_parameters_are_400(api: Api) -> None:
    run_rows(api, "HTTP-3")


def test_mbx1_actor_id_or_tenant_id_in_query_is_400(api: Api) -> None:
    run_rows(api, "MBX-1")


def test_http2_odd_requests_get_a_pinned_answer_never_a_5xx(api: Api) -> None:
    run_rows(api, "HTTP-2")


def test_auth3_auth4_non_members_and_readers_are_403(api: Api) -> None:
    run_rows(api, "AUTH-3")
    run_rows(api, "AUTH-4")


def test_sec1_sec3_a_secret_in_any_screened_field_is_422_and_nothing_is_written(
    api: Api,
) -> None:
    run_rows(api, "SEC-1 SEC-3")


def test_sec3_membership_comes_first_a_readers_secret_is_403(api: Api) -> None:
    run_rows(api, "SEC-3")


def _run_rows_calls() -> set[str]:
    tree = ast.parse(Path(__file__).read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "run_rows":
            arg = node.args[1]
            assert isinstance(arg, ast.Constant)
            found.add(str(arg.value))
    return found


@pytest.mark.parametrize("rules", groups())
def test_suite1_every_group_of_the_table_is_run_here(rules: str) -> None:
    assert rules in _run_rows_calls(), f"no test runs the hostile rows of {rules}"


def test_art13_unwritable_paths_and_unknown_reservations(api: Api) -> None:
    run_rows(api, "ART-13")


def test_id5_a_topics_nul_is_refused_before_anything_is_written(api: Api) -> None:
    run_rows(api, "ID-5")


def test_srch7_a_wide_search_is_answered(api: Api) -> None:
    run_rows(api, "SRCH-7")
