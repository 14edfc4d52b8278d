"""What each client method does, written once for `Client` and `AsyncClient`.

A method is a plan: a generator that yields `Call`s (one HTTP exchange each) and receives
their parsed answers, or has the call's `AidememoClientError` thrown into it. The synchronous
and the asynchronous client only differ in whether they await each call as they step a plan's
`Run` (`AsyncClient._run`, and `Client` is generated from it), so both run the same steps, the
same retry and the same recovery (SPEC.md CLIENT-1..CLIENT-4):

- A call that got no answer (`AidememoUnreachable`, retryable) is sent again, byte for byte,
  up to `retries` times (default once). A write's ids are fixed before the first send (the
  caller's, generated ULIDs, or derived by `aidememo.domain.command_ids`, ID-4), so an
  identical retry of a command the server had applied replays its receipt (CMD-3) instead of
  applying it twice.
- Before such a retry a write reads its resource's revision. A receipt whose revision is at
  most one seen before the retry was sent belongs to an application that happened earlier:
  the call reports `recovered: true`. A transition reads the handoff's status first anyway
  (for the claim and expected revision), and the same rule applies to the revision it read,
  so re-running an accept or return whose answer was lost reports `recovered: true` too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import Any, Generic, NamedTuple, TypedDict, TypeVar, Unpack
from urllib.parse import quote, urlencode

from aidememo.client import models as m
from aidememo.client.errors import INVALID_RESPONSE, AidememoClientError, AidememoUnreachable
from aidememo.client.records import Record, RecordError
from aidememo.client.ulid import new_ulid
from aidememo.domain import command_ids as ids
from aidememo.domain.errors import AidememoError, ErrorCode, fail

T = TypeVar("T")
Y = TypeVar("Y")
M = TypeVar("M", bound=Record)


class Call(NamedTuple, Generic[M]):
    """One HTTP exchange: `target` is the path and query under the base URL; `body` the
    exact bytes sent (kept, so a retry sends the identical body); `model` parses a 2xx."""

    method: str
    target: str
    model: type[M]
    body: bytes | None = None


Plan = Generator[Call[Any], Any, T]


class Context:
    """What every plan of one client shares: the project, the retry budget and the caller's
    identity once read (`GET /identity`, needed for the derived ids of transitions)."""

    def __init__(self, project_id: str, retries: int = 1) -> None:
        self.project_id = project_id
        self.retries = retries
        self.identity: m.Identity | None = None

    @property
    def base(self) -> str:
        return f"/v1/projects/{segment(self.project_id)}"


def segment(value: str) -> str:
    """A path segment: identifier characters (ID-1) stay as they are, anything else is
    percent-encoded so it cannot change the route."""
    return quote(value, safe=":@")


def target(path: str, **query: str | int | bool | None) -> str:
    """`path` with the query parameters that are not None."""
    pairs = [
        (key, ("true" if value else "false") if isinstance(value, bool) else str(value))
        for key, value in query.items()
        if value is not None
    ]
    return f"{path}?{urlencode(pairs, quote_via=quote)}" if pairs else path


def get(path: str, model: type[M], **query: str | int | bool | None) -> Call[M]:
    return Call("GET", target(path, **query), model)


def post(path: str, body: dict[str, Any]) -> Call[m.Receipt]:
    """A command: its body encoded once, as UTF-8 JSON (no NaN, no lone surrogates)."""
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        data = text.encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise fail(ErrorCode.INVALID_COMMAND, f"the body cannot be sent as JSON: {exc}") from None
    return Call("POST", path, m.Receipt, data)


# -- answers --------------------------------------------------------------------------------


REPLAYED_HEADER = "aidememo-replayed"


def parse(call: Call[M], status: int, content: bytes, replayed: str | None = None) -> M:
    """A 2xx answer as the call's model (a receipt knowing whether the server replayed it,
    `replayed` being the `aidememo-replayed` header, CMD-7); anything else as
    `AidememoClientError`."""
    if 200 <= status < 300:
        try:
            answer = call.model.model_validate_json(content)
            if replayed == "true" and isinstance(answer, m.Receipt):
                object.__setattr__(answer, "_replayed", True)
            return answer
        except RecordError as exc:
            name = call.model.__name__
            raise AidememoClientError(
                INVALID_RESPONSE, f"the answer is not a {name}: {exc}", status
            ) from None
    raise refusal(status, content)


def refusal(status: int, content: bytes) -> AidememoClientError:
    """The server's `{"error": {"code", "message"}}` (ERR-1), or `invalid_response`."""
    try:
        error = json.loads(content)["error"]
        code, message = error["code"], error["message"]
    except (ValueError, KeyError, TypeError):
        return AidememoClientError(INVALID_RESPONSE, f"HTTP {status} without an error body", status)
    if not isinstance(code, str) or not isinstance(message, str):
        return AidememoClientError(
            INVALID_RESPONSE, f"HTTP {status} with a malformed error", status
        )
    return AidememoClientError(code, message, status)


# -- reads ----------------------------------------------------------------------------------


class Run(Generic[Y, T]):
    """A plan being run by a client: `step` is what it yields next (None once it returned
    `result`); `answer` and `refuse` hand back what carrying that step out gave. An id or
    value the plan refuses before anything is sent (`AidememoError`) is raised as the
    client's `AidememoClientError`."""

    def __init__(self, plan: Generator[Y, Any, T]) -> None:
        self._plan = plan
        self.step: Y | None = None
        self.result: T
        self._resume(plan.send, None)

    def answer(self, value: Any) -> None:
        self._resume(self._plan.send, value)

    def refuse(self, error: AidememoClientError) -> None:
        self._resume(self._plan.throw, error)

    def _resume(self, resume: Callable[[Any], Y], value: Any) -> None:
        try:
            self.step = resume(value)
        except StopIteration as stop:
            self.step, self.result = None, stop.value
        except AidememoError as exc:
            raise AidememoClientError(exc.code.value, exc.message) from None


def fetch(ctx: Context, call: Call[M]) -> Plan[M]:
    """A read, sent again after a retryable transport failure."""
    attempt = 0
    while True:
        try:
            answer: M = yield call
        except AidememoUnreachable as exc:
            if not exc.retryable or attempt >= ctx.retries:
                raise
            attempt += 1
            continue
        return answer


def identity(ctx: Context) -> Plan[m.Identity]:
    """`GET /identity`, kept for the derived ids."""
    ctx.identity = yield from fetch(ctx, get(f"{ctx.base}/identity", m.Identity))
    return ctx.identity


def known_identity(ctx: Context) -> Plan[m.Identity]:
    if ctx.identity is not None:
        return ctx.identity
    return (yield from identity(ctx))


def epoch(ctx: Context, project_epoch: str | None) -> Plan[str]:
    if project_epoch is not None:
        return project_epoch
    return (yield from known_identity(ctx)).project_epoch


def resource_path(ctx: Context, kind: str, resource_id: str) -> str:
    return f"{ctx.base}/resources/{segment(kind)}/{segment(resource_id)}"


def status_call(ctx: Context, handoff_id: str) -> Call[m.HandoffStatus]:
    return get(f"{ctx.base}/handoffs/{segment(handoff_id)}", m.HandoffStatus)


def changes(
    ctx: Context,
    path: str,
    model: type[M],
    after_seq: int,
    limit: int | None,
    project_epoch: str | None,
) -> Plan[M]:
    """`GET .../changes` or `.../changes/materialized`, the epoch the project's unless given."""
    cursor_epoch = yield from epoch(ctx, project_epoch)
    call = get(
        f"{ctx.base}/{path}", model, project_epoch=cursor_epoch, after_seq=after_seq, limit=limit
    )
    return (yield from fetch(ctx, call))


class MailboxQuery(TypedDict, total=False):
    """The filters of `inbox` and `outbox` (MBX-1, MBX-2); each left out unless given."""

    source_id: str | None
    include_completed: bool | None
    before_seq: int | None
    limit: int | None


def mailbox(ctx: Context, box: str, query: MailboxQuery) -> Call[m.Mailbox]:
    return get(f"{ctx.base}/handoffs", m.Mailbox, box=box, **query)


def send_payload(
    handoff_id: str,
    session_id: str,
    to_actor: str,
    focus: str | None,
    done_when: str | None,
    context_id: str | None,
) -> dict[str, Any]:
    """The payload of `handoff.send` (the CLI queues it as the client would send it)."""
    fields = {"session_id": session_id, "to_actor": to_actor}
    options = {"focus": focus, "done_when": done_when, "context_id": context_id}
    return _create_payload(HANDOFF, handoff_id, fields, options)


def check_page(first: m.Snapshot, page: m.Snapshot) -> None:
    """A later page of one walk is the state at the first page's `at_seq`."""
    if page.at_seq != first.at_seq:
        raise AidememoClientError(
            INVALID_RESPONSE, f"snapshot page at seq {page.at_seq}, not {first.at_seq}"
        )


# -- writes ---------------------------------------------------------------------------------


def _revision_now(ctx: Context, kind: str, resource_id: str) -> Plan[int | None]:
    """The resource's current revision (0: never written), or None when it cannot be read."""
    try:
        found: m.Resource = yield get(resource_path(ctx, kind, resource_id), m.Resource)
    except AidememoClientError as exc:
        return 0 if exc.code == ErrorCode.RESOURCE_NOT_FOUND.value else None
    return found.revision


def write(
    ctx: Context, call: Call[m.Receipt], kind: str, resource_id: str, seen: int | None = None
) -> Plan[m.Written]:
    """A command, retried identically after a transport failure (CLIENT-1); `recovered`
    when the receipt's revision is at most one seen before the send that returned it
    (`seen`: a revision the caller read before the first send) (CLIENT-2)."""
    attempt = 0
    while True:
        try:
            receipt: m.Receipt = yield call
        except AidememoUnreachable as exc:
            if not exc.retryable or attempt >= ctx.retries:
                raise
            attempt += 1
            revision = yield from _revision_now(ctx, kind, resource_id)
            if revision is not None:
                seen = revision if seen is None else max(seen, revision)
            continue
        recovered = receipt.replayed or (seen is not None and receipt.revision <= seen)
        return m.Written(receipt=receipt, recovered=recovered)


def _takes_only(given: Mapping[str, Any], keywords: Iterable[str]) -> None:
    """A keyword a method does not take is refused as Python refuses one, before anything
    is sent (its keywords are a TypedDict, which only a type checker enforces)."""
    unknown = sorted(set(given).difference(keywords))
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")


class CreateRoute(NamedTuple):
    """A typed create: its path under the project, the kind it creates, the payload's id
    field and its optional payload fields, in payload order."""

    path: str
    kind: str
    id_field: str
    options: tuple[str, ...] = ()


SESSION = CreateRoute("sessions", "session", "session_id", ("source_id",))
FACT = CreateRoute("facts", "fact", "fact_id")
CONTEXT = CreateRoute("handoff-contexts", "handoff_context", "context_id")
HANDOFF = CreateRoute("handoffs", "handoff", "handoff_id", ("focus", "done_when", "context_id"))


class CommandPin(TypedDict, total=False):
    """The command id a write may fix instead of leaving it to the client (a create's is
    derived from its resource id, ID-4; a raw command's is a new ULID)."""

    command_id: str | None


class SessionOptions(CommandPin, total=False):
    """`create_session`'s keywords: the session id (a ULID unless given) and source."""

    session_id: str | None
    source_id: str | None


class FactOptions(CommandPin, total=False):
    """`create_fact`'s keywords: the fact id (a ULID unless given)."""

    fact_id: str | None


class ContextOptions(CommandPin, total=False):
    """`create_context`'s keywords: the context id (a ULID unless given)."""

    context_id: str | None


class HandoffOptions(CommandPin, total=False):
    """`send_handoff`'s keywords: what the receiver should do, the context packet sent
    before, and the handoff id (a ULID unless given)."""

    focus: str | None
    done_when: str | None
    context_id: str | None
    handoff_id: str | None


def _create_payload(
    route: CreateRoute, resource_id: str, fields: dict[str, Any], options: Mapping[str, Any]
) -> dict[str, Any]:
    """The id, then `fields`, then the route's options that are given (not None)."""
    given = {key: options[key] for key in route.options if options.get(key) is not None}
    return {route.id_field: resource_id, **fields, **given}


def create(
    ctx: Context, route: CreateRoute, fields: dict[str, Any], options: Mapping[str, Any]
) -> Plan[m.Written]:
    """A typed create of `fields` and the `options` given: its id the one in `options` or a
    new ULID, its command id derived from that id unless given (ID-4)."""
    _takes_only(options, (route.id_field, "command_id", *route.options))
    resource_id = options.get(route.id_field) or new_ulid()
    payload = _create_payload(route, resource_id, fields, options)
    cid = options.get("command_id") or ids.create_command_id(
        ctx.project_id, route.kind, resource_id
    )
    call = post(f"{ctx.base}/{route.path}", {"command_id": cid, "payload": payload})
    return (yield from write(ctx, call, route.kind, resource_id))


class Pin(CommandPin, total=False):
    """A `CommandPin` and the revision the write expects."""

    expected_revision: int | None


class ClaimPin(Pin, total=False):
    """A transition's `Pin` and the claim it acts under."""

    claim_id: str | None


class ReturnPin(ClaimPin, total=False):
    """A return's `ClaimPin` and the artifact holding its result (HO-9)."""

    result_artifact_id: str | None


def raw(
    ctx: Context,
    kind: str,
    resource_id: str,
    payload: dict[str, Any] | None,
    expected_revision: int | None = None,
    command_id: str | None = None,
) -> Plan[m.Written]:
    """`POST /v1/commands`: a put (payload) or delete (None) of a `custom.*` resource. No
    derivation covers these, so an omitted command id is a fresh ULID, kept for the retry."""
    put = payload is not None
    body = {
        "command_id": command_id or new_ulid(),
        "project_id": ctx.project_id,
        "expected_revision": expected_revision,
        "operation": "resource.put" if put else "resource.delete",
        "resource": {"kind": kind, "id": resource_id},
        "change": "upsert" if put else "delete",
        "payload": payload,
    }
    return (yield from write(ctx, post("/v1/commands", body), kind, resource_id))


def _transition(
    ctx: Context,
    handoff_id: str,
    kind: str,
    command_id: str,
    expected_revision: int,
    payload: dict[str, Any],
    seen: int | None,
) -> Plan[m.Transition]:
    body = {"command_id": command_id, "expected_revision": expected_revision, "payload": payload}
    call = post(f"{ctx.base}/handoffs/{segment(handoff_id)}/{kind}", body)
    done = yield from write(ctx, call, "handoff", handoff_id, seen)
    return m.Transition(
        receipt=done.receipt, recovered=done.recovered, claim_id=payload["claim_id"]
    )


def _no_claim(handoff_id: str) -> AidememoClientError:
    return AidememoClientError(
        ErrorCode.HANDOFF_CONFLICT.value, f"handoff {handoff_id} holds no claim"
    )


def accept(ctx: Context, handoff_id: str, **pin: Unpack[ClaimPin]) -> Plan[m.Transition]:
    """Claim a handoff. Without `claim_id` the claim is derived from the attempt (ID-4): the
    current one when the caller's derived claim already holds a live lease (a re-run: the
    original accept is replayed, `recovered`), else the next attempt's."""
    _takes_only(pin, ClaimPin.__optional_keys__)
    me = (yield from known_identity(ctx)).actor_id
    claim_id, expected_revision = pin.get("claim_id"), pin.get("expected_revision")
    seen = None
    if claim_id is None or expected_revision is None:
        status: m.HandoffStatus = yield from fetch(ctx, status_call(ctx, handoff_id))
        rec, seen = status.record, status.revision
        if claim_id is None:
            held = (
                rec.status == "accepted"
                and rec.outcome is None
                and status.lease_state == "live"
                and rec.attempt_count >= 1
                and rec.claim_id == ids.claim_id(ctx.project_id, me, handoff_id, rec.attempt_count)
            )
            attempt = rec.attempt_count if held else rec.attempt_count + 1
            claim_id = ids.claim_id(ctx.project_id, me, handoff_id, attempt)
        if expected_revision is None:
            again = rec.status == "accepted" and rec.outcome is None and rec.claim_id == claim_id
            expected_revision = status.revision - 1 if again else status.revision
    cid = pin.get("command_id") or ids.accept_command_id(ctx.project_id, me, handoff_id, claim_id)
    payload = {"claim_id": claim_id}
    return (
        yield from _transition(ctx, handoff_id, "accept", cid, expected_revision, payload, seen)
    )


def _held_claim(
    ctx: Context, handoff_id: str, claim_id: str | None
) -> Plan[tuple[m.HandoffStatus, str]]:
    """The handoff's status and the claim to act under: `claim_id`, else its current one."""
    status: m.HandoffStatus = yield from fetch(ctx, status_call(ctx, handoff_id))
    claim = claim_id or status.record.claim_id
    if claim is None:
        raise _no_claim(handoff_id)
    return status, claim


def heartbeat(ctx: Context, handoff_id: str, **pin: Unpack[ClaimPin]) -> Plan[m.Transition]:
    """Renew the lease of `claim_id` (default: the handoff's current claim)."""
    _takes_only(pin, ClaimPin.__optional_keys__)
    me = (yield from known_identity(ctx)).actor_id
    claim_id, expected_revision = pin.get("claim_id"), pin.get("expected_revision")
    seen = None
    if claim_id is None or expected_revision is None:
        status, claim_id = yield from _held_claim(ctx, handoff_id, claim_id)
        seen = status.revision
        expected_revision = expected_revision or status.revision
    cid = pin.get("command_id") or ids.heartbeat_command_id(
        ctx.project_id, me, handoff_id, claim_id, expected_revision
    )
    payload = {"claim_id": claim_id}
    return (
        yield from _transition(ctx, handoff_id, "heartbeat", cid, expected_revision, payload, seen)
    )


def return_handoff(
    ctx: Context, handoff_id: str, result_fact_id: str, outcome: str, **pin: Unpack[ReturnPin]
) -> Plan[m.Transition]:
    """Return the handoff with this evidence under `claim_id` (default: the current claim),
    naming `result_artifact_id` when given (HO-9). When the handoff already carries exactly
    this return, the original is replayed."""
    _takes_only(pin, ReturnPin.__optional_keys__)
    me = (yield from known_identity(ctx)).actor_id
    claim_id, expected_revision = pin.get("claim_id"), pin.get("expected_revision")
    result_artifact_id = pin.get("result_artifact_id")
    seen = None
    if claim_id is None or expected_revision is None:
        status, claim_id = yield from _held_claim(ctx, handoff_id, claim_id)
        rec, seen = status.record, status.revision
        if expected_revision is None:
            again = (rec.claim_id, rec.result_fact_id, rec.outcome, rec.result_artifact_id) == (
                claim_id,
                result_fact_id,
                outcome,
                result_artifact_id,
            )
            expected_revision = status.revision - 1 if again else status.revision
    cid = pin.get("command_id") or ids.return_command_id(
        ctx.project_id, me, handoff_id, claim_id, result_fact_id, outcome, result_artifact_id
    )
    payload = {"claim_id": claim_id, "result_fact_id": result_fact_id, "outcome": outcome}
    if result_artifact_id is not None:
        payload["result_artifact_id"] = result_artifact_id
    return (
        yield from _transition(ctx, handoff_id, "return", cid, expected_revision, payload, seen)
    )
