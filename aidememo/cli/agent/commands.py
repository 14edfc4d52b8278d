"""The agent commands but `auth` and `handoff`: sessions, facts, search, resources, members,
the change feed and the live feed (SPEC.md CLI-2).

Each runs as the profile's member through `aidememo.client` (`aidememo.cli.agent.connect`) and
prints through `aidememo.cli.render`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from aidememo.cli.agent.connect import agent_command, connected
from aidememo.cli.agent.live_feed import bearer_header, feed_url, refused_upgrade
from aidememo.cli.agent.queueing import deliver_and_report, fact_request, session_request
from aidememo.cli.errors import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE, CliError
from aidememo.cli.render import clip, emit, json_line, table, when, write_line
from aidememo.client import ChangeEntry, MaterializedBatch

STDIN_MAX_BYTES = 65_536 + 2  # the content limit (ID-3), plus a trailing newline to strip


@agent_command
def cmd_session_new(ns: argparse.Namespace) -> int:
    return deliver_and_report(ns, lambda profile: session_request(profile, ns), "created session")


@agent_command
def cmd_session_list(ns: argparse.Namespace) -> int:
    with connected(ns) as (_, client):
        page = client.sessions(source_id=ns.source, before_seq=ns.before_seq, limit=ns.limit)
    rows = [
        [
            str(s.project_seq),
            s.record.session_id,
            s.record.source_id,
            s.record.created_by,
            clip(s.record.topic),
        ]
        for s in page.sessions
    ]
    lines = table(["SEQ", "SESSION", "SOURCE", "BY", "TOPIC"], rows, "no sessions")
    if page.next_before_seq is not None:
        lines.append(f"more: --before-seq {page.next_before_seq}")
    return emit(ns, page, lines)


def _content(ns: argparse.Namespace) -> str:
    """The fact's text: the argument, or stdin when it is absent or `-`."""
    if ns.content is not None and ns.content != "-":
        text: str = ns.content
        return text
    if sys.stdin.isatty():
        raise CliError("give the fact as an argument or on stdin", EXIT_USAGE)
    data = sys.stdin.buffer.read(STDIN_MAX_BYTES + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CliError("the fact on stdin is not UTF-8 text", EXIT_USAGE) from None
    if text.endswith("\n"):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    return text


@agent_command
def cmd_fact_add(ns: argparse.Namespace) -> int:
    content = _content(ns)
    return deliver_and_report(ns, lambda profile: fact_request(profile, ns, content), "added fact")


@agent_command
def cmd_fact_list(ns: argparse.Namespace) -> int:
    with connected(ns) as (_, client):
        page = client.session_facts(ns.session, after_seq=ns.after_seq, limit=ns.limit)
    rows = [
        [str(f.project_seq), f.record.fact_id, f.record.actor_id, clip(f.record.content)]
        for f in page.facts
    ]
    lines = table(["SEQ", "FACT", "BY", "CONTENT"], rows, f"no facts in session {ns.session}")
    if page.next_after_seq is not None:
        lines.append(f"more: --after-seq {page.next_after_seq}")
    return emit(ns, page, lines)


@agent_command
def cmd_search(ns: argparse.Namespace) -> int:
    with connected(ns) as (_, client):
        found = client.search(
            ns.query,
            source_id=ns.source,
            limit=ns.limit,
            at_least_seq=ns.at_least_seq,
            mode=ns.mode,
        )
    if ns.explain:  # SEM-1: why each fact was returned
        rows = [
            [f"{r.score:.3g}", _part(r.lexical_score, r.lexical_rank),
             _part(r.semantic_score, r.semantic_rank), r.fact_id, clip(r.content)]
            for r in found.results
        ]  # fmt: skip
        header = ["SCORE", "LEXICAL", "SEMANTIC", "FACT", "CONTENT"]
        lines = table(header, rows, "no matching facts")
    else:
        rows = [
            [f"{r.score:.3g}", r.fact_id, r.session_id, r.actor_id, clip(r.content)]
            for r in found.results
        ]
        lines = table(["SCORE", "FACT", "SESSION", "BY", "CONTENT"], rows, "no matching facts")
    lines.append(_search_footer(found))
    return emit(ns, found, lines)


def _part(score: float | None, rank: int | None) -> str:
    return "-" if score is None or rank is None else f"{score:.3g} #{rank}"


def _search_footer(found: Any) -> str:
    """What ran and how current it is (SEM-1, SEM-5)."""
    line = f"{found.mode} search, index at seq {found.index_seq}"
    if found.semantic_model is not None:
        m = found.semantic_model
        line += f", model {m.provider}/{m.model}@{m.revision}"
    if found.semantic_lag:
        line += f", {found.semantic_lag} behind the head"
    if found.fallback_reason:
        line += f" ({found.fallback_reason})"
    return line


@agent_command
def cmd_get(ns: argparse.Namespace) -> int:
    with connected(ns) as (_, client):
        found = client.get_resource(ns.kind, ns.resource_id)
    head = f"{found.resource.kind}/{found.resource.id} revision {found.revision}"
    if found.state.state == "deleted":
        return emit(ns, found, f"{head}: deleted")
    body = json.dumps(found.body, ensure_ascii=False, indent=2)
    return emit(ns, found, [head, body])


@agent_command
def cmd_members(ns: argparse.Namespace) -> int:
    with connected(ns) as (profile, client):
        found = client.members()
    rows = [
        [
            m.actor_id + (" (you)" if m.actor_id == profile.actor_id else ""),
            m.kind,
            m.role,
            m.status,
        ]
        for m in found.members
    ]
    return emit(ns, found, table(["ACTOR", "KIND", "ROLE", "STATUS"], rows, "no members"))


def _entry_line(entry: ChangeEntry) -> str:
    return (
        f"seq {entry.seq}  {entry.operation} {entry.resource.kind}/{entry.resource.id} "
        f"r{entry.revision} by {entry.actor_id} at {when(entry.committed_at_ms)}"
    )


@agent_command
def cmd_changes(ns: argparse.Namespace) -> int:
    with connected(ns) as (_, client):
        batch = client.changes(ns.after_seq, limit=ns.limit)
    lines = [_entry_line(e) for e in batch.entries] or [f"no changes after seq {ns.after_seq}"]
    more = " (more changes)" if batch.has_more else ""
    lines.append(f"next: --after-seq {batch.next_cursor.after_seq}{more}")
    return emit(ns, batch, lines)


# -- watch ------------------------------------------------------------------------------------


def _print_message(ns: argparse.Namespace, document: dict[str, Any]) -> int | None:
    """Print one live-feed message; the cursor it advances to, when it is a batch."""
    if ns.json:
        json_line(document)
    if "error" in document:
        return None
    if document.get("type") == "lease_expired":
        if not ns.json:
            write_line(
                f"lease expired: handoff {document.get('handoff_id')} "
                f"claim {document.get('claim_id')}"
            )
        return None
    batch = MaterializedBatch.model_validate(document)
    if not ns.json:
        for entry in batch.entries:
            write_line(_watch_line(entry.change, entry.resource.body))
    return batch.next_cursor.after_seq


def _watch_line(entry: ChangeEntry, body: Any) -> str:
    """A live entry with what it says: a fact's or context's content, a session's topic, a
    handoff's route, status and focus (each clipped to one short line)."""
    head = (
        f"seq {entry.seq}  {entry.operation} {entry.resource.kind}/{entry.resource.id} "
        f"r{entry.revision} by {entry.actor_id}"
    )
    if entry.operation == "delete" or not isinstance(body, dict):
        return head
    kind = entry.resource.kind
    if kind == "handoff":
        route = f"{body.get('from_actor')} -> {body.get('to_actor')} {body.get('status')}"
        focus = body.get("focus")
        return f"{head}: {route}" + (f", focus: {clip(focus)}" if focus else "")
    text = body.get("topic") if kind == "session" else body.get("content")
    if text is None and kind.startswith("custom."):
        text = json.dumps(body, ensure_ascii=False, sort_keys=True)
    return f"{head}: {clip(text)}" if isinstance(text, str) else head


@agent_command
def cmd_watch(ns: argparse.Namespace) -> int:
    """Subscribe to the live feed and print every batch as it arrives, until interrupted or
    the server closes; a lost connection is exit 3 naming the cursor to resume from. It
    starts after `--after-seq` (default 0), at `--since SEQ` (inclusive) or, with
    `--from-now`, after the project's current sequence (CLI-6)."""
    try:
        from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI
        from websockets.sync.client import connect
    except ImportError:
        raise CliError(
            "aidememo watch needs the websockets package: pip install websockets", EXIT_USAGE
        ) from None
    with connected(ns) as (profile, client):
        epoch = client.identity().project_epoch
        headers = bearer_header(profile)
        if ns.from_now:
            cursor = client.snapshot(limit=1).at_seq
        elif ns.since is not None:
            cursor = ns.since - 1  # --since is inclusive, the cursor exclusive
        else:
            cursor = int(ns.after_seq)
    url = feed_url(profile, epoch, cursor)
    try:
        socket = connect(url, additional_headers=headers, open_timeout=30, max_size=None)
    except InvalidStatus as exc:
        raise CliError(refused_upgrade(exc.response.status_code, exc.response.body)) from None
    except (OSError, TimeoutError, InvalidURI) as exc:
        raise CliError(f"cannot reach the server: {exc} (unreachable)", EXIT_UNREACHABLE) from None
    if not ns.json:
        write_line(f"watching {profile.tenant_id}/{profile.project_id} after seq {cursor}")
    with socket:
        try:
            for text in socket:
                document = json.loads(text)
                if "error" in document:
                    error = document["error"]
                    raise CliError(f"the live feed closed: {error['message']} ({error['code']})")
                advanced = _print_message(ns, document)
                if advanced is not None:
                    cursor = advanced
        except ConnectionClosed as exc:
            raise CliError(
                f"the live feed was lost ({exc}); resume with --after-seq {cursor} (unreachable)",
                EXIT_UNREACHABLE,
            ) from None
    raise CliError(
        f"the server closed the live feed; resume with --after-seq {cursor}", EXIT_FAILED
    )
