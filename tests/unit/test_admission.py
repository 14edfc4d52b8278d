"""The command checks' verdicts and their errors (`aidememo.domain.admission`, SPEC.md CMD-5):
the one map from a verdict to its error code and message, and the order of the checks."""

from __future__ import annotations

import pytest

from aidememo.domain.admission import (
    WRITER_ROLES,
    access_verdict,
    receipt_verdict,
    refusal,
    revision_verdict,
)
from aidememo.domain.errors import ErrorCode
from aidememo.domain.model import (
    Membership,
    MemberStatus,
    Project,
    Receipt,
    ResourceRef,
    Role,
    Verdict,
)
from aidememo.domain.secrets import SecretFinding

REF = ResourceRef("custom.note", "n")
UNAUTHORIZED, NOT_FOUND = ErrorCode.PROJECT_UNAUTHORIZED, ErrorCode.RESOURCE_NOT_FOUND
PROJECT = Project("t", "p", "e", 0)


@pytest.mark.parametrize(
    ("verdict", "code", "message"),
    [
        (Verdict.NO_MEMBERSHIP, UNAUTHORIZED, "no active membership in this project"),
        (Verdict.READ_ONLY, UNAUTHORIZED, "this member may not write"),
        (Verdict.COMMAND_CONFLICT, ErrorCode.COMMAND_CONFLICT,
         "command_id was used for another command"),
        (Verdict.NOT_FOUND, NOT_FOUND, "resource not found"),
        (Verdict.STALE_REVISION, ErrorCode.STALE_REVISION,
         "expected revision 2, current revision is 3"),
        (Verdict.DELETE_MISSING, NOT_FOUND, "cannot delete a resource never written"),
        (Verdict.ADMITTED, ErrorCode.STORAGE_FAILURE, "the store answered admitted out of turn"),
        (Verdict.REPLAY, ErrorCode.STORAGE_FAILURE, "the store answered replay out of turn"),
    ],
)  # fmt: skip
def test_cmd5_each_verdict_names_one_error(verdict: Verdict, code: ErrorCode, message: str) -> None:
    error = refusal(verdict, expected=2, current=3)
    assert (error.code, error.message) == (code, message)


def test_sec3_a_secret_verdict_is_the_findings_own_error() -> None:
    finding = SecretFinding("aws_access_key_id", "/payload/k")
    error = refusal(Verdict.SECRET, secret=finding)
    assert (error.code, error.message) == (finding.error().code, finding.error().message)
    assert error.code is ErrorCode.SECRET_REJECTED


def test_auth4_auth5_membership_verdicts() -> None:
    def member(role: Role, status: MemberStatus = MemberStatus.ACTIVE) -> Membership:
        return Membership("t", "p", "a", role, status)

    assert access_verdict(None, member(Role.OWNER), write=True) is Verdict.NO_MEMBERSHIP
    assert access_verdict(PROJECT, None, write=False) is Verdict.NO_MEMBERSHIP
    suspended = member(Role.OWNER, MemberStatus.SUSPENDED)
    assert access_verdict(PROJECT, suspended, write=False) is Verdict.NO_MEMBERSHIP
    assert access_verdict(PROJECT, member(Role.READER), write=True) is Verdict.READ_ONLY
    assert access_verdict(PROJECT, member(Role.READER), write=False) is Verdict.ADMITTED
    writers = [
        r.value for r in Role if access_verdict(PROJECT, member(r), write=True) == "admitted"
    ]
    assert tuple(writers) == WRITER_ROLES == ("owner", "admin", "writer")


def test_cmd3_rev2_rev3_receipt_and_revision_verdicts() -> None:
    stored = Receipt("c", "f", "t", "p", "a", 1, REF, 1, 10)
    assert receipt_verdict(None, "a", "f", REF) is Verdict.ADMITTED
    assert receipt_verdict(stored, "a", "f", REF) is Verdict.REPLAY
    for actor, fp, ref in (("b", "f", REF), ("a", "g", REF), ("a", "f", ResourceRef("x", "n"))):
        assert receipt_verdict(stored, actor, fp, ref) is Verdict.COMMAND_CONFLICT
    assert revision_verdict(None, None, delete=False) is Verdict.ADMITTED
    assert revision_verdict(None, 1, delete=False) is Verdict.NOT_FOUND
    assert revision_verdict(None, 1, delete=True) is Verdict.NOT_FOUND  # REV-2 before REV-3
    assert revision_verdict(2, 1, delete=True) is Verdict.STALE_REVISION
    assert revision_verdict(None, None, delete=True) is Verdict.DELETE_MISSING
    assert revision_verdict(2, 2, delete=True) is Verdict.ADMITTED
