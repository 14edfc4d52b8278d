"""Hypothesis explores the handoff state table (HO-2..HO-6) for invariants that must always hold."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.handoff import (
    Event,
    Evidence,
    HandoffRecord,
    HandoffStatus,
    Outcome,
    transition,
)

LEASE = 100
CLAIMS = st.sampled_from(["claim_a", "claim_b", "claim_c"])
GOOD = Evidence("fact_ok", "session", "source", "receiver")
BAD = Evidence("fact_bad", "session", "source", "sender")


class HandoffMachine(RuleBasedStateMachine):
    """Random accept/heartbeat/return sequences against the transition table."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000
        self.record = HandoffRecord(
            "handoff", "session", "source", "sender", "receiver", None, None, None
        )
        self.fenced: set[str] = set()
        self.completed_once = False

    def _apply(self, event: Event) -> HandoffRecord | None:
        before = self.record
        try:
            after = transition(before, event)
        except AidememoError as err:
            assert err.code is ErrorCode.HANDOFF_CONFLICT  # the table raises nothing else
            return None
        assert after.attempt_count >= before.attempt_count
        if after.claim_id != before.claim_id and before.claim_id is not None:
            self.fenced.add(before.claim_id)  # HO-3: the replaced claim is fenced
            assert after.attempt_count == before.attempt_count + 1
        self.record = after
        return after

    @rule(ms=st.integers(0, 3 * LEASE))
    def advance(self, ms: int) -> None:
        self.now += ms

    @rule(claim=CLAIMS)
    def accept(self, claim: str) -> None:
        before = self.record
        after = self._apply(Event("accept", claim, self.now, LEASE))
        if before.status is HandoffStatus.COMPLETED:
            assert after is None  # HO-3: completed is terminal for accept
        if before.status is HandoffStatus.PENDING:
            assert after is not None and after.attempt_count == 1  # HO-2

    @rule(claim=CLAIMS)
    def heartbeat(self, claim: str) -> None:
        before = self.record
        after = self._apply(Event("heartbeat", claim, self.now, LEASE))
        if after is not None:  # HO-6: only the live current claim renews; fenced ones never
            assert claim not in self.fenced or claim == before.claim_id
            assert before.status is HandoffStatus.ACCEPTED
            assert claim == before.claim_id and before.lease_live(self.now)
            assert after.claim_expires_at_ms == self.now + LEASE

    @rule(claim=CLAIMS, good=st.booleans(), succeeded=st.booleans())
    def return_(self, claim: str, good: bool, succeeded: bool) -> None:
        before = self.record
        outcome = Outcome.SUCCEEDED if succeeded else Outcome.FAILED
        event = Event("return", claim, self.now, LEASE, GOOD if good else BAD, outcome)
        after = self._apply(event)
        if after is None:
            return
        assert good  # HO-4: evidence from another actor never passes
        assert claim == before.claim_id
        if before.status is HandoffStatus.ACCEPTED:
            assert before.lease_live(self.now)
            if succeeded:
                assert after.status is HandoffStatus.COMPLETED
                self.completed_once = True
            else:
                assert after.status is HandoffStatus.ACCEPTED
                assert after.claim_expires_at_ms is None
        else:
            assert after == before  # HO-5: an identical return on completed is a no-op

    @invariant()
    def completed_is_terminal(self) -> None:
        if self.completed_once:
            assert self.record.status is HandoffStatus.COMPLETED
            assert self.record.outcome is Outcome.SUCCEEDED

    @invariant()
    def accepted_has_a_claim(self) -> None:
        if self.record.status is not HandoffStatus.PENDING:
            assert self.record.claim_id is not None and self.record.attempt_count >= 1
        else:
            assert self.record.claim_id is None and self.record.attempt_count == 0


TestHandoffMachine = HandoffMachine.TestCase
TestHandoffMachine.settings = settings(max_examples=200, stateful_step_count=30, deadline=None)
