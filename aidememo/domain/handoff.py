"""The handoff state machine: one transition table, evaluated with an explicit clock (HO-*).

States are `pending`, `accepted` and `completed`; events are `accept`, `heartbeat` and
`return`. A lease is live while `now < claim_expires_at_ms`; expiry is evaluated when a
request looks at the handoff, never written by a timer (HO-6). Every rule lives in
`TRANSITIONS`; the service only loads the record, calls `transition` and stores the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from aidememo.domain.errors import ErrorCode, fail


class HandoffStatus(StrEnum):
    """Where a handoff is in its life."""

    PENDING = "pending"
    ACCEPTED = "accepted"
    COMPLETED = "completed"


class Outcome(StrEnum):
    """How the receiver says the work went."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class HandoffRecord:
    """The canonical handoff body."""

    handoff_id: str
    session_id: str
    source_id: str
    from_actor: str
    to_actor: str
    focus: str | None
    done_when: str | None
    context_id: str | None
    status: HandoffStatus = HandoffStatus.PENDING
    claim_id: str | None = None
    claim_heartbeat_at_ms: int | None = None
    claim_expires_at_ms: int | None = None
    attempt_count: int = 0
    result_fact_id: str | None = None
    outcome: Outcome | None = None
    result_artifact_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as stored and served; `result_artifact_id` only when a return named
        one (HO-9), so a record without it keeps the bytes it always had."""
        data = asdict(self)
        if data["result_artifact_id"] is None:
            del data["result_artifact_id"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HandoffRecord:
        """Rebuild a stored record."""
        outcome = data.get("outcome")
        return cls(
            **{
                **data,
                "status": HandoffStatus(data["status"]),
                "outcome": None if outcome is None else Outcome(outcome),
            }
        )

    def lease_live(self, now_ms: int) -> bool:
        """True while the current claim's lease has not expired (HO-6)."""
        return self.claim_expires_at_ms is not None and now_ms < self.claim_expires_at_ms


@dataclass(frozen=True, slots=True)
class Evidence:
    """The result fact a return points at, as the service found it."""

    fact_id: str
    session_id: str
    source_id: str
    actor_id: str


@dataclass(frozen=True, slots=True)
class Event:
    """One receiver action. `evidence`, `outcome` and `result_artifact_id` belong to `return`
    only."""

    kind: str  # "accept" | "heartbeat" | "return"
    claim_id: str
    now_ms: int
    lease_ms: int
    evidence: Evidence | None = None
    outcome: Outcome | None = None
    result_artifact_id: str | None = None


def _conflict(message: str) -> Exception:
    return fail(ErrorCode.HANDOFF_CONFLICT, message)


def _new_claim(record: HandoffRecord, event: Event) -> HandoffRecord:
    return replace(
        record,
        status=HandoffStatus.ACCEPTED,
        claim_id=event.claim_id,
        claim_heartbeat_at_ms=event.now_ms,
        claim_expires_at_ms=event.now_ms + event.lease_ms,
        attempt_count=record.attempt_count + 1,
        result_fact_id=None,
        outcome=None,
        result_artifact_id=None,
    )


def _accept_pending(record: HandoffRecord, event: Event) -> HandoffRecord:
    return _new_claim(record, event)


def _accept_accepted(record: HandoffRecord, event: Event) -> HandoffRecord:
    live = record.outcome is not Outcome.FAILED and record.lease_live(event.now_ms)
    if event.claim_id == record.claim_id:
        if live:
            return record  # the same claim again is a no-op (HO-2)
        raise _conflict("lease expired; acquire a new claim")
    if live:
        raise _conflict("another claim holds a live lease")
    return _new_claim(record, event)  # replaces a stale or failed claim; the old one is fenced


def _heartbeat(record: HandoffRecord, event: Event) -> HandoffRecord:
    if event.claim_id != record.claim_id:
        raise _conflict("heartbeat for a claim that is not the current one")
    if record.outcome is Outcome.FAILED or not record.lease_live(event.now_ms):
        raise _conflict("lease expired; acquire a new claim")
    return replace(
        record,
        claim_heartbeat_at_ms=event.now_ms,
        claim_expires_at_ms=event.now_ms + event.lease_ms,
    )


def _check_evidence(record: HandoffRecord, event: Event) -> Evidence:
    evidence = event.evidence
    if evidence is None or (evidence.session_id, evidence.source_id, evidence.actor_id) != (
        record.session_id,
        record.source_id,
        record.to_actor,
    ):
        raise _conflict("result fact must come from this session, source and receiver")
    return evidence


def _return_accepted(record: HandoffRecord, event: Event) -> HandoffRecord:
    if event.claim_id != record.claim_id:
        raise _conflict("return for a claim that is not the current one")
    if record.outcome is Outcome.FAILED or not record.lease_live(event.now_ms):
        raise _conflict("lease expired; acquire a new claim")
    evidence = _check_evidence(record, event)
    if event.outcome is Outcome.SUCCEEDED:
        return replace(
            record,
            status=HandoffStatus.COMPLETED,
            result_fact_id=evidence.fact_id,
            outcome=Outcome.SUCCEEDED,
            result_artifact_id=event.result_artifact_id,
        )
    # A failed attempt stays accepted with its lease cleared, ready for a new claim (HO-4).
    return replace(
        record,
        claim_expires_at_ms=None,
        result_fact_id=evidence.fact_id,
        outcome=Outcome.FAILED,
        result_artifact_id=event.result_artifact_id,
    )


def _return_completed(record: HandoffRecord, event: Event) -> HandoffRecord:
    evidence = event.evidence
    same = (
        event.claim_id == record.claim_id
        and evidence is not None
        and evidence.fact_id == record.result_fact_id
        and event.outcome is record.outcome
        and event.result_artifact_id == record.result_artifact_id
    )
    if same:
        return record  # the same return again is a no-op (HO-5)
    raise _conflict("handoff is already completed with other evidence")


def _completed(record: HandoffRecord, event: Event) -> HandoffRecord:
    raise _conflict(f"cannot {event.kind} a completed handoff")


def _not_accepted(record: HandoffRecord, event: Event) -> HandoffRecord:
    raise _conflict(f"cannot {event.kind} a handoff that is not accepted")


Transition = Callable[[HandoffRecord, Event], HandoffRecord]

TRANSITIONS: dict[tuple[HandoffStatus, str], Transition] = {
    (HandoffStatus.PENDING, "accept"): _accept_pending,
    (HandoffStatus.PENDING, "heartbeat"): _not_accepted,
    (HandoffStatus.PENDING, "return"): _not_accepted,
    (HandoffStatus.ACCEPTED, "accept"): _accept_accepted,
    (HandoffStatus.ACCEPTED, "heartbeat"): _heartbeat,
    (HandoffStatus.ACCEPTED, "return"): _return_accepted,
    (HandoffStatus.COMPLETED, "accept"): _completed,
    (HandoffStatus.COMPLETED, "heartbeat"): _completed,
    (HandoffStatus.COMPLETED, "return"): _return_completed,
}


def transition(record: HandoffRecord, event: Event) -> HandoffRecord:
    """Apply `event` to `record` by the table, or raise `handoff_conflict`."""
    return TRANSITIONS[(record.status, event.kind)](record, event)


def lease_state(record: dict[str, Any], now_ms: int) -> str | None:
    """`live` or `expired` for an accepted handoff holding a claim, None otherwise (READS-2).

    Derived from the stored `claim_expires_at_ms` and the clock at read time, never stored:
    the change feed carries the record alone. A pending handoff, a failed attempt (its lease
    cleared) and a completed one have no lease to report.
    """
    expires = record.get("claim_expires_at_ms")
    if record.get("status") != HandoffStatus.ACCEPTED or not isinstance(expires, int):
        return None
    return "live" if now_ms < expires else "expired"
