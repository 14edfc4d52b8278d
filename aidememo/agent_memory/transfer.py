"""Export and import in the `nuzo-memory-export` document format, version 1 (SPEC.md MEM-10).

A document carries memories without ids, revisions or audit history, and relations by array
index, so it moves between stores. Import validates the whole document and every item's policy
(secrets included) before writing anything, then plans and writes every item in one
transaction: a failure anywhere leaves nothing of the import. Duplicates (same scope, kind,
whitespace-collapsed content and sorted tags, archived rows included) are skipped.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from aidememo.agent_memory import policy, reads
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.jstext import (
    collapse_spaces,
    js_json,
    js_number,
    js_trim,
    normalize_date,
)
from aidememo.agent_memory.model import (
    CONFIDENCE_STATES,
    KINDS,
    PROVENANCE_KINDS,
    RELATIONS,
    Memory,
    Relation,
    new_id,
)
from aidememo.agent_memory.render import markdown_block, yaml_string

if TYPE_CHECKING:
    from aidememo.agent_memory.core import AgentMemoryCore

FORMAT = "nuzo-memory-export"
VERSION = 1


_EXPORT_FIELDS = (
    "scope kind content tags source confidence confidence_state provenance review_after"
    " expires_at created_at updated_at last_used_at archived_at"
).split()


def export_item(memory: Memory) -> dict[str, Any]:
    return memory.fields(*_EXPORT_FIELDS)


def export_document(
    store: AgentMemoryCore,
    *,
    scope: str | None = None,
    all_scopes: bool = False,
    tags: Sequence[str] = (),
    include_archived: bool = False,
    limit: int | None = None,
    cursor: str | None = None,
    actor: str = "core",
) -> dict[str, Any]:
    """The export document of the scope's memories (newest first); logs `memory.exported`."""
    policy.check_actor(actor)
    target = None if all_scopes else (scope or store.scope)
    memories = reads.list_memories(
        store,
        scope=target,
        all_scopes=all_scopes,
        tags=tags,
        include_archived=include_archived,
        limit=limit,
        cursor=cursor,
    )
    now = store.now()
    with store.db.write():
        store.db.append(
            store.event(
                None,
                "memory.exported",
                actor,
                {
                    "scope": target,
                    "tags": list(tags),
                    "includeArchived": include_archived,
                    "count": len(memories),
                },
                now,
            )
        )
    index = {memory.id: i for i, memory in enumerate(memories)}
    relations = [
        {
            "source_index": index[r.source_memory_id],
            "target_index": index[r.target_memory_id],
            "relation": r.relation,
            "reason": r.reason,
            "created_at": r.created_at,
        }
        for r in store.db.relations_among(list(index))
        if r.source_memory_id in index and r.target_memory_id in index
    ]
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": now,
        "memories": [export_item(m) for m in memories],
        "relations": relations,
    }


def export_markdown(document: dict[str, Any]) -> str:
    """A human-review rendering (not importable): YAML-ish metadata, inert content blocks."""
    memories, relations = document["memories"], document.get("relations") or []
    lines = [
        "# Nuzo Memory Export",
        "",
        "This file is for human review. Use JSON exports for import.",
        "",
        "```yaml",
        f"format: {FORMAT}",
        f"version: {document['version']}",
        f"exported_at: {yaml_string(document['exported_at'])}",
        f"count: {len(memories)}",
        f"relation_count: {len(relations)}",
        "```",
        "",
        "## Memories",
        "",
    ]
    if not memories:
        lines += ["_No memories exported._", ""]
        return "\n".join(lines)
    for number, item in enumerate(memories, start=1):
        tags = [f"  - {yaml_string(tag)}" for tag in item["tags"]] or ["  []"]
        provenance = item.get("provenance")
        lines += [
            f"### Memory {number}",
            "",
            "```yaml",
            f"scope: {yaml_string(item['scope'])}",
            f"kind: {yaml_string(item['kind'])}",
            "tags:",
            *tags,
            f"source: {yaml_string(item['source'])}",
            f"confidence: {js_number(item['confidence'])}",
            f"confidence_state: {yaml_string(item.get('confidence_state'))}",
            f"provenance: {yaml_string(js_json(provenance))}",
            f"review_after: {yaml_string(item.get('review_after'))}",
            f"expires_at: {yaml_string(item.get('expires_at'))}",
            f"created_at: {yaml_string(item['created_at'])}",
            f"updated_at: {yaml_string(item['updated_at'])}",
            f"last_used_at: {yaml_string(item['last_used_at'])}",
            f"archived_at: {yaml_string(item['archived_at'])}",
            "```",
            "",
            markdown_block(item["content"]),
            "",
        ]
    if relations:
        lines += ["## Relations", ""]
        for number, rel in enumerate(relations, start=1):
            lines += [
                f"### Relation {number}",
                "",
                "```yaml",
                f"source_index: {rel['source_index']}",
                f"target_index: {rel['target_index']}",
                f"relation: {yaml_string(rel['relation'])}",
                f"reason: {yaml_string(rel.get('reason'))}",
                f"created_at: {yaml_string(rel['created_at'])}",
                "```",
                "",
            ]
    return "\n".join(lines)


# -- validation ------------------------------------------------------------------------------


def _objects(items: list[Any], name: str, what: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """`(path, item)` of every item of an import list, once the list is within the import
    limit; an item that is not an object is refused."""
    if len(items) > policy.IMPORT_ITEMS_MAX:
        raise AgentMemoryError(
            C.MEMORY_IMPORT_LIMIT_EXCEEDED,
            f"Memory import contains too many {what}.",
            {"maxItems": policy.IMPORT_ITEMS_MAX},
        )
    for i, item in enumerate(items):
        path = f"{name}[{i}]"
        if not isinstance(item, dict):
            raise _invalid(path, "item must be an object")
        yield path, item


def _invalid(path: str, reason: str, **details: Any) -> AgentMemoryError:
    return AgentMemoryError(
        C.MEMORY_EXPORT_INVALID,
        "Memory export document is invalid.",
        {"path": path, "reason": reason, **details},
    )


def _date(value: Any, field: str) -> str:
    if not isinstance(value, str) or len(value) > policy.DATE_MAX:
        raise AgentMemoryError(
            C.MEMORY_EXPORT_INVALID,
            "Memory export contains an invalid date.",
            {"field": field, "maxLength": policy.DATE_MAX},
        )
    normal = normalize_date(value)
    if normal is None:
        raise AgentMemoryError(
            C.MEMORY_EXPORT_INVALID,
            "Memory export contains an invalid date.",
            {"field": field, "value": value},
        )
    return normal


def _string(item: dict[str, Any], name: str, path: str, *, nullable: bool = False) -> Any:
    value = item.get(name, _MISSING)
    if isinstance(value, str) or (nullable and value is None):
        return value
    raise _invalid(
        f"{path}.{name}",
        "must be a string or null" if nullable else "must be a string",
        value=None if value is _MISSING else value,
    )


_MISSING: Any = object()


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_document(document: Any) -> None:
    """Nuzo's `assertExportDocument`: shape, enums, dates, relation indexes, the 1000 limits."""
    if not isinstance(document, dict):
        raise AgentMemoryError(C.MEMORY_EXPORT_INVALID, "Memory export document is invalid.")
    if (
        document.get("format") != FORMAT
        or document.get("version") != VERSION
        or isinstance(document.get("version"), bool)
    ):
        raise AgentMemoryError(
            C.MEMORY_EXPORT_UNSUPPORTED,
            "Memory export format is not supported.",
            {"format": document.get("format"), "version": document.get("version")},
        )
    _date(_string(document, "exported_at", "document"), "exported_at")
    memories = document.get("memories")
    if not isinstance(memories, list):
        raise AgentMemoryError(C.MEMORY_EXPORT_INVALID, "Memory export document is invalid.")
    for path, item in _objects(memories, "memories", "items"):
        _string(item, "scope", path)
        if _string(item, "kind", path) not in KINDS:
            raise _invalid(path, "kind is not supported", kind=item["kind"])
        _string(item, "content", path)
        tags = item.get("tags")
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise _invalid(f"{path}.tags", "must be an array of strings", value=tags)
        _string(item, "source", path)
        confidence: Any = item.get("confidence")
        if not _number(confidence):
            raise _invalid(f"{path}.confidence", "must be a finite number", value=confidence)
        if not 0 <= confidence <= 1:
            raise _invalid(path, "confidence must be between 0 and 1", confidence=confidence)
        state = item.get("confidence_state")
        if state is not None and state not in CONFIDENCE_STATES:
            raise _invalid(
                f"{path}.confidence_state",
                "must be a supported confidence state or null",
                value=state,
            )
        _check_provenance(item, path)
        for name in ("review_after", "expires_at"):
            if name in item and _string(item, name, path, nullable=True) is not None:
                _date(item[name], f"{path}.{name}")
        for name in ("created_at", "updated_at"):
            _date(_string(item, name, path), f"{path}.{name}")
        for name in ("last_used_at", "archived_at"):
            if _string(item, name, path, nullable=True) is not None:
                _date(item[name], f"{path}.{name}")
    relations = document.get("relations", _MISSING)
    if relations is _MISSING:
        return
    if not isinstance(relations, list):
        raise _invalid("document.relations", "must be an array", value=relations)
    for path, rel in _objects(relations, "relations", "relation items"):
        ends = []
        for name in ("source_index", "target_index"):
            value: Any = rel.get(name)
            if not _number(value):
                raise _invalid(f"{path}.{name}", "must be a finite number", value=value)
            if value != int(value):
                raise _invalid(f"{path}.{name}", "must be an integer", value=value)
            if not 0 <= value < len(memories):
                raise _invalid(path, f"{name} must reference an exported memory")
            ends.append(int(value))
        if ends[0] == ends[1]:
            raise _invalid(path, "source_index and target_index must differ")
        if _string(rel, "relation", path) not in RELATIONS:
            raise _invalid(path, "relation is not supported", relation=rel["relation"])
        if "reason" in rel and _string(rel, "reason", path, nullable=True) is not None:
            if not js_trim(rel["reason"]):
                raise _invalid(path, "reason cannot be empty")
        _date(_string(rel, "created_at", path), f"{path}.created_at")


def _check_provenance(item: dict[str, Any], path: str) -> None:
    if "provenance" not in item or item["provenance"] is None:
        return
    prov = item["provenance"]
    if not isinstance(prov, dict):
        raise _invalid(f"{path}.provenance", "must be an object or null", value=prov)
    if prov.get("kind") not in PROVENANCE_KINDS:
        raise _invalid(f"{path}.provenance", "kind is not supported", kind=prov.get("kind"))
    for name in ("host", "surface", "thread_id", "action", "reason", "path"):
        if name in prov and not isinstance(prov[name], str):
            raise _invalid(f"{path}.provenance.{name}", "must be a string", value=prov[name])
    line = prov.get("line")
    if "line" in prov and not (isinstance(line, int) and not isinstance(line, bool) and line > 0):
        raise _invalid(f"{path}.provenance.line", "must be a positive integer", value=line)


def duplicate_key(scope: str, kind: str, content: str, tags: Sequence[str]) -> str:
    """The import duplicate key: case-sensitive, kind and sorted unique tags included."""
    return js_json([scope, kind, collapse_spaces(content), sorted(set(tags))])


def import_document(
    store: AgentMemoryCore,
    document: Any,
    *,
    scope: str | None = None,
    dry_run: bool = False,
    actor: str = "core",
) -> dict[str, Any]:
    """Import a document: `{imported, skipped, dryRun}` (MEM-10)."""
    policy.check_actor(actor)
    check_document(document)
    items: list[dict[str, Any]] = document["memories"]
    for item in items:
        policy.check_memory(
            content=item["content"],
            kind=item["kind"],
            scope=scope or item["scope"],
            tags=item["tags"],
            source=item["source"],
            confidence=item["confidence"],
            confidence_state=item.get("confidence_state"),
            provenance=item.get("provenance"),
            review_after=item.get("review_after") or None,
            expires_at=item.get("expires_at") or None,
        )

    def plan() -> tuple[list[tuple[int, dict[str, Any], str, list[str]]], int]:
        keys: dict[str, set[str]] = {}
        planned, skipped = [], 0
        for index, item in enumerate(items):
            target = scope or item["scope"]
            if target not in keys:
                existing = store.db.list_memories(scope=target, include_archived=True)
                keys[target] = {duplicate_key(m.scope, m.kind, m.content, m.tags) for m in existing}
            tags = list(dict.fromkeys(item["tags"]))
            key = duplicate_key(target, item["kind"], item["content"], tags)
            if key in keys[target]:
                skipped += 1
                continue
            keys[target].add(key)
            planned.append((index, item, target, tags))
        return planned, skipped

    if dry_run:
        planned, skipped = plan()
        return {"imported": len(planned), "skipped": skipped, "dryRun": True}
    with store.db.write():
        planned, skipped = plan()
        created: dict[int, Memory] = {}
        for index, item, target, tags in planned:
            memory = Memory(
                id=new_id("mem"),
                revision=1,
                scope=target,
                kind=item["kind"],
                content=js_trim(item["content"]),
                tags=tags,
                source=item["source"],
                confidence=float(item["confidence"]),
                confidence_state=item.get("confidence_state"),
                provenance=item.get("provenance"),
                review_after=_opt_date(item.get("review_after")),
                expires_at=_opt_date(item.get("expires_at")),
                created_at=_date(item["created_at"], "created_at"),
                updated_at=_date(item["updated_at"], "updated_at"),
                last_used_at=_opt_date(item.get("last_used_at")),
                archived_at=_opt_date(item.get("archived_at")),
            )
            store.db.insert(memory)
            created[index] = memory
            store.db.index(memory, new=True)
            store.db.append(
                store.event(
                    memory.id,
                    "memory.imported",
                    actor,
                    {
                        "originalScope": item["scope"],
                        "scope": target,
                        "archived": memory.archived_at is not None,
                    },
                )
            )
        for rel in document.get("relations") or []:
            source = created.get(int(rel["source_index"]))
            target_memory = created.get(int(rel["target_index"]))
            if source is None or target_memory is None:
                continue
            reason = rel.get("reason")
            policy.check_relation(rel["relation"], source.id, target_memory.id, reason)
            relation = Relation(
                new_id("rel"),
                source.id,
                target_memory.id,
                rel["relation"],
                reason,
                _date(rel["created_at"], "relations.created_at"),
            )
            if store.db.insert_relation(relation):
                store.db.append(
                    store.event(
                        source.id,
                        "memory.relation.created",
                        actor,
                        {
                            "relationId": relation.id,
                            "sourceMemoryId": source.id,
                            "targetMemoryId": target_memory.id,
                            "relation": relation.relation,
                            "reason": reason,
                            "sourceScope": source.scope,
                            "targetScope": target_memory.scope,
                            "imported": True,
                        },
                    )
                )
    return {"imported": len(planned), "skipped": skipped, "dryRun": False}


def _opt_date(value: Any) -> str | None:
    return None if not value else _date(value, "date")
