"""The handlers behind `aidememo memory ...` (SPEC.md MEM-12): one function per command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from aidememo.agent_memory import governance, paths
from aidememo.agent_memory.capture import capture_json
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.jstext import js_json
from aidememo.agent_memory.model import UNSET, Event, Memory, Relation
from aidememo.agent_memory.open_checks import StoreDamage, damaged
from aidememo.agent_memory.relations import relations_batch
from aidememo.agent_memory.render import (
    escape_controls,
    inline,
    relation_markers,
    untrusted_json,
)
from aidememo.agent_memory.store import AgentMemory
from aidememo.agent_memory.transfer import export_markdown
from aidememo.cli.errors import CliError
from aidememo.cli.memory.init import cmd_init
from aidememo.cli.memory.maint import MAINTENANCE_HANDLERS
from aidememo.cli.memory.publish import cmd_publish
from aidememo.cli.memory.recall import cmd_recall
from aidememo.cli.memory.semantic import cmd_semantic

EXIT_FAILED = 1
EXIT_INTERNAL = 70
ACTOR = "nuzo:cli"


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def _runtime(ns: argparse.Namespace) -> paths.MemoryRuntime:
    return paths.resolve_runtime(store=ns.store, scope=ns.scope)


def dispatch(ns: argparse.Namespace) -> int:
    """Run one memory command: 0, 1 (`CODE: message`), or 70 (internal failure)."""
    handler = HANDLERS[ns.memory_command]
    try:
        if ns.memory_command in ("init", "semantic") or ns.memory_command in MAINTENANCE_HANDLERS:
            return handler(ns, None)
        store = AgentMemory.open_runtime(_runtime(ns))
        try:
            return handler(ns, store)
        finally:
            store.close()
    except AgentMemoryError as error:
        sys.stderr.write(f"{error.code.value}: {error.message}\n")
        return EXIT_FAILED
    except StoreDamage as error:  # the file itself is damaged (MEM-1)
        found = damaged(error, getattr(ns, "store", None) or "the memory store")
        sys.stderr.write(f"{found.code.value}: {found.message}\n")
        return EXIT_FAILED
    except CliError:
        raise  # the agent client's refusals (publish): main prints them, exit 1, 2 or 3
    except Exception:
        sys.stderr.write("NUZO_INTERNAL_ERROR: Unexpected CLI failure.\n")
        return EXIT_INTERNAL


def _draft(ns: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("confidence_state", "review_after", "expires_at"):
        if getattr(ns, name, None) is not None:
            out[name] = getattr(ns, name)
    if hasattr(ns, "provenance_json"):
        out["provenance"] = ns.provenance_json
    return out


def lifecycle_markers(memory: Memory, now: str) -> str:
    marks = []
    if memory.review_after is not None:
        marks.append(
            "needs_review" if memory.review_after <= now else f"review_after={memory.review_after}"
        )
    if memory.expires_at is not None:
        marks.append("expired" if memory.expires_at <= now else f"expires_at={memory.expires_at}")
    return " " + " ".join(marks) if marks else ""


# -- commands ----------------------------------------------------------------------------------


def cmd_remember(ns: argparse.Namespace, store: AgentMemory) -> int:
    draft = _draft(ns)
    memory = store.remember(
        ns.content, kind=ns.kind, tags=ns.tag or [], source=ns.source, actor=ACTOR, **draft
    )
    _out(memory.id)
    return 0


def cmd_suggest_capture(ns: argparse.Namespace, store: AgentMemory) -> int:
    result = capture_json(
        store.suggest_capture(
            ns.content,
            kind=ns.kind,
            reason=ns.reason,
            tags=ns.tag or [],
            source=ns.source,
            confidence=ns.confidence,
            relationship_mode=ns.relationship_mode or "exact",
            **({"confidence_state": "inferred"} | _draft(ns)),
        )
    )
    _out(untrusted_json(result) if ns.json else "\n".join(_suggestion_lines(result)))
    return 0


def _suggestion_lines(result: dict[str, Any]) -> list[str]:
    d = result["draft"]
    lines = [
        f"Status: {inline(result['status'])}",
        "Memory writes: no",
        "Requires confirmation: yes",
        f"Content: {inline(d['content'])}",
        f"Kind: {inline(d['kind'])}",
        f"Scope: {inline(d['scope'])}",
        f"Tags: {', '.join(map(inline, d['tags'])) or 'none'}",
        f"Source: {inline(d['source'])}",
        f"Confidence: {js_json(d['confidence'])}",
        f"Confidence state: {inline(d['confidence_state'] or 'none')}",
        f"Review after: {d['review_after'] or 'none'}",
        f"Expires at: {d['expires_at'] or 'none'}",
        f"Reason: {inline(d['reason'])}",
    ]
    if result["duplicate"] is not None:
        lines.append(f"Duplicate: {inline(result['duplicate']['id'])}")
    if result.get("relationship_mode") == "bounded":
        evidence = result["relationship_evidence"]
        lines += [
            f"Relationship: {inline(result['relationship'])}",
            f"Relationship reason: {inline(evidence['reason'])}",
        ]
        if evidence["primary_memory_id"] is not None:
            lines.append(f"Primary memory: {inline(evidence['primary_memory_id'])}")
    return lines


def cmd_confirm_capture(ns: argparse.Namespace, store: AgentMemory) -> int:
    draft = _draft(ns)
    result = capture_json(
        store.confirm_capture(
            ns.content,
            decision=ns.decision,
            kind=ns.kind,
            reason=ns.reason,
            tags=ns.tag or [],
            source=ns.source,
            confidence=ns.confidence,
            confirm=ns.yes,
            target_memory_id=ns.target_memory_id,
            expected_revision=ns.expected_revision,
            actor=ns.actor,
            **{
                k: draft.get(k, UNSET)
                for k in ("confidence_state", "provenance", "review_after", "expires_at")
            },
        )
    )
    _out(untrusted_json(result) if ns.json else "\n".join(_decision_lines(result)))
    return 0


def _decision_lines(result: dict[str, Any]) -> list[str]:
    lines = [
        f"Decision: {inline(result['decision'])}",
        f"Status: {inline(result['status'])}",
        f"Memory writes: {'yes' if result['memory_writes'] else 'no'}",
        "Requires confirmation: no",
        f"Reason: {inline(result['reason'])}",
    ]
    if result["memory"] is not None:
        lines.append(f"Memory: {inline(result['memory']['id'])}")
    return lines


def cmd_list(ns: argparse.Namespace, store: AgentMemory) -> int:
    if ns.all_scopes and ns.scope is not None:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_CONFLICT, "List --all-scopes cannot be combined with --scope."
        )
    memories = store.list(
        all_scopes=ns.all_scopes,
        tags=ns.tag or [],
        include_archived=ns.include_archived,
        needs_review=ns.needs_review,
    )
    now = store.now()
    batch: dict[str, list[Relation]] = {}
    for start in range(0, len(memories), 200):
        batch |= relations_batch(store, [m.id for m in memories[start : start + 200]])
    for m in memories:
        kind = f"{inline(m.kind)}{' archived' if m.archived_at else ''}"
        kind += lifecycle_markers(m, now) + relation_markers(batch.get(m.id, []), m.id)
        _out(
            f"{inline(m.id)}\trev={m.revision}\tscope={inline(m.scope)}\t{kind}\t{inline(m.content)}"
        )
    return 0


def cmd_review_relations(ns: argparse.Namespace, store: AgentMemory) -> int:
    report = governance.review_relations(
        store, include_archived=ns.include_archived, needs_review=ns.needs_review, limit=ns.limit
    )
    _out(untrusted_json(report) if ns.json else governance.format_review(report))
    return 0


def cmd_relate(ns: argparse.Namespace, store: AgentMemory) -> int:
    created = store.relate(
        ns.source_id, ns.target, relation=ns.relation, reason=ns.reason, actor=ns.actor
    )
    _out(f"{created.id}\t{created.marker(created.source_memory_id)}")
    return 0


def cmd_relations(ns: argparse.Namespace, store: AgentMemory) -> int:
    for r in store.relations(ns.id, include_reverse=not ns.outgoing_only, limit=ns.limit or 50):
        reason = "" if r.reason is None else f"\treason={inline(r.reason)}"
        _out(f"{inline(r.id)}\t{r.marker(ns.id)}\tcreated={r.created_at}{reason}")
    return 0


def cmd_unrelate(ns: argparse.Namespace, store: AgentMemory) -> int:
    store.unrelate(ns.id, reason=ns.reason, actor=ns.actor)
    _out("Removed")
    return 0


def _event_line(event: Event, sep: str) -> str:
    return sep.join(
        [
            event.created_at,
            inline(event.event_type),
            inline(event.actor),
            escape_controls(js_json(event.payload)),
        ]
    )


def cmd_show(ns: argparse.Namespace, store: AgentMemory) -> int:
    shown = store.show(ns.id, history_limit=ns.history_limit or 50)
    m: Memory = shown["memory"]
    if ns.json:
        _out(
            untrusted_json(
                {
                    "memory": m.to_json(),
                    "relations": [r.to_json(m.id) for r in shown["relations"]],
                    "events": [e.to_json() for e in shown["events"]],
                }
            )
        )
        return 0
    provenance = "none" if m.provenance is None else escape_controls(js_json(m.provenance))
    lines = [
        f"ID: {inline(m.id)}",
        f"Revision: {m.revision}",
        f"Scope: {inline(m.scope)}",
        f"Kind: {inline(m.kind)}",
        f"Tags: {', '.join(map(inline, m.tags)) or 'none'}",
        f"Source: {inline(m.source)}",
        f"Confidence: {js_json(m.confidence)}",
        f"Confidence state: {m.confidence_state or 'none'}",
        f"Review after: {m.review_after or 'none'}",
        f"Expires at: {m.expires_at or 'none'}",
        f"Created at: {m.created_at}",
        f"Updated at: {m.updated_at}",
        f"Last used at: {m.last_used_at or 'none'}",
        f"Archived at: {m.archived_at or 'none'}",
        f"Provenance: {provenance}",
        f"Content: {inline(m.content)}",
        "Relations:",
    ]
    for r in shown["relations"]:
        reason = "" if r.reason is None else f" ({inline(r.reason)})"
        lines.append(f"- {inline(r.id)}: {r.marker(m.id)}{reason}")
    if not shown["relations"]:
        lines.append("- none")
    lines.append("Events:")
    lines += [f"- {_event_line(e, ' ')}" for e in shown["events"]] or ["- none"]
    _out("\n".join(lines))
    return 0


def cmd_challenge(ns: argparse.Namespace, store: AgentMemory) -> int:
    memory, relation = store.challenge(
        ns.id,
        outcome=ns.outcome,
        reason=ns.reason,
        superseded_by=ns.superseded_by,
        expected_revision=ns.expected_revision,
        actor=ns.actor,
    )
    out = {
        "id": memory.id,
        "outcome": ns.outcome,
        "revision": memory.revision,
        "confidence_state": memory.confidence_state,
        "review_after": memory.review_after,
        "relation": None if relation is None else relation.to_json(memory.id),
    }
    if ns.json:
        _out(untrusted_json(out))
        return 0
    rel = (
        ""
        if relation is None
        else (f" relation={relation.id}:{relation.relation}->{relation.target_memory_id}")
    )
    _out(
        f"Challenged\t{memory.id}\toutcome={ns.outcome}\trev={memory.revision}\t"
        f"confidence_state={memory.confidence_state or 'none'}\t"
        f"review_after={memory.review_after or 'none'}{rel}"
    )
    return 0


def cmd_update(ns: argparse.Namespace, store: AgentMemory) -> int:
    if ns.review_after is not None and ns.clear_review_after:
        raise AgentMemoryError(
            C.MEMORY_REVIEW_AFTER_CONFLICT,
            "Use either --review-after or --clear-review-after, not both.",
        )
    if ns.expires_at is not None and ns.clear_expires_at:
        raise AgentMemoryError(
            C.MEMORY_EXPIRES_AT_CONFLICT, "Use either --expires-at or --clear-expires-at, not both."
        )
    fields: dict[str, Any] = {
        "content": ns.content,
        "kind": ns.kind,
        "tags": ns.tag,
        "confidence": ns.confidence,
    } | _draft(ns)
    if ns.new_scope is not None:
        fields["scope"] = paths.resolve_scope(ns.new_scope)
    if ns.clear_review_after:
        fields["review_after"] = None
    if ns.clear_expires_at:
        fields["expires_at"] = None
    fields = {
        k: v
        for k, v in fields.items()
        if v is not None or k in ("review_after", "expires_at", "provenance")
    }
    updated = store.update(ns.id, expected_revision=ns.expected_revision, actor=ACTOR, **fields)
    _out(updated.id)
    return 0


def cmd_forget(ns: argparse.Namespace, store: AgentMemory) -> int:
    if ns.archive and ns.delete:
        raise AgentMemoryError(
            C.MEMORY_FORGET_MODE_CONFLICT,
            "Choose either --archive or --delete, not both.",
            {"id": ns.id},
        )
    store.forget(
        ns.id,
        mode="delete" if ns.delete else "archive",
        confirm=ns.yes,
        reason=ns.reason or None,
        expected_revision=ns.expected_revision,
        actor=ACTOR,
    )
    _out("Deleted" if ns.delete else "Archived")
    return 0


def cmd_history(ns: argparse.Namespace, store: AgentMemory) -> int:
    for event in store.history(ns.id):
        _out(_event_line(event, "\t"))
    return 0


def cmd_audit(ns: argparse.Namespace, store: AgentMemory) -> int:
    scope = ns.filter_scope if ns.filter_scope is not None else ns.scope
    events = store.audit(
        memory_id=ns.memory_id,
        event_types=ns.event_type or [],
        actor=ns.actor,
        scope=None if scope is None else paths.resolve_scope(scope),
        since=ns.since,
        until=ns.until,
        limit=ns.limit or 50,
    )
    for e in events:
        _out(
            "\t".join(
                [
                    e.created_at,
                    inline(e.id),
                    inline(e.memory_id or "global"),
                    inline(e.event_type),
                    inline(e.actor),
                    escape_controls(js_json(e.payload)),
                ]
            )
        )
    return 0


def cmd_forget_many(ns: argparse.Namespace, store: AgentMemory) -> int:
    result = store.forget_many(
        scope=None if ns.filter_scope is None else paths.resolve_scope(ns.filter_scope),
        tags=ns.tag or [],
        all=ns.all,
        mode="delete" if ns.delete else "archive",
        confirm=ns.yes,
        dry_run=not ns.apply,
        reason=ns.reason,
        actor=ACTOR,
    )
    _out(
        "\t".join(
            [
                "Preview" if result["dryRun"] else "Applied",
                f"matched={result['matched']}",
                f"affected={result['affected']}",
                f"mode={result['mode']}",
            ]
        )
    )
    for memory_id in result["ids"]:
        _out(memory_id)
    return 0


def cmd_export(ns: argparse.Namespace, store: AgentMemory) -> int:
    document = store.export(tags=ns.tag or [], include_archived=ns.include_archived, actor=ACTOR)
    fmt = ns.format or ("markdown" if ns.path and ns.path.lower().endswith(".md") else "json")
    text = export_markdown(document) if fmt == "markdown" else untrusted_json(document) + "\n"
    if ns.path:
        target = os.path.abspath(ns.path)
        paths.ensure_private_dir(os.path.dirname(target))
        paths.write_private_file(target, text)
        _out(f"Exported {len(document['memories'])} memories to {target}")
        return 0
    _out(text.rstrip())
    return 0


def cmd_import(ns: argparse.Namespace, store: AgentMemory) -> int:
    document = paths.read_export_file(os.path.abspath(ns.path))
    scope = None if ns.filter_scope is None else paths.resolve_scope(ns.filter_scope)
    result = store.import_document(document, scope=scope, dry_run=ns.dry_run, actor=ACTOR)
    skipped = f", skipped {result['skipped']}" if result["skipped"] > 0 else ""
    _out(
        f"{'Would import' if result['dryRun'] else 'Imported'} {result['imported']} memories"
        f"{skipped}"
    )
    return 0


def cmd_rehome(ns: argparse.Namespace, store: AgentMemory) -> int:
    from aidememo.agent_memory.rehome import plan_output, plan_text, rehome_scope

    if ns.dry_run and ns.apply:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_MODE_CONFLICT, "Use either --dry-run or --apply, not both."
        )
    if ns.yes and not ns.apply:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_CONFIRMATION_WITHOUT_APPLY, "--yes requires --apply."
        )
    if ns.backup_path and not ns.apply:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_BACKUP_WITHOUT_APPLY, "--backup-path requires --apply."
        )
    if ns.apply and not ns.backup_path:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_BACKUP_REQUIRED, "--apply requires a new --backup-path."
        )
    # The scopes are taken as given: `project:auto` is refused, not resolved (MEM-8).
    result = rehome_scope(
        store,
        ns.from_scope,
        ns.to_scope,
        apply=ns.apply,
        confirm=ns.yes,
        backup_path=ns.backup_path,
        actor=ACTOR,
    )
    _out(untrusted_json(plan_output(result)) if ns.json else plan_text(result))
    return 0 if result.get("applied") or result["applicable"] else 1


HANDLERS: dict[str, Callable[[argparse.Namespace, Any], int]] = {
    "init": cmd_init,
    "remember": cmd_remember,
    "suggest-capture": cmd_suggest_capture,
    "confirm-capture": cmd_confirm_capture,
    "recall": cmd_recall,
    "list": cmd_list,
    "review-relations": cmd_review_relations,
    "relate": cmd_relate,
    "relations": cmd_relations,
    "unrelate": cmd_unrelate,
    "show": cmd_show,
    "challenge": cmd_challenge,
    "update": cmd_update,
    "forget": cmd_forget,
    "history": cmd_history,
    "audit": cmd_audit,
    "forget-many": cmd_forget_many,
    "export": cmd_export,
    "import": cmd_import,
    "rehome-scope": cmd_rehome,
    "publish": cmd_publish,
    "semantic": cmd_semantic,
    **MAINTENANCE_HANDLERS,
}
