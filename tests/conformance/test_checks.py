"""The portable conformance checks (LEDGER-1..15, IDENT-1..10) on every backend.

One test function per check, named `test_<rule>_<check name>` so the rule it checks is in the
test's own name (the form every SPEC.md rule is cited in); each runs that check from `CHECKS`
on a fresh store of the parametrized backend.
"""

from __future__ import annotations

import re

from aidememo.conformance import CHECKS, Check
from tests.conformance.conftest import Backend


def _check(rule_id: str) -> Check:
    (check,) = (c for c in CHECKS if c.rule_id == rule_id)
    return check


def _run(backend: Backend, rule_id: str) -> None:
    _check(rule_id).run(backend.open)


def test_ledger1_initial_commit(backend: Backend) -> None:
    _run(backend, "LEDGER-1")


def test_ledger2_canonical_resource_upsert(backend: Backend) -> None:
    _run(backend, "LEDGER-2")


def test_ledger3_idempotent_replay(backend: Backend) -> None:
    _run(backend, "LEDGER-3")


def test_ledger4_receipt_lookup(backend: Backend) -> None:
    _run(backend, "LEDGER-4")


def test_ledger5_command_actor_conflict(backend: Backend) -> None:
    _run(backend, "LEDGER-5")


def test_ledger6_command_id_conflict(backend: Backend) -> None:
    _run(backend, "LEDGER-6")


def test_ledger7_stale_revision(backend: Backend) -> None:
    _run(backend, "LEDGER-7")


def test_ledger8_compare_and_swap(backend: Backend) -> None:
    _run(backend, "LEDGER-8")


def test_ledger9_single_mutation_per_command(backend: Backend) -> None:
    _run(backend, "LEDGER-9")


def test_ledger10_delete_tombstone(backend: Backend) -> None:
    _run(backend, "LEDGER-10")


def test_ledger11_canonical_resource_tombstone(backend: Backend) -> None:
    _run(backend, "LEDGER-11")


def test_ledger12_revision_pinned_change_materialization(backend: Backend) -> None:
    _run(backend, "LEDGER-12")


def test_ledger13_atomic_project_snapshot(backend: Backend) -> None:
    _run(backend, "LEDGER-13")


def test_ledger14_cursor_epoch_fail_closed(backend: Backend) -> None:
    _run(backend, "LEDGER-14")


def test_ledger15_cursor_sequence_fail_closed(backend: Backend) -> None:
    _run(backend, "LEDGER-15")


def test_ident1_project_bootstrap_idempotent(backend: Backend) -> None:
    _run(backend, "IDENT-1")


def test_ident2_project_epoch_conflict(backend: Backend) -> None:
    _run(backend, "IDENT-2")


def test_ident3_token_authentication(backend: Backend) -> None:
    _run(backend, "IDENT-3")


def test_ident4_active_membership(backend: Backend) -> None:
    _run(backend, "IDENT-4")


def test_ident5_exact_membership_lookup(backend: Backend) -> None:
    _run(backend, "IDENT-5")


def test_ident6_actor_identity_conflict(backend: Backend) -> None:
    _run(backend, "IDENT-6")


def test_ident7_token_binding_conflict(backend: Backend) -> None:
    _run(backend, "IDENT-7")


def test_ident8_token_binding_rollback(backend: Backend) -> None:
    _run(backend, "IDENT-8")


def test_ident9_invalid_digest_length(backend: Backend) -> None:
    _run(backend, "IDENT-9")


def test_ident10_membership_scope_isolation(backend: Backend) -> None:
    _run(backend, "IDENT-10")


def test_suite1_conformance_suite_is_complete() -> None:
    ids = [check.rule_id for check in CHECKS]
    assert len(ids) == 25 and len(set(ids)) == 25
    assert sum(i.startswith("LEDGER-") for i in ids) == 15
    assert sum(i.startswith("IDENT-") for i in ids) == 10
    # Every check has its test above, named after its rule and its check, and nothing more.
    expected = {f"test_{c.rule_id.replace('-', '').lower()}_{c.name}" for c in CHECKS}
    defined = {n for n in globals() if re.fullmatch(r"test_(ledger|ident)\d+_\w+", n)}
    assert defined == expected
