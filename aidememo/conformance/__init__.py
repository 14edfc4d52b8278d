"""The portable conformance suite: every store must pass every check (SPEC.md LEDGER, IDENT).

`CHECKS` lists them with their rule ids; `run_all(factory)` runs each on a fresh store from
`factory` and reports plain dicts, so Pyodide can run it without pytest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aidememo.conformance.harness import ConformanceViolation, Fixture, StoreFactory
from aidememo.conformance.identity_checks import IDENTITY_CHECKS
from aidememo.conformance.ledger_checks import LEDGER_CHECKS

__all__ = ["CHECKS", "Check", "ConformanceViolation", "Fixture", "StoreFactory", "run_all"]


@dataclass(frozen=True, slots=True)
class Check:
    """One named contract check."""

    rule_id: str
    name: str
    fn: Callable[[Fixture], None]

    def run(self, factory: StoreFactory) -> None:
        """Run the check on a fresh store; raises on violation, closes the store either way."""
        fixture = Fixture.create(factory)
        try:
            self.fn(fixture)
        finally:
            fixture.store.close()


CHECKS: tuple[Check, ...] = tuple(
    Check(rule_id, fn.__name__, fn) for rule_id, fn in (*LEDGER_CHECKS, *IDENTITY_CHECKS)
)


def run_all(factory: StoreFactory) -> list[dict[str, object]]:
    """Run every check; one `{rule_id, name, ok, message}` dict per check, in order."""
    results: list[dict[str, object]] = []
    for check in CHECKS:
        try:
            check.run(factory)
        except Exception as exc:
            results.append(
                {"rule_id": check.rule_id, "name": check.name, "ok": False, "message": repr(exc)}
            )
        else:
            results.append(
                {"rule_id": check.rule_id, "name": check.name, "ok": True, "message": ""}
            )
    return results
