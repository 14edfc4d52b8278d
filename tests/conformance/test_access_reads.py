"""The one-statement reads: `authenticate_token` and `get_access` agree on every backend."""

from __future__ import annotations

import pytest

from aidememo.conformance.harness import (
    ACTOR,
    EPOCH,
    OTHER_ACTOR,
    PROJECT,
    RESOURCE,
    TENANT,
    Fixture,
)
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import (
    ActorKind,
    ChangeOp,
    Member,
    MemberStatus,
    Project,
    ResourceRef,
    Role,
    Scope,
)
from aidememo.service.access import Caller
from tests.conformance.conftest import Backend

SCOPE = Scope(TENANT, PROJECT)


def test_auth2_token_resolves_only_active_bindings_of_existing_actors(
    backend: Backend,
) -> None:
    fx = Fixture.create(backend.open)
    digest, other = bytes([3]) * 32, bytes([4]) * 32
    fx.identity.provision_member(TENANT, PROJECT, "actor_tok", token_sha256=digest)
    found = fx.store.read(lambda tx: tx.authenticate_token(digest))
    assert found is not None and found.active
    assert (found.token_sha256, found.tenant_id, found.actor_id) == (digest, TENANT, "actor_tok")
    assert fx.store.read(lambda tx: tx.authenticate_token(other)) is None
    assert fx.identity.authenticate(digest) == Caller(TENANT, "actor_tok")
    fx.identity.revoke_token(digest)
    assert fx.store.read(lambda tx: tx.authenticate_token(digest)) is None
    with pytest.raises(AidememoError) as info:
        fx.identity.authenticate(digest)
    assert info.value.code is ErrorCode.AUTHENTICATION_FAILED
    fx.identity.provision_member(TENANT, PROJECT, "actor_tok2", token_sha256=other)
    fx.store.transaction(lambda tx: tx.delete_tenant(TENANT))
    assert fx.store.read(lambda tx: tx.authenticate_token(other)) is None
    fx.store.close()


def test_auth3_auth5_access_reads_project_and_membership_together(backend: Backend) -> None:
    fx = Fixture.create(backend.open)
    project = Project(TENANT, PROJECT, EPOCH, 0)
    got = fx.store.read(lambda tx: tx.get_access(SCOPE, ACTOR))
    assert got[0] == project
    assert got[1] is not None and (got[1].role, got[1].status) == (Role.WRITER, MemberStatus.ACTIVE)
    assert got == fx.store.read(lambda tx: (tx.get_project(SCOPE), tx.get_membership(SCOPE, ACTOR)))
    assert fx.store.read(lambda tx: tx.get_access(SCOPE, "actor_nobody")) == (project, None)
    missing = Scope(TENANT, "project_missing")
    assert fx.store.read(lambda tx: tx.get_access(missing, ACTOR)) == (None, None)
    fx.identity.set_membership(TENANT, PROJECT, ACTOR, status=MemberStatus.SUSPENDED)
    fx.put("command_other", "x", caller=fx.other)
    project, member = fx.store.read(lambda tx: tx.get_access(SCOPE, ACTOR))
    assert project is not None and project.head_seq == 1
    assert member is not None and member.status is MemberStatus.SUSPENDED
    fx.store.close()


def test_feed1_metadata_changes_keep_only_the_bodies_visibility_needs(backend: Backend) -> None:
    fx = Fixture.create(backend.open)
    fx.put("command_fact", "a")
    fx.put("command_handoff", "h", resource=ResourceRef("handoff", "handoff_1"))
    fx.put("command_context", "c", resource=ResourceRef("handoff_context", "context_1"))
    fx.delete("command_delete", expected=1)
    full = fx.store.read(lambda tx: tx.list_changes(SCOPE, 0, 100))
    heads = fx.store.read(lambda tx: tx.list_changes(SCOPE, 0, 100, bodies=False))
    assert [c.seq for c in heads] == [c.seq for c in full] == [1, 2, 3, 4]
    for head, change in zip(heads, full, strict=True):
        assert (head.ref, head.op, head.revision, head.actor_id, head.committed_at_ms) == (
            change.ref,
            change.op,
            change.revision,
            change.actor_id,
            change.committed_at_ms,
        )
        if change.ref.kind in ("handoff", "handoff_context"):
            assert head.body == change.body is not None  # visibility reads it
        else:
            assert head.body in (None, change.body)  # a store may leave it out
    assert full[0].body is not None and full[3].op is ChangeOp.DELETE and full[3].body is None
    fx.store.close()


def test_reads1_list_members_reads_one_project_with_actor_kinds(backend: Backend) -> None:
    fx = Fixture.create(backend.open)
    fx.identity.provision_member(TENANT, PROJECT, "actor_human", kind=ActorKind.HUMAN)
    fx.identity.provision_member(TENANT, PROJECT, "actor_a_reader", role=Role.READER)
    fx.identity.bootstrap(
        tenant_id=TENANT,
        project_id="project_elsewhere",
        actor_id="actor_elsewhere",
        role=Role.WRITER,
        project_epoch="epoch_elsewhere",
    )
    fx.identity.set_membership(TENANT, PROJECT, OTHER_ACTOR, status=MemberStatus.SUSPENDED)
    got = fx.store.read(lambda tx: tx.list_members(SCOPE))
    assert got == [
        Member("actor_a_reader", ActorKind.AGENT, Role.READER, MemberStatus.ACTIVE),
        Member(ACTOR, ActorKind.AGENT, Role.WRITER, MemberStatus.ACTIVE),
        Member("actor_human", ActorKind.HUMAN, Role.WRITER, MemberStatus.ACTIVE),
        Member(OTHER_ACTOR, ActorKind.AGENT, Role.WRITER, MemberStatus.SUSPENDED),
    ]
    assert fx.store.read(lambda tx: tx.list_members(Scope(TENANT, "project_missing"))) == []
    fx.store.close()


def test_reads3_list_sessions_pages_creation_receipts_newest_first(backend: Backend) -> None:
    fx = Fixture.create(backend.open)
    for i in range(4):
        fx.put(f"command_s{i}", "s", resource=ResourceRef("session", f"session_{i}"))
        fx.put(f"command_f{i}", "f", resource=ResourceRef("fact", f"fact_{i}"))
    # seqs: sessions at 1, 3, 5, 7; facts between them are not sessions
    got = fx.store.read(lambda tx: tx.list_sessions(SCOPE, None, 10))
    assert got == [(7, "session_3"), (5, "session_2"), (3, "session_1"), (1, "session_0")]
    assert fx.store.read(lambda tx: tx.list_sessions(SCOPE, 5, 1)) == [(3, "session_1")]
    assert fx.store.read(lambda tx: tx.list_sessions(SCOPE, 1, 10)) == []
    assert fx.store.read(lambda tx: tx.list_sessions(Scope(TENANT, "project_x"), None, 10)) == []
    fx.store.close()


def test_reads5_access_and_resource_in_one_read_agree_with_the_two_reads(
    backend: Backend,
) -> None:
    fx = Fixture.create(backend.open)
    digest = bytes([5]) * 32
    fx.identity.provision_member(TENANT, PROJECT, "actor_tok", token_sha256=digest)
    fx.put("command_one", "a")
    ref, missing_ref = RESOURCE, ResourceRef(RESOURCE.kind, "missing")

    def both(scope: Scope, actor: str, token: bytes | None, r: ResourceRef) -> object:
        return fx.store.read(
            lambda tx: (*tx.get_access(scope, actor, token), tx.get_resource(scope, r))
        )

    for actor, token in ((ACTOR, None), ("actor_tok", digest), ("actor_nobody", None)):
        for r in (ref, missing_ref):
            got = fx.store.read(
                lambda tx, a=actor, t=token, r=r: tx.get_access_resource(SCOPE, a, t, r)
            )
            assert got == both(SCOPE, actor, token, r), (actor, r)
    project, member, found = fx.store.read(
        lambda tx: tx.get_access_resource(SCOPE, ACTOR, None, ref)
    )
    assert project is not None and member is not None and member.role is Role.WRITER
    assert found is not None and found.revision == 1 and found.body is not None
    missing = Scope(TENANT, "project_missing")
    for token in (None, digest):
        assert fx.store.read(
            lambda tx, t=token: tx.get_access_resource(missing, "actor_tok", t, ref)
        ) == (None, None, None)
    fx.identity.revoke_token(digest)
    with pytest.raises(AidememoError) as info:
        fx.store.read(lambda tx: tx.get_access_resource(SCOPE, "actor_tok", digest, ref))
    assert info.value.code is ErrorCode.AUTHENTICATION_FAILED
    fx.store.close()
