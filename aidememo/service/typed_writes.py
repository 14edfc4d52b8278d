"""Typed sessions, facts, handoff contexts and handoffs (SPEC.md TYP-*, HO-*).

Every operation goes through the ledger's pipeline, so receipt replay comes before any state
is read and before a secret in a written text is refused (SEC-1, SEC-3), and every
prerequisite (session, context, fact, receiver, absence) is decided inside the write
transaction: two creates of one id cannot both succeed (TYP-3).
"""

from __future__ import annotations

from aidememo.domain.canonical import canonical_bytes, decode_stored
from aidememo.domain.envelope import Command
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.handoff import Event, Evidence, HandoffRecord, transition
from aidememo.domain.model import (
    ChangeOp,
    HandoffIndexRow,
    Project,
    Receipt,
    ResourceRef,
    Scope,
    SearchDoc,
    StoredResource,
)
from aidememo.domain.records import (
    ContextInput,
    CreateRequest,
    FactInput,
    HandoffInput,
    SessionInput,
    TransitionRequest,
    parse_claim,
    parse_return,
)
from aidememo.domain.secrets import find_in_texts
from aidememo.domain.tokenize import index_terms
from aidememo.domain.visibility import visible_to
from aidememo.ports import ReadTx, WriteTx
from aidememo.service.access import Caller
from aidememo.service.ledger import Decide, Decision, Ledger, check_expected_revision

SESSION, FACT, CONTEXT, HANDOFF = "session", "fact", "handoff_context", "handoff"


def _absent(current: StoredResource | None) -> None:
    if current is not None:
        raise fail(ErrorCode.RESOURCE_ALREADY_EXISTS, "resource already exists")


def _existing(tx: ReadTx, scope: Scope, kind: str, resource_id: str) -> dict[str, object]:
    found = tx.get_resource(scope, ResourceRef(kind, resource_id))
    if found is None or found.body is None:
        raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"{kind} {resource_id} not found")
    record = decode_stored(found.body)
    assert isinstance(record, dict)
    return record


def _result_artifact(tx: ReadTx, scope: Scope, artifact_id: str, actor_id: str) -> None:
    """A return's `result_artifact_id` names a current publication the returning actor may
    read (HO-9, VIS-2); it never completes a handoff by itself."""
    found = tx.get_resource(scope, ResourceRef("artifact", artifact_id))
    if found is None or found.body is None or not visible_to("artifact", found.body, actor_id):
        raise fail(ErrorCode.ARTIFACT_NOT_FOUND, f"artifact {artifact_id} not found")


def _check_receiver(tx: ReadTx, scope: Scope, sender: str, receiver: str) -> None:
    if receiver == sender:
        raise fail(ErrorCode.INVALID_COMMAND, "cannot hand off to yourself")
    member = tx.get_membership(scope, receiver)
    if member is None or not member.active or not member.role.can_write:
        raise fail(
            ErrorCode.INVALID_COMMAND,
            f"receiver {receiver} must be an active writer of the project",
        )


def _index_row(record: HandoffRecord) -> HandoffIndexRow:
    # revision and updated_seq are filled in by the pipeline once they are known.
    return HandoffIndexRow(
        record.handoff_id,
        record.from_actor,
        record.to_actor,
        record.source_id,
        record.status.value,
        0,
        0,
    )


class TypedWrites:
    """The typed write operations."""

    def __init__(self, ledger: Ledger, lease_ms: int) -> None:
        self.ledger = ledger
        self.lease_ms = lease_ms

    def _command(
        self,
        project_id: str,
        command_id: str,
        operation: str,
        ref: ResourceRef,
        payload: dict[str, object],
        expected: int | None = None,
    ) -> Command:
        return Command(command_id, project_id, expected, operation, ref, ChangeOp.UPSERT, payload)

    def _create(
        self,
        caller: Caller,
        project_id: str,
        req: CreateRequest,
        operation: str,
        ref: ResourceRef,
        decide: Decide,
        texts: dict[str, str | None],
    ) -> Receipt:
        """Run a typed create: its command, `decide`, and the secret check of its texts,
        the payload fields named in `texts`."""
        cmd = self._command(project_id, req.command_id, operation, ref, req.payload)
        pointed = [(f"/payload/{field}", text) for field, text in texts.items()]
        return self.ledger.execute(caller, cmd, decide, secret=find_in_texts(pointed))

    def create_session(self, caller: Caller, project_id: str, req: CreateRequest) -> Receipt:
        """`session.create`: source is fixed at creation."""
        data = SessionInput.parse(req.payload)
        ref = ResourceRef(SESSION, data.session_id)
        body = canonical_bytes(
            {
                "session_id": data.session_id,
                "source_id": data.source_id,
                "topic": data.topic,
                "created_by": caller.actor_id,
            }
        )

        def decide(tx: WriteTx, p: Project, current: StoredResource | None, now: int) -> Decision:
            _absent(current)
            return Decision(ChangeOp.UPSERT, body)

        return self._create(
            caller, project_id, req, "session.create", ref, decide, {"topic": data.topic}
        )

    def create_fact(self, caller: Caller, project_id: str, req: CreateRequest) -> Receipt:
        """`fact.create`: source and actor are inherited server-side; indexed in the same
        transaction (SRCH-1)."""
        data = FactInput.parse(req.payload)
        ref = ResourceRef(FACT, data.fact_id)
        terms = index_terms(data.content)

        def decide(tx: WriteTx, p: Project, current: StoredResource | None, now: int) -> Decision:
            session = _existing(tx, p.scope, SESSION, data.session_id)
            _absent(current)
            source_id = str(session["source_id"])
            body = canonical_bytes(
                {
                    "fact_id": data.fact_id,
                    "session_id": data.session_id,
                    "source_id": source_id,
                    "actor_id": caller.actor_id,
                    "content": data.content,
                }
            )
            return Decision(ChangeOp.UPSERT, body, search=SearchDoc(data.fact_id, source_id, terms))

        return self._create(
            caller, project_id, req, "fact.create", ref, decide, {"content": data.content}
        )

    def create_context(self, caller: Caller, project_id: str, req: CreateRequest) -> Receipt:
        """`handoff_context.create`: an immutable packet for one exact handoff route."""
        data = ContextInput.parse(req.payload)
        ref = ResourceRef(CONTEXT, data.context_id)

        def decide(tx: WriteTx, p: Project, current: StoredResource | None, now: int) -> Decision:
            session = _existing(tx, p.scope, SESSION, data.session_id)
            _check_receiver(tx, p.scope, caller.actor_id, data.to_actor)
            _absent(current)
            body = canonical_bytes(
                {
                    "context_id": data.context_id,
                    "handoff_id": data.handoff_id,
                    "session_id": data.session_id,
                    "source_id": session["source_id"],
                    "from_actor": caller.actor_id,
                    "to_actor": data.to_actor,
                    "content": data.content,
                }
            )
            return Decision(ChangeOp.UPSERT, body)

        return self._create(
            caller,
            project_id,
            req,
            "handoff_context.create",
            ref,
            decide,
            {"content": data.content},
        )

    def send_handoff(self, caller: Caller, project_id: str, req: CreateRequest) -> Receipt:
        """`handoff.send`: a pending handoff to another active writer (HO-1)."""
        data = HandoffInput.parse(req.payload)
        ref = ResourceRef(HANDOFF, data.handoff_id)

        def decide(tx: WriteTx, p: Project, current: StoredResource | None, now: int) -> Decision:
            session = _existing(tx, p.scope, SESSION, data.session_id)
            source_id = str(session["source_id"])
            if data.context_id is not None:
                context = _existing(tx, p.scope, CONTEXT, data.context_id)
                route = (
                    data.handoff_id,
                    data.session_id,
                    source_id,
                    caller.actor_id,
                    data.to_actor,
                )
                found = tuple(
                    context[k]
                    for k in ("handoff_id", "session_id", "source_id", "from_actor", "to_actor")
                )
                if found != route:
                    raise fail(ErrorCode.HANDOFF_CONFLICT, "context belongs to another route")
            _check_receiver(tx, p.scope, caller.actor_id, data.to_actor)
            _absent(current)
            record = data.record(source_id, caller.actor_id)
            return Decision(ChangeOp.UPSERT, canonical_bytes(record.to_json()), _index_row(record))

        texts = {"focus": data.focus, "done_when": data.done_when}
        return self._create(caller, project_id, req, "handoff.send", ref, decide, texts)

    def transition(
        self, caller: Caller, project_id: str, handoff_id: str, kind: str, req: TransitionRequest
    ) -> Receipt:
        """`handoff.accept|heartbeat|return`; faults in the order not found, actor mismatch,
        stale revision, handoff conflict (HO-7)."""
        artifact_id = None
        if kind == "return":
            claim_id, fact_id, outcome, artifact_id = parse_return(req.payload)
        else:
            claim_id, fact_id, outcome = parse_claim(req.payload), None, None
        ref = ResourceRef(HANDOFF, handoff_id)

        def decide(tx: WriteTx, p: Project, current: StoredResource | None, now: int) -> Decision:
            if current is None or current.body is None:
                raise fail(ErrorCode.RESOURCE_NOT_FOUND, f"handoff {handoff_id} not found")
            evidence = None
            if fact_id is not None:
                fact = _existing(tx, p.scope, FACT, fact_id)
                evidence = Evidence(
                    fact_id, str(fact["session_id"]), str(fact["source_id"]), str(fact["actor_id"])
                )
            if artifact_id is not None:
                _result_artifact(tx, p.scope, artifact_id, caller.actor_id)
            record = HandoffRecord.from_json(decode_stored(current.body))
            if record.to_actor != caller.actor_id:
                raise fail(ErrorCode.HANDOFF_ACTOR_MISMATCH, "only the receiver may do this")
            check_expected_revision(current, req.expected_revision)
            event = Event(kind, claim_id, now, self.lease_ms, evidence, outcome, artifact_id)
            updated = transition(record, event)
            return Decision(
                ChangeOp.UPSERT, canonical_bytes(updated.to_json()), _index_row(updated)
            )

        operation = f"handoff.{kind}"
        cmd = self._command(
            project_id, req.command_id, operation, ref, req.payload, req.expected_revision
        )
        return self.ledger.execute(caller, cmd, decide)
