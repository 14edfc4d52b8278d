"""SEM-1, SEM-3: the search modes on every backend of the contract suite, none of which has an
embedding provider here (the edge's runtime double binds no Workers AI or Vectorize in this
suite): `auto` answers lexically and says why, `semantic` and `hybrid` are refused with a
structured error, and an unknown mode is a bad request. The modes with a provider are in
tests/contract/test_search_semantic.py (origin and edge, one contract),
tests/conformance/test_semantic_index.py and tests/origin/test_semantic_serve.py."""

from __future__ import annotations

from tests.contract.support import Api, P


def _fact(api: Api) -> int:
    api.session("s", source_id="src")
    return int(api.fact("f1", "s", "redis cluster timeout decision")["project_seq"])


def test_sem1_sem3_auto_without_a_provider_answers_lexically_and_says_why(api: Api) -> None:
    seq = _fact(api)
    for query in ({"q": "redis"}, {"q": "redis", "mode": "auto"}):
        found = api.get(f"{P}/search", query=query).expect(200)
        assert found["mode"] == "lexical" and found["index_seq"] == seq
        assert (found["semantic_model"], found["semantic_lag"]) == (None, None)
        assert found["fallback_reason"] == "semantic_unavailable"
        hit = found["results"][0]
        assert (hit["lexical_rank"], hit["semantic_rank"], hit["semantic_score"]) == (1, None, None)
        assert hit["lexical_score"] == hit["score"]
    lexical = api.get(f"{P}/search", query={"q": "redis", "mode": "lexical"}).expect(200)
    assert lexical["fallback_reason"] is None


def test_sem3_semantic_and_hybrid_without_a_provider_are_refused(api: Api) -> None:
    _fact(api)
    for mode in ("semantic", "hybrid"):
        api.get(f"{P}/search", query={"q": "redis", "mode": mode}).expect(
            422, "semantic_unavailable"
        )
    api.get(f"{P}/search", query={"q": "redis", "mode": "vector"}).expect(400, "invalid_command")


def test_sem1_mcp_search_takes_a_mode_and_answers_what_ran(api: Api) -> None:
    from tests.contract.test_mcp import call, ok

    _fact(api)
    found = ok(api, "search", {"q": "redis", "mode": "lexical"})
    assert (found["mode"], found["results"][0]["lexical_rank"]) == ("lexical", 1)
    auto = ok(api, "search", {"q": "redis"})
    assert auto["fallback_reason"] == "semantic_unavailable"
    refused = call(api, "search", {"q": "redis", "mode": "semantic"})
    assert refused["isError"] is True
    assert refused["structuredContent"]["error"]["code"] == "semantic_unavailable"
