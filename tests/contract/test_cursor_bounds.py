"""Cursors at every size the query parser accepts (HTTP-13), on every backend: the Durable
Object backends run on the SQL double that refuses what workerd's `sql.exec` refuses
(integers of magnitude 2^53 - 1 or more, which reach it from Pyodide as BigInt), so a cursor
bound as it came would be a 503 there and a 200 at the origin."""

from __future__ import annotations

from typing import Any

import pytest

from aidememo.domain.limits import INT64_MAX, SQL_INT_MAX
from tests.contract.support import EPOCH, RECEIVER, WRITER, Api, P

SESSION = "session_cursors"
# The first integer Pyodide hands over as a BigInt, far past it, and the parser's maximum.
BIG = (SQL_INT_MAX + 1, 2**60, INT64_MAX)


def _seed(api: Api) -> None:
    """seq 1 the session, 2 a fact in it, 3 a handoff to the receiver."""
    api.session(SESSION)
    api.fact("fact_cursor", SESSION, "a fact to page over")
    api.send("h_cursor", SESSION, RECEIVER).expect(200)


def _get(api: Api, route: str, query: dict[str, Any], actor: str = WRITER) -> Any:
    return api.get(f"{P}/{route}", actor, query=query)


@pytest.mark.parametrize("cursor", BIG)
def test_http13_before_seq_beyond_2_53_pages_like_no_cursor(api: Api, cursor: int) -> None:
    _seed(api)
    for route, actor, extra in (
        ("sessions", WRITER, {}),
        ("handoffs", RECEIVER, {"box": "inbox"}),
        ("handoffs", WRITER, {"box": "outbox"}),
    ):
        plain = _get(api, route, extra, actor).expect(200)
        paged = _get(api, route, {**extra, "before_seq": cursor}, actor).expect(200)
        assert paged == plain, route
        assert len(next(iter(plain.values()))) == 1, plain


@pytest.mark.parametrize("cursor", BIG)
def test_http13_after_seq_beyond_2_53_is_an_empty_last_page(api: Api, cursor: int) -> None:
    _seed(api)
    facts = _get(api, f"sessions/{SESSION}/facts", {"after_seq": cursor}).expect(200)
    assert facts == {"facts": [], "next_after_seq": None}
    assert len(_get(api, f"sessions/{SESSION}/facts", {"after_seq": 0}).expect(200)["facts"])
    for route in ("changes", "changes/materialized"):
        # A cursor ahead of the head is the client's error, answered before any SQL.
        answer = _get(api, route, {"project_epoch": EPOCH, "after_seq": cursor})
        answer.expect(409, "cursor_out_of_range")


def test_http13_cursor_beyond_int64_is_a_structured_400(api: Api) -> None:
    _seed(api)
    over = str(INT64_MAX + 1)
    for route, query in (
        ("sessions", {"before_seq": over}),
        ("handoffs", {"box": "outbox", "before_seq": over}),
        (f"sessions/{SESSION}/facts", {"after_seq": over}),
        ("changes", {"project_epoch": EPOCH, "after_seq": over}),
        ("changes/materialized", {"project_epoch": EPOCH, "after_seq": over}),
        ("search", {"q": "fact", "at_least_seq": over}),
    ):
        _get(api, route, query).expect(400, "invalid_command")


@pytest.mark.parametrize("cursor", BIG)
def test_http13_search_at_least_seq_beyond_2_53_answers_as_on_the_origin(
    api: Api, cursor: int
) -> None:
    _seed(api)
    # The index cannot reach a sequence beyond the head: the same answer on every backend.
    answers = {_get(api, "search", {"q": "fact", "at_least_seq": c}).code for c in (4, cursor)}
    assert len(answers) == 1 and None not in answers, answers
