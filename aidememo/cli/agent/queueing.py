"""`session new`, `fact add` and `handoff send` with a durable outbox, and `aidememo outbox
list|publish|drop` (SPEC.md OUTBOX-1..6).

Each of the three commands builds its request once (ids fixed: the caller's or new ULIDs, the
command id derived by ID-4) and sends it through `aidememo.client` (one identical retry after
a transport failure, CLIENT-1). When no answer came back, or the answer was 502, 503 or 504
(a gateway or the server saying it could not serve it: the command may or may not have been
committed), the exact request is stored in the profile's outbox (`$AIDEMEMO_HOME/outbox/
PROFILE.sqlite`, `aidememo.client.outbox`) and the command prints `queued: true,
dispatched: false` with its ids, exit 0; `--no-queue` exits 3 instead. The same operation run
again while it is queued is not sent: it reports the queued item. Only `outbox publish` sends
queued items.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aidememo.cli.agent import profiles
from aidememo.cli.agent.connect import agent_command, connected
from aidememo.cli.errors import EXIT_FAILED, EXIT_UNREACHABLE, CliError
from aidememo.cli.options import PROG
from aidememo.cli.render import clip, emit, table, write_line
from aidememo.cli.stores import data_home
from aidememo.client import AidememoClientError, AidememoUnreachable, Client, Written, new_ulid
from aidememo.client import plans as p
from aidememo.client.outbox import CONFLICT, FAILED, QUEUED, Item, Outbox, Request, intent_key
from aidememo.domain import command_ids

OUTBOX_DIR = "outbox"
GATEWAY_STATUSES = (502, 503, 504)
ID_FIELDS = {"session": "session_id", "fact": "fact_id", "handoff": "handoff_id"}


def outbox_path(profile_name: str) -> Path:
    return data_home() / OUTBOX_DIR / f"{profile_name}.sqlite"


def binding(profile: profiles.Profile) -> dict[str, str]:
    """What an item is bound to: the profile's server, tenant, project and actor."""
    return {
        "url": profile.url,
        "tenant_id": profile.tenant_id,
        "project_id": profile.project_id,
        "actor_id": profile.actor_id,
    }


def undelivered(error: AidememoClientError) -> bool:
    """No answer, or a gateway's: the command may or may not have been committed."""
    return isinstance(error, AidememoUnreachable) or error.status in GATEWAY_STATUSES


def build(
    profile: profiles.Profile,
    command: str,
    kind: str,
    path: str,
    payload: dict[str, Any],
    inputs: dict[str, Any],
) -> Request:
    """The request of a typed create, its command id derived from the resource id (ID-4)."""
    resource_id = payload[ID_FIELDS[kind]]
    cid = command_ids.create_command_id(profile.project_id, kind, resource_id)
    call = p.post(f"/v1/projects/{p.segment(profile.project_id)}/{path}", {
        "command_id": cid, "payload": payload,
    })  # fmt: skip
    assert call.body is not None
    return Request(
        command=command,
        kind=kind,
        resource_id=resource_id,
        command_id=cid,
        target=call.target,
        body=call.body,
        ids={ID_FIELDS[kind]: resource_id, "command_id": cid},
        intent=intent_key(binding(profile), command, inputs),
    )


def session_request(profile: profiles.Profile, ns: argparse.Namespace) -> Request:
    inputs = {"topic": ns.topic, "session_id": ns.id, "source_id": ns.source}
    payload: dict[str, Any] = {"session_id": ns.id or new_ulid(), "topic": ns.topic}
    if ns.source is not None:
        payload["source_id"] = ns.source
    return build(profile, "session new", "session", "sessions", payload, inputs)


def fact_request(profile: profiles.Profile, ns: argparse.Namespace, content: str) -> Request:
    inputs = {"session_id": ns.session, "content": content, "fact_id": ns.id}
    payload = {"fact_id": ns.id or new_ulid(), "session_id": ns.session, "content": content}
    return build(profile, "fact add", "fact", "facts", payload, inputs)


def send_request(profile: profiles.Profile, ns: argparse.Namespace) -> Request:
    inputs = {
        "session_id": ns.session,
        "to_actor": ns.to,
        "focus": ns.focus,
        "done_when": ns.done_when,
        "context_id": ns.context,
        "handoff_id": ns.id,
    }
    payload = p.send_payload(
        ns.id or new_ulid(), ns.session, ns.to, ns.focus, ns.done_when, ns.context
    )
    return build(profile, "handoff send", "handoff", "handoffs", payload, inputs)


def deliver_and_report(
    ns: argparse.Namespace,
    build: Callable[[profiles.Profile], Request],
    what: str,
    after_id: str = "",
) -> int:
    """Send or queue (OUTBOX-1) the request `build` makes for the profile, and report it: the
    receipt as `<what> <id><after_id> (seq N)`, noting a replay, or the queued outcome."""
    with connected(ns) as (profile, client):
        done = deliver(ns, profile, client, build(profile))
    if isinstance(done, int):  # queued: `deliver` printed the outcome
        return done
    note = " (already there: replayed)" if done.recovered else ""
    return emit(ns, done, f"{what} {done.id}{after_id} (seq {done.receipt.project_seq}){note}")


def _queued(ns: argparse.Namespace, item: Item, reason: str, again: bool) -> int:
    note = "already queued, nothing sent" if again else reason
    document = {
        "queued": True,
        "dispatched": False,
        "item": item.item,
        "command": item.command,
        **item.ids,
        "reason": note,
    }
    human = [
        f"queued: true, dispatched: false ({note})",
        f"  outbox item {item.item}: {item.command} {item.resource_id} "
        f"(command_id {item.command_id})",
        f"  nothing is sent until: {PROG} outbox publish --profile {ns.profile}",
    ]
    return emit(ns, document, human)


def deliver(
    ns: argparse.Namespace,
    profile: profiles.Profile,
    client: Client,
    request: Request,
) -> Written | int:
    """Send `request`, or queue it (OUTBOX-1); the receipt, or the exit status once the
    queued outcome was printed."""
    path = outbox_path(profile.name)
    if path.exists():
        with Outbox(path) as box:
            pending = box.pending(request)
        if pending is not None:
            if pending.state != QUEUED:
                raise CliError(
                    f"{pending.command} {pending.resource_id} is held in the outbox as item "
                    f"{pending.item} ({pending.state}: {pending.last_error}); nothing was sent. "
                    f"Drop it first: {PROG} outbox drop {pending.item} --profile {profile.name}"
                )
            if pending.intent == request.intent:
                return _queued(ns, pending, "", again=True)
            raise CliError(
                f"{pending.command} {pending.resource_id} is queued as outbox item "
                f"{pending.item} with another request; nothing was sent. Publish or drop it "
                f"first: {PROG} outbox publish|drop --profile {profile.name}"
            )
    try:
        return client.send_recorded(request.target, request.body, request.kind, request.resource_id)
    except AidememoClientError as error:
        if not undelivered(error):
            raise
        reason = _reason(error)
        if getattr(ns, "no_queue", False):
            detail = error.message if isinstance(error, AidememoUnreachable) else reason
            raise CliError(
                f"cannot reach the server: {detail}; not queued (--no-queue), so it may or "
                "may not have been applied: run it again to find out (unreachable)",
                EXIT_UNREACHABLE,
            ) from None
        with Outbox(path) as box:
            item = box.add(binding(profile), request, f"{error}")
        return _queued(ns, item, reason, again=False)


def _reason(error: AidememoClientError) -> str:
    if isinstance(error, AidememoUnreachable):
        return "the server could not be reached"
    return f"the server answered {error.status}: {error.message}"


# -- aidememo outbox ----------------------------------------------------------------------------


def _box(ns: argparse.Namespace) -> tuple[profiles.Profile, Outbox]:
    profile = profiles.get(ns.profile)
    return profile, Outbox(outbox_path(profile.name))


def cmd_outbox_list(ns: argparse.Namespace) -> int:
    profile, box = _box(ns)
    with box:
        items = box.items()
    rows = [
        [
            str(i.item), i.state, i.command, f"{i.kind}/{i.resource_id}", i.command_id,
            clip(i.last_error if i.state != QUEUED else "", 50),
        ]
        for i in items
    ]  # fmt: skip
    lines = table(["ITEM", "STATE", "COMMAND", "RESOURCE", "COMMAND ID", "ERROR"], rows,
                  f"the outbox of {profile.name} is empty")  # fmt: skip
    if items:
        lines.append(f"{len(items)} item{'s' if len(items) != 1 else ''} in the outbox")
    document = {
        "profile": profile.name,
        "count": len(items),
        "items": [i.document() for i in items],
    }
    return emit(ns, document, lines)


def cmd_outbox_drop(ns: argparse.Namespace) -> int:
    profile, box = _box(ns)
    with box:
        item = box.find(ns.item)
        if item is None or not box.remove(ns.item):
            raise CliError(f"the outbox of {profile.name} has no item {ns.item}")
    document = {"dropped": True, **item.document()}
    return emit(ns, document, f"dropped outbox item {item.item}: {item.command} "
                f"{item.resource_id} (never published by this outbox)")  # fmt: skip


@agent_command
def cmd_outbox_publish(ns: argparse.Namespace) -> int:
    with connected(ns) as (profile, client):
        with Outbox(outbox_path(profile.name)) as box:
            return publish_items(ns, profile, client, box)


def publish_items(
    ns: argparse.Namespace, profile: profiles.Profile, client: Client, box: Outbox
) -> int:
    """Send every queued item in order with its recorded bytes (OUTBOX-3, OUTBOX-5)."""
    results: list[dict[str, Any]] = []
    published = failed = conflicts = 0
    unreachable = False
    items = box.items()
    held = [i for i in items if i.state != QUEUED]
    queued = [i for i in items if i.state == QUEUED]
    bound = binding(profile)
    for index, item in enumerate(queued):
        what = f"item {item.item}: {item.command} {item.resource_id}"
        problem = item.problem(bound)
        if problem is not None:
            box.mark(item.item, FAILED, problem)
            failed += 1
            results.append({"item": item.item, "result": "failed", "error": problem})
            _say(ns, f"failed {what}: {problem}; nothing was sent (drop it)")
            continue
        try:
            done = client.send_recorded(
                item.target, item.body, item.kind, item.resource_id, seen=None
            )
        except AidememoClientError as error:
            if undelivered(error):
                box.mark(item.item, QUEUED, str(error))
                rest = len(queued) - index
                failed += rest
                unreachable = True
                results.append({"item": item.item, "result": "failed", "error": str(error)})
                _say(ns, f"failed {what}: {_reason(error)}; it and {rest - 1} later item(s) "
                     "stay queued")  # fmt: skip
                break
            state = CONFLICT if error.status == 409 else FAILED
            box.mark(item.item, state, f"{error.message} ({error.code})")
            if state == CONFLICT:
                conflicts += 1
            else:
                failed += 1
            results.append({"item": item.item, "result": state, "error": error.code})
            _say(ns, f"{state} {what}: {error.message} ({error.code}); left in the outbox")
            continue
        box.remove(item.item)
        published += 1
        results.append(
            {"item": item.item, "result": "recovered" if done.recovered else "published",
             "receipt": done.receipt.model_dump(mode="json"), **item.ids}
        )  # fmt: skip
        note = " (recovered: it had already been committed)" if done.recovered else ""
        _say(ns, f"published {what} at seq {done.receipt.project_seq}{note}")
    for item in held:
        drop = f"{PROG} outbox drop {item.item} --profile {profile.name}"
        _say(ns, f"held item {item.item}: {item.command} {item.resource_id} "
             f"({item.state}: {item.last_error}); {drop}")  # fmt: skip
    summary = f"published {published}, failed {failed}, conflicts {conflicts}"
    document = {
        "published": published,
        "failed": failed,
        "conflicts": conflicts,
        "held": [i.item for i in held],
        "items": results,
        "summary": summary,
    }
    emit(ns, document, summary)
    if unreachable:
        return EXIT_UNREACHABLE
    return EXIT_FAILED if failed or conflicts else 0


def _say(ns: argparse.Namespace, line: str) -> None:
    if not ns.json:
        write_line(line)
