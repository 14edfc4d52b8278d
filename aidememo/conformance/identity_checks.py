"""The 10 identity and provisioning checks, SPEC.md rule ids IDENT-1 .. 10."""

from __future__ import annotations

from aidememo.conformance.harness import Fixture, expect, expect_error
from aidememo.domain.errors import ErrorCode
from aidememo.domain.model import ActorKind, Membership, MemberStatus, Role, Scope
from aidememo.service.access import Caller

TENANT = "tenant_identity_fixture"
PROJECT = "project_identity_fixture"
EPOCH = "epoch_identity_fixture"
ACTOR = "actor_identity_fixture"
DIGEST = bytes([0x61]) * 32
MEMBER = Membership(TENANT, PROJECT, ACTOR, Role.WRITER, MemberStatus.ACTIVE)


def _provisioned(fx: Fixture) -> None:
    fx.identity.bootstrap_project(TENANT, PROJECT, EPOCH)
    fx.identity.provision_member(TENANT, PROJECT, ACTOR, token_sha256=DIGEST)
    fx.clock.advance(8_999)
    fx.identity.provision_member(TENANT, PROJECT, ACTOR, token_sha256=DIGEST)


def project_bootstrap_idempotent(fx: Fixture) -> None:
    first = fx.identity.bootstrap_project(TENANT, PROJECT, EPOCH)
    again = fx.identity.bootstrap_project(TENANT, PROJECT, None)
    expect(first.project_epoch == EPOCH, f"epoch {first.project_epoch}")
    expect(again == first, f"retry changed the project: {again}")


def project_epoch_conflict(fx: Fixture) -> None:
    fx.identity.bootstrap_project(TENANT, PROJECT, EPOCH)
    expect_error(
        ErrorCode.IDENTITY_MISMATCH,
        lambda: fx.identity.bootstrap_project(TENANT, PROJECT, "epoch_identity_conflict"),
    )


def _expect_token_is_actor(fx: Fixture) -> None:
    caller = fx.identity.authenticate(DIGEST)
    expect(caller == Caller(TENANT, ACTOR), f"the token resolves to {caller}")


def token_authentication(fx: Fixture) -> None:
    _provisioned(fx)
    _expect_token_is_actor(fx)


def active_membership(fx: Fixture) -> None:
    _provisioned(fx)
    found = fx.identity.membership(fx.identity.authenticate(DIGEST), PROJECT)
    expect(found == MEMBER, f"membership {found}")


def exact_membership_lookup(fx: Fixture) -> None:
    _provisioned(fx)
    found = fx.store.read(lambda tx: tx.get_membership(Scope(TENANT, PROJECT), ACTOR))
    expect(found == MEMBER, f"membership {found}")


def actor_identity_conflict(fx: Fixture) -> None:
    _provisioned(fx)
    other_digest = bytes([0x62]) * 32
    expect_error(
        ErrorCode.IDENTITY_MISMATCH,
        lambda: fx.identity.provision_member(
            TENANT, PROJECT, ACTOR, kind=ActorKind.SERVICE, token_sha256=other_digest
        ),
    )
    expect_error(ErrorCode.AUTHENTICATION_FAILED, lambda: fx.identity.authenticate(other_digest))


def token_binding_conflict(fx: Fixture) -> None:
    _provisioned(fx)
    expect_error(
        ErrorCode.IDENTITY_MISMATCH,
        lambda: fx.identity.provision_member(
            TENANT, PROJECT, "actor_identity_fixture_other", token_sha256=DIGEST
        ),
    )
    ghost = fx.store.read(lambda tx: tx.get_actor(TENANT, "actor_identity_fixture_other"))
    expect(ghost is None, "a refused provisioning left an actor behind")


def token_binding_rollback(fx: Fixture) -> None:
    token_binding_conflict(fx)
    _expect_token_is_actor(fx)


def invalid_digest_length(fx: Fixture) -> None:
    _provisioned(fx)
    expect_error(ErrorCode.INVALID_COMMAND, lambda: fx.identity.authenticate(bytes(31)))


def membership_scope_isolation(fx: Fixture) -> None:
    _provisioned(fx)
    found = fx.store.read(
        lambda tx: tx.get_membership(Scope(TENANT, "project_identity_missing"), ACTOR)
    )
    expect(found is None, f"membership leaked into another project: {found}")


IDENTITY_CHECKS = (
    ("IDENT-1", project_bootstrap_idempotent),
    ("IDENT-2", project_epoch_conflict),
    ("IDENT-3", token_authentication),
    ("IDENT-4", active_membership),
    ("IDENT-5", exact_membership_lookup),
    ("IDENT-6", actor_identity_conflict),
    ("IDENT-7", token_binding_conflict),
    ("IDENT-8", token_binding_rollback),
    ("IDENT-9", invalid_digest_length),
    ("IDENT-10", membership_scope_isolation),
)
