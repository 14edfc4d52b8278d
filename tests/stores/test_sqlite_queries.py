"""Reads of the SQLite store: search ranking, CJK terms, mailbox paging, head CAS."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import (
    Actor,
    ActorKind,
    ChangeOp,
    CommandCall,
    CommandStart,
    HandoffIndexRow,
    MailboxQuery,
    Membership,
    MemberStatus,
    Mutation,
    ResourceRef,
    Role,
    Scope,
    SearchDoc,
    SearchHit,
)
from aidememo.domain.tokenize import index_terms, query_terms
from aidememo.ports import Store, WriteTx
from aidememo.stores.in_memory import InMemoryStore
from tests.stores._support import (
    KINDS,
    PROJECT,
    SCOPE,
    TENANT,
    commit_all,
    committer,
    mutation,
    open_store,
    provision,
)

FACTS = {
    "fact_a": "deploy the server on friday",
    "fact_b": "server server server restart",
    "fact_c": "lunch menu for friday",
    "fact_d": "서버 배포 일정은 금요일",
    "fact_e": "服务器部署计划",
}


def _fact_mutations(facts: dict[str, str], source: str = "src_1") -> list[Mutation]:
    return [
        mutation(
            seq,
            fact_id,
            b"{}",
            search=SearchDoc(fact_id, source, index_terms(text)),
        )
        for seq, (fact_id, text) in enumerate(facts.items(), start=1)
    ]


def _hits(store: Store, terms: list[str], source: str | None, limit: int) -> list[SearchHit]:
    return store.read(lambda tx: tx.search(SCOPE, terms, source, limit)).hits


def _search(store: Store, terms: list[str], source: str | None = None) -> list[SearchHit]:
    return _hits(store, terms, source, 10)


@pytest.mark.parametrize("kind", KINDS)
def test_srch3_store_search_ranks_by_bm25_then_fact_id(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:
        commit_all(store, _fact_mutations(FACTS))
        hits = _hits(store, ["server"], None, 10)
        assert [h.fact_id for h in hits] == ["fact_b", "fact_a"]  # more occurrences first
        assert all(h.score > 0 for h in hits) and hits[0].score > hits[1].score
        either = _hits(store, ["friday", "menu"], None, 10)
        assert [h.fact_id for h in either] == ["fact_c", "fact_a"]
        assert _hits(store, ["friday"], None, 1)[0].fact_id in {
            "fact_a",
            "fact_c",
        }
        assert _hits(store, ["absent"], None, 10) == []
        assert _hits(store, [], None, 10) == []


@pytest.mark.parametrize("kind", KINDS)
def test_srch3_store_search_ties_broken_by_fact_id(kind: str, tmp_path: Path) -> None:
    twins = {"fact_z": "alpha beta", "fact_m": "alpha beta", "fact_q": "alpha beta"}
    with open_store(kind, tmp_path) as store:
        commit_all(store, _fact_mutations(twins))
        hits = _hits(store, ["alpha"], None, 10)
        assert [h.fact_id for h in hits] == ["fact_m", "fact_q", "fact_z"]


@pytest.mark.parametrize("kind", KINDS)
def test_srch2_store_search_cjk_bigrams(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:
        commit_all(store, _fact_mutations(FACTS))
        korean = _hits(store, query_terms("배포"), None, 10)
        assert [h.fact_id for h in korean] == ["fact_d"]
        chinese = _hits(store, query_terms("部署"), None, 10)
        assert [h.fact_id for h in chinese] == ["fact_e"]
        inside = _hits(store, query_terms("일정"), None, 10)
        assert [h.fact_id for h in inside] == ["fact_d"]


@pytest.mark.parametrize("kind", KINDS)
def test_srch4_store_search_scores_match_reference_store(kind: str, tmp_path: Path) -> None:
    mutations = _fact_mutations(FACTS)
    reference = InMemoryStore()
    reference.transaction(provision)
    commit_all(reference, mutations)
    with open_store(kind, tmp_path) as store:
        commit_all(store, mutations)
        for terms in (["server"], ["friday", "menu"], query_terms("서버 배포"), ["the", "on"]):
            ours = _search(store, terms)
            theirs = _search(reference, terms)
            assert [h.fact_id for h in ours] == [h.fact_id for h in theirs], terms
            assert [h.score for h in ours] == [h.score for h in theirs], terms  # bit for bit


@pytest.mark.parametrize("kind", KINDS)
def test_srch3_store_search_source_filter_and_reindex(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:
        docs = [
            mutation(1, "fact_1", b"{}", search=SearchDoc("fact_1", "src_a", "shared one")),
            mutation(2, "fact_2", b"{}", search=SearchDoc("fact_2", "src_b", "shared two")),
        ]
        commit_all(store, docs)
        in_a = _hits(store, ["shared"], "src_a", 10)
        assert [h.fact_id for h in in_a] == ["fact_1"]
        # A new revision of fact_1 replaces its entry: old terms gone, no duplicate hit.
        commit_all(
            store,
            [mutation(3, "fact_1", b"{}", revision=2, search=SearchDoc("fact_1", "src_a", "new"))],
        )
        assert _hits(store, ["one"], None, 10) == []
        assert [h.fact_id for h in _hits(store, ["new"], None, 10)] == ["fact_1"]
        shared = _hits(store, ["shared"], None, 10)
        assert [h.fact_id for h in shared] == ["fact_2"]


@pytest.mark.parametrize("kind", KINDS)
def test_srch2_store_search_terms_are_never_query_syntax(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:
        commit_all(store, _fact_mutations({"fact_x": "and or not near"}))
        for terms in (["AND"], ["or"], ["NEAR"], ['"'], ["*"], ["a:b"], ["(", ")"], ["^x"]):
            _search(store, terms)  # must not raise
        hits = _hits(store, ["not", "near"], None, 10)
        assert [h.fact_id for h in hits] == ["fact_x"]


def _handoff(seq: int, hid: str, to: str, frm: str, status: str, source: str) -> Mutation:
    row = HandoffIndexRow(hid, frm, to, source, status, 1, seq)
    return mutation(seq, hid, b"{}", kind="handoff", handoff=row)


@pytest.mark.parametrize("kind", KINDS)
def test_mbx1_mbx2_store_mailbox_paging(kind: str, tmp_path: Path) -> None:
    rows = [
        _handoff(1, "h1", "bob", "amy", "pending", "s1"),
        _handoff(2, "h2", "bob", "amy", "completed", "s1"),
        _handoff(3, "h3", "amy", "bob", "pending", "s1"),
        _handoff(4, "h4", "bob", "cat", "claimed", "s2"),
        _handoff(5, "h5", "bob", "amy", "pending", "s2"),
    ]
    with open_store(kind, tmp_path) as store:
        commit_all(store, rows)

        def box(
            actor: str = "bob",
            box: str = "inbox",
            source: str | None = None,
            completed: bool = False,
            before: int | None = None,
            limit: int = 20,
        ) -> list[str]:
            query = MailboxQuery(actor, box, source, completed, before, limit)
            found = store.read(lambda tx: tx.mailbox(SCOPE, query))
            assert all(seq == row.updated_seq for seq, row in found)
            return [row.handoff_id for _, row in found]

        assert box() == ["h5", "h4", "h1"]
        assert box(completed=True) == ["h5", "h4", "h2", "h1"]
        assert box(limit=2) == ["h5", "h4"]
        assert box(limit=2, before=4) == ["h1"]  # before_seq is exclusive
        assert box(completed=True, limit=2, before=4) == ["h2", "h1"]
        assert box(source="s2") == ["h5", "h4"]
        assert box(box="outbox", actor="amy") == ["h5", "h1"]
        assert box(box="outbox", actor="amy", completed=True) == ["h5", "h2", "h1"]
        assert box(actor="amy") == ["h3"]
        assert box(actor="nobody") == []
        # A status change moves the handoff to the top with its new sequence.
        commit_all(store, [_handoff(6, "h1", "bob", "amy", "completed", "s1")])
        assert box() == ["h5", "h4"]
        assert box(completed=True) == ["h1", "h5", "h4", "h2"]


@pytest.mark.parametrize("kind", KINDS)
def test_cmd6_store_head_compare_and_swap(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:
        commit_all(store, [mutation(1, "r1")])
        for wrong in (1, 3):
            with pytest.raises(AidememoError) as info:
                store.transaction(committer(mutation(wrong, "r2", command_id=f"c{wrong}x")))
            assert info.value.code is ErrorCode.STORAGE_FAILURE
        project = store.read(lambda tx: tx.get_project(SCOPE))
        assert project is not None and project.head_seq == 1
        assert len(store.read(lambda tx: tx.list_changes(SCOPE, 0, 100))) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_cmd6_store_commit_roundtrip(kind: str, tmp_path: Path) -> None:
    with open_store(kind, tmp_path) as store:
        put, delete = mutation(1, "r1", b'{"a":1}'), mutation(2, "r1", None, revision=2)
        commit_all(store, [put, delete])
        ref = put.receipt.resource
        current = store.read(lambda tx: tx.get_resource(SCOPE, ref))
        assert current is not None and current.deleted and current.revision == 2
        assert store.read(lambda tx: tx.get_receipt(SCOPE, "cmd_1")) == put.receipt
        assert store.read(lambda tx: tx.get_receipt(SCOPE, "cmd_2")) == delete.receipt
        assert store.read(lambda tx: tx.list_changes(SCOPE, 0, 10)) == [
            put.change(),
            delete.change(),
        ]
        assert store.read(lambda tx: tx.list_changes(SCOPE, 1, 10)) == [delete.change()]
        assert store.read(lambda tx: tx.list_changes(SCOPE, 0, 1)) == [put.change()]
        assert store.read(lambda tx: tx.list_audit(SCOPE)) == [put.audit(), delete.audit()]
        assert store.read(lambda tx: tx.list_resources(SCOPE, 10)) == [current]
        assert delete.change().op is ChangeOp.DELETE


@pytest.mark.parametrize("kind", KINDS)
def test_cmd5_store_begin_command_is_the_four_point_reads(kind: str, tmp_path: Path) -> None:
    """`begin_command`'s one statement reads what the four separate reads do: hits, misses,
    a tombstone, a suspended member and a project that does not exist."""
    with open_store(kind, tmp_path) as store:

        def members(tx: WriteTx) -> None:
            for actor, status in (
                ("actor_a", MemberStatus.ACTIVE),
                ("actor_s", MemberStatus.SUSPENDED),
            ):
                tx.insert_actor(Actor(TENANT, actor, ActorKind.AGENT), 1)
                tx.put_membership(Membership(TENANT, PROJECT, actor, Role.WRITER, status), 1)

        store.transaction(members)
        commit_all(
            store,
            [mutation(1, "r1", b'{"a":1}'), mutation(2, "r2"), mutation(3, "r2", None, revision=2)],
        )
        other = Scope(TENANT, "project_none")
        cases = list(
            itertools.product(
                (SCOPE, other),
                ("actor_a", "actor_s", "actor_x"),
                ("cmd_1", "cmd_3", "cmd_9"),
                (ResourceRef("custom.fact", rid) for rid in ("r1", "r2", "r9")),
            )
        )

        def compare(tx: WriteTx) -> None:
            for scope, actor, command_id, ref in cases:
                four = CommandStart(
                    tx.get_project(scope),
                    tx.get_membership(scope, actor),
                    tx.get_receipt(scope, command_id),
                    tx.get_resource(scope, ref),
                )
                assert tx.begin_command(CommandCall(scope, actor, command_id, ref)) == four

        store.transaction(compare)
        start = store.transaction(
            lambda tx: tx.begin_command(
                CommandCall(SCOPE, "actor_a", "cmd_3", ResourceRef("custom.fact", "r2"))
            )
        )
        assert start.project is not None and start.project.head_seq == 3
        assert start.membership is not None and start.membership.active
        assert start.receipt is not None and start.receipt.project_seq == 3
        assert start.current is not None and start.current.deleted and start.current.revision == 2
