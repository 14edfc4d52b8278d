"""SRCH-*: lexical search over facts, on every backend, with a second tenant present.

Every test here runs beside another tenant that holds the same project id and facts with
every term the tests search for: nothing of it may be found, and its facts may not move a
score (SRCH-4).
"""

from __future__ import annotations

import pytest

from aidememo.domain.model import Role
from tests.contract.support import EPOCH, HERMES, READER, WRITER, Api, P

NEIGHBOUR_TENANT = "tenant_neighbour"
NEIGHBOUR = "neighbour-writer"
NEIGHBOUR_FACTS = (
    "redis redis cluster timeout decision cache fallback",
    "timeout timeout cache zebra cluster deploy deploy",
    "어제 서버 배포가 실패했습니다 운영서버가다운됨 我们的服务器昨天挂了 server outage",
    'look for "NEAR" OR AND not * ^ near near',
    "word0 word1 word2 shared shared shared",
)


@pytest.fixture
def api(api: Api) -> Api:
    """The contract fixture plus the neighbour tenant, its facts written first."""
    api.provision(NEIGHBOUR, Role.WRITER, tenant_id=NEIGHBOUR_TENANT)
    api.session("neighbour_session", source_id="alpha", as_=NEIGHBOUR)
    for n, text in enumerate(NEIGHBOUR_FACTS * 3):
        api.fact(f"neighbour_{n:02d}", "neighbour_session", text, as_=NEIGHBOUR)
    return api


def _neighbour_untouched(api: Api) -> None:
    found = api.get(f"{P}/search", NEIGHBOUR, query={"q": "redis timeout", "limit": 100})
    ids = [r["fact_id"] for r in found.expect(200)["results"]]
    assert ids and all(i.startswith("neighbour_") for i in ids)


def _two_sources(api: Api) -> int:
    api.session("session_alpha", source_id="alpha")
    api.session("session_beta", source_id="beta")
    api.fact("fact-alpha", "session_alpha", "redis cluster timeout decision")
    return int(api.fact("fact-beta", "session_beta", "redis cache fallback")["project_seq"])


def test_srch1_srch3_lexical_search_source_scoped_and_sequence_explicit(api: Api) -> None:
    api.get(f"{P}/search", None, query="q=redis").expect(401, "authentication_failed")
    latest = _two_sources(api)
    alpha = api.get(
        f"{P}/search", query={"q": "redis", "source_id": "alpha", "at_least_seq": latest}
    ).expect(200)
    assert alpha["index_seq"] == latest
    assert alpha["project_epoch"] == EPOCH
    assert (alpha["mode"], alpha["semantic_model"], alpha["exhaustive"]) == ("lexical", None, True)
    assert [r["fact_id"] for r in alpha["results"]] == ["fact-alpha"]
    hit = alpha["results"][0]
    assert set(hit) == {
        *("fact_id", "session_id", "source_id", "actor_id", "content", "score"),
        *("lexical_score", "lexical_rank", "semantic_score", "semantic_rank"),
    }
    assert (hit["session_id"], hit["source_id"], hit["actor_id"], hit["content"]) == (
        "session_alpha",
        "alpha",
        WRITER,
        "redis cluster timeout decision",
    )
    assert isinstance(hit["score"], (int, float))
    both = api.get(f"{P}/search", READER, query="q=redis&mode=lexical").expect(200)
    assert sorted(r["fact_id"] for r in both["results"]) == ["fact-alpha", "fact-beta"]
    api.get(f"{P}/search", query={"q": "redis", "at_least_seq": latest + 1}).expect(
        409, "cursor_out_of_range"
    )
    api.get(f"{P}/search", query={"q": "redis", "at_least_seq": 0}).expect(200)
    _neighbour_untouched(api)


def test_srch3_any_token_matches_and_ranking_is_score_then_fact_id(api: Api) -> None:
    api.session("s", source_id="src")
    api.fact("f3", "s", "timeout timeout timeout in the cluster")
    api.fact("f2", "s", "a cache")
    api.fact("f1", "s", "a cache")
    api.fact("f0", "s", "nothing relevant")
    found = api.get(f"{P}/search", query={"q": "timeout cache zebra"}).expect(200)["results"]
    ids = [r["fact_id"] for r in found]
    assert set(ids) == {"f1", "f2", "f3"}
    scores = [r["score"] for r in found]
    assert scores == sorted(scores, reverse=True)
    # equal scores are ordered by fact_id
    ties = [r["fact_id"] for r in found if r["fact_id"] in ("f1", "f2")]
    assert ties == ["f1", "f2"]
    # no phrase semantics: word order does not matter
    reordered = api.get(f"{P}/search", query={"q": "cluster timeout"}).expect(200)["results"]
    assert [r["fact_id"] for r in reordered] == ["f3"]
    limited = api.get(f"{P}/search", query={"q": "timeout cache", "limit": 1}).expect(200)
    assert len(limited["results"]) == 1


def test_srch3_srch4_bm25_prefers_repeated_terms(api: Api) -> None:
    api.session("s", source_id="src")
    api.fact("fact_once", "s", "deploy failed once while the other parts worked fine")
    api.fact("fact_many", "s", "deploy deploy deploy")
    found = api.get(f"{P}/search", query={"q": "deploy"}).expect(200)["results"]
    assert [r["fact_id"] for r in found] == ["fact_many", "fact_once"]
    assert found[0]["score"] > found[1]["score"]


def test_srch2_cjk_words_are_found_inside_longer_text(api: Api) -> None:
    api.session("s", source_id="src")
    api.fact("fact_ko", "s", "어제 서버 배포가 실패했습니다")
    api.fact("fact_ko_joined", "s", "운영서버가다운됨")
    api.fact("fact_zh", "s", "我们的服务器昨天挂了")
    api.fact("fact_en", "s", "server outage")
    ko = api.get(f"{P}/search", query={"q": "서버"}).expect(200)["results"]
    assert sorted(r["fact_id"] for r in ko) == ["fact_ko", "fact_ko_joined"]
    zh = api.get(f"{P}/search", query={"q": "服务"}).expect(200)["results"]
    assert [r["fact_id"] for r in zh] == ["fact_zh"]
    assert zh[0]["content"] == "我们的服务器昨天挂了"
    mixed = api.get(f"{P}/search", query={"q": "SERVER 服务"}).expect(200)["results"]
    assert sorted(r["fact_id"] for r in mixed) == ["fact_en", "fact_zh"]
    single = api.get(f"{P}/search", query={"q": "挂"}).expect(200)
    assert single["results"] == [] or {r["fact_id"] for r in single["results"]} <= {"fact_zh"}


def test_srch2_query_syntax_is_plain_text(api: Api) -> None:
    api.session("s", source_id="src")
    api.fact("f_op", "s", 'look for "NEAR" OR AND not * ^')
    for q in (
        '"',
        '""',
        "NEAR(",
        "a OR",
        "* ^ -",
        "AND",
        "col:value",
        "'; DROP TABLE x; --",
        "!!!",
    ):
        reply = api.get(f"{P}/search", query={"q": q}).expect(200)
        assert isinstance(reply["results"], list)
    found = api.get(f"{P}/search", query={"q": "near"}).expect(200)["results"]
    assert [r["fact_id"] for r in found] == ["f_op"]
    api.get(f"{P}/search", query={"q": "x" * 4096}).expect(200)
    api.get(f"{P}/search", query={"q": "가" * 1366}).expect(400, "invalid_command")


def test_srch1_index_is_the_head_after_every_write(api: Api) -> None:
    api.session("s", source_id="src")
    for i in range(3):
        receipt = api.fact(f"fact_{i}", "s", f"word{i} shared", as_=HERMES)
        found = api.get(
            f"{P}/search", query={"q": f"word{i}", "at_least_seq": receipt["project_seq"]}
        ).expect(200)
        assert found["index_seq"] == receipt["project_seq"]
        assert [r["fact_id"] for r in found["results"]] == [f"fact_{i}"]
    # non-fact writes move the head, and the index with it
    api.put_note("note_after", {"a": 1}).expect(200)
    head = api.head()
    assert api.get(f"{P}/search", query={"q": "shared"}).expect(200)["index_seq"] == head
    assert len(api.get(f"{P}/search", query={"q": "shared"}).expect(200)["results"]) == 3
