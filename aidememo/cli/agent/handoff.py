"""`aidememo handoff send|inbox|outbox|accept|heartbeat|return|status` (SPEC.md CLI-4, CLI-5).

The claim and command ids of `accept`, `heartbeat` and `return` are derived from the operation
(ID-4, by `aidememo.client`), so re-running one whose answer was lost sends the identical
command: the server replays its receipt and the command reports `recovered` with the same
claim and command ids (CLI-5). `return` first checks that the result fact is the receiver's
own, in the handoff's session and source (what HO-4 asks), and says what is wrong instead of
sending a return the server would refuse (CLI-4).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from aidememo.cli.agent.connect import agent_command, connected
from aidememo.cli.agent.profiles import Profile
from aidememo.cli.agent.queueing import deliver_and_report, send_request
from aidememo.cli.errors import CliError
from aidememo.cli.render import clip, emit, recovered_note, table, when
from aidememo.client import AidememoClientError, Client, HandoffStatus, Mailbox, Transition
from aidememo.domain.errors import ErrorCode

RESULT_FACT = "result fact"


@agent_command
def cmd_send(ns: argparse.Namespace) -> int:
    return deliver_and_report(
        ns, lambda profile: send_request(profile, ns), "sent handoff", f" to {ns.to}"
    )


def _lease(lease_state: str | None, expires_at_ms: int | None) -> str:
    if lease_state is None:
        return "-"
    return f"{lease_state} until {when(expires_at_ms)}"


def _mailbox(ns: argparse.Namespace, page: Mailbox, peer: str) -> int:
    rows = []
    for item in page.assignments:
        rec = item.record
        rows.append(
            [
                rec.handoff_id,
                rec.status,
                _lease(item.lease_state, rec.claim_expires_at_ms),
                rec.from_actor if peer == "FROM" else rec.to_actor,
                rec.session_id,
                clip(rec.focus, 40),
            ]
        )
    lines = table(["HANDOFF", "STATUS", "LEASE", peer, "SESSION", "FOCUS"], rows, "no handoffs")
    if page.next_before_seq is not None:
        lines.append("more handoffs: raise --limit")
    return emit(ns, page, lines)


@agent_command
def cmd_inbox(ns: argparse.Namespace) -> int:
    with connected(ns) as (_, client):
        page = client.inbox(include_completed=True if ns.all else None, limit=ns.limit)
    return _mailbox(ns, page, "FROM")


@agent_command
def cmd_outbox(ns: argparse.Namespace) -> int:
    with connected(ns) as (_, client):
        page = client.outbox(include_completed=True if ns.all else None, limit=ns.limit)
    return _mailbox(ns, page, "TO")


def _status_lines(found: HandoffStatus) -> list[str]:
    rec = found.record
    lines = [
        f"handoff {rec.handoff_id} revision {found.revision}: {rec.status}",
        f"  from {rec.from_actor} to {rec.to_actor} in session {rec.session_id}",
    ]
    if rec.focus:
        lines.append(f"  focus: {clip(rec.focus, 200)}")
    if rec.done_when:
        lines.append(f"  done when: {clip(rec.done_when, 200)}")
    if rec.claim_id:
        lines.append(f"  claim {rec.claim_id} (attempt {rec.attempt_count})")
        lines.append(f"  lease: {_lease(found.lease_state, rec.claim_expires_at_ms)}")
    if rec.outcome:
        lines.append(f"  returned {rec.outcome} with fact {rec.result_fact_id}")
        if rec.result_artifact_id is not None:
            lines.append(f"  result artifact {rec.result_artifact_id}")
    return lines


@agent_command
def cmd_status(ns: argparse.Namespace) -> int:
    with connected(ns) as (_, client):
        found = client.handoff_status(ns.handoff_id)
    return emit(ns, found, _status_lines(found))


def _transition(ns: argparse.Namespace, verb: str, done: Transition, extra: str = "") -> int:
    human = [
        f"{verb} handoff {ns.handoff_id}{extra}{recovered_note(done.recovered)}",
        f"  claim {done.claim_id}",
        f"  command {done.command_id} (seq {done.receipt.project_seq}, "
        f"revision {done.receipt.revision})",
    ]
    return emit(ns, done, human)


def _leased(ns: argparse.Namespace, verb: str, move: Callable[[Client, str], Transition]) -> int:
    """An accept or heartbeat, reported with the lease it holds now."""
    with connected(ns) as (_, client):
        done = move(client, ns.handoff_id)
        found = client.handoff_status(ns.handoff_id)
    lease = f", lease until {when(found.record.claim_expires_at_ms)}"
    return _transition(ns, verb, done, lease)


@agent_command
def cmd_accept(ns: argparse.Namespace) -> int:
    return _leased(ns, "accepted", Client.accept_handoff)


@agent_command
def cmd_heartbeat(ns: argparse.Namespace) -> int:
    return _leased(ns, "renewed", Client.heartbeat_handoff)


def check_result_fact(client: Client, profile: Profile, handoff_id: str, fact_id: str) -> None:
    """Refuse, before sending, a result fact that is not the receiver's own in the handoff's
    session and source (HO-4 would refuse it after the send; CLI-4)."""
    status = client.handoff_status(handoff_id)
    rec = status.record
    if rec.to_actor != profile.actor_id:
        raise CliError(
            f"handoff {handoff_id} was sent to {rec.to_actor}, not to {profile.actor_id} "
            f"(profile {profile.name}): only its receiver returns it; nothing was sent "
            f"({ErrorCode.HANDOFF_ACTOR_MISMATCH.value})"
        )
    try:
        found = client.get_resource("fact", fact_id)
    except AidememoClientError as error:
        if error.code != ErrorCode.RESOURCE_NOT_FOUND.value:
            raise
        raise CliError(
            f"{RESULT_FACT} {fact_id} does not exist: add it first (aidememo fact add "
            f"--session {rec.session_id} ...); nothing was sent "
            f"({ErrorCode.RESOURCE_NOT_FOUND.value})"
        ) from None
    body = found.body if isinstance(found.body, dict) else {}
    problems = []
    if body.get("actor_id") != profile.actor_id:
        problems.append(
            f"it was written by {body.get('actor_id')}, not by you ({profile.actor_id})"
        )
    if body.get("session_id") != rec.session_id:
        problems.append(
            f"it is in session {body.get('session_id')}, not in the handoff's session "
            f"{rec.session_id}"
        )
    elif body.get("source_id") != rec.source_id:
        problems.append(f"its source is {body.get('source_id')}, not {rec.source_id}")
    if found.state.state == "deleted":
        problems.append("it was deleted")
    if problems:
        raise CliError(
            f"{RESULT_FACT} {fact_id} cannot complete handoff {handoff_id}: "
            + "; ".join(problems)
            + f". Return with a fact of your own in session {rec.session_id} "
            f"(aidememo fact add --session {rec.session_id} ...); nothing was sent "
            f"({ErrorCode.HANDOFF_CONFLICT.value})"
        )


@agent_command
def cmd_return(ns: argparse.Namespace) -> int:
    with connected(ns) as (profile, client):
        check_result_fact(client, profile, ns.handoff_id, ns.result_fact)
        done = client.return_handoff(
            ns.handoff_id, ns.result_fact, ns.outcome, result_artifact_id=ns.result_artifact
        )
    artifact = f", result artifact {ns.result_artifact}" if ns.result_artifact else ""
    extra = f" ({ns.outcome}, result fact {ns.result_fact}{artifact})"
    return _transition(ns, "returned", done, extra)
