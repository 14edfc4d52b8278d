"""The portable conformance checks (LEDGER-1..15, IDENT-1..10) on every backend."""

from __future__ import annotations

import pytest

from aidememo.conformance import CHECKS, Check
from tests.conformance.conftest import Backend


@pytest.mark.parametrize("check", CHECKS, ids=[c.rule_id for c in CHECKS])
def test_conformance_check(backend: Backend, check: Check) -> None:
    check.run(backend.open)


def test_conformance_suite_is_complete() -> None:
    ids = [check.rule_id for check in CHECKS]
    assert len(ids) == 25 and len(set(ids)) == 25
    assert sum(i.startswith("LEDGER-") for i in ids) == 15
    assert sum(i.startswith("IDENT-") for i in ids) == 10
