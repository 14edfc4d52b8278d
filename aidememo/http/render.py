"""JSON response bodies, with stored resource bodies spliced in as the bytes they are.

Ids, epochs and kind names are restricted to characters that need no JSON escaping, so they
are written between quotes directly; resource bodies are canonical JSON already. This keeps
the change feed from decoding and re-encoding every body (FEED-6).
"""

from __future__ import annotations

import json
from typing import Any

from aidememo.domain.model import (
    ChangeOp,
    ChangeRecord,
    Receipt,
    ResourceRef,
    Scope,
    StoredResource,
)

_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def json_bytes(value: Any) -> bytes:
    """Compact JSON of a plain value."""
    return _dumps(value).encode("utf-8")


def _null(value: str | None) -> str:
    return "null" if value is None else f'"{value}"'


def scope_json(scope: Scope) -> bytes:
    """`{tenant_id, project_id}`."""
    return f'{{"tenant_id":"{scope.tenant_id}","project_id":"{scope.project_id}"}}'.encode()


def state_json(body: bytes | None) -> bytes:
    """`{"state":"present","body":...}` or `{"state":"deleted"}`."""
    if body is None:
        return b'{"state":"deleted"}'
    return b'{"state":"present","body":' + body + b"}"


def resource_json(scope: bytes, row: StoredResource) -> bytes:
    """`{scope, resource, revision, state}`."""
    ref = row.ref
    head = f',"resource":{{"kind":"{ref.kind}","id":"{ref.id}"}},"revision":{row.revision},"state":'
    return b'{"scope":' + scope + head.encode() + state_json(row.body) + b"}"


def change_json(scope: Scope, row: ChangeRecord) -> bytes:
    """A metadata-only change entry."""
    ref = row.ref
    return (
        f'{{"tenant_id":"{scope.tenant_id}","project_id":"{scope.project_id}",'
        f'"project_epoch":"{row.project_epoch}","seq":{row.seq},'
        f'"resource":{{"kind":"{ref.kind}","id":"{ref.id}"}},"operation":"{row.op.value}",'
        f'"revision":{row.revision},"actor_id":"{row.actor_id}",'
        f'"committed_at_ms":{row.committed_at_ms}}}'
    ).encode()


def materialized_json(scope: Scope, scope_bytes: bytes, row: ChangeRecord) -> bytes:
    """`{change, resource}` with the exact body at the change's revision."""
    resource = resource_json(scope_bytes, StoredResource(row.ref, row.revision, row.body))
    return b'{"change":' + change_json(scope, row) + b',"resource":' + resource + b"}"


# -- whole pages: the same bytes as the per-row functions above, with the per-page parts
# (scope, prefixes) formatted once and one f-string per row (the feed and snapshot hot paths).

_UPSERT = ChangeOp.UPSERT


def _scope_text(scope: Scope) -> str:
    return f'{{"tenant_id":"{scope.tenant_id}","project_id":"{scope.project_id}"}}'


def _change_text(prefix: str, row: ChangeRecord) -> str:
    """`change_json` as text; `prefix` is `{"tenant_id":"T","project_id":"P",`."""
    ref = row.ref
    op = "upsert" if row.op is _UPSERT else "delete"
    return (
        f'{prefix}"project_epoch":"{row.project_epoch}","seq":{row.seq},'
        f'"resource":{{"kind":"{ref.kind}","id":"{ref.id}"}},"operation":"{op}",'
        f'"revision":{row.revision},"actor_id":"{row.actor_id}",'
        f'"committed_at_ms":{row.committed_at_ms}}}'
    )


def change_entries(scope: Scope, rows: list[ChangeRecord]) -> list[bytes]:
    """`change_json` of every row."""
    prefix = _scope_text(scope)[:-1] + ","
    return [_change_text(prefix, row).encode() for row in rows]


def _resource_head(scope_text: str, ref: ResourceRef, revision: int) -> str:
    """`resource_json` as text up to its state: `{"scope":..,"resource":..,"revision":R,"state":`,
    followed by `_DELETED` or `_PRESENT`, the body and `}}`."""
    return (
        f'{{"scope":{scope_text},"resource":{{"kind":"{ref.kind}","id":"{ref.id}"}},'
        f'"revision":{revision},"state":'
    )


_DELETED = '{"state":"deleted"}}'
_PRESENT = '{"state":"present","body":'


def materialized_entries(scope: Scope, rows: list[ChangeRecord]) -> list[bytes]:
    """`materialized_json` of every row; bodies are spliced in as stored (FEED-6)."""
    scope_text = _scope_text(scope)
    prefix = scope_text[:-1] + ","
    entries: list[bytes] = []
    append = entries.append
    for row in rows:
        change, body = _change_text(prefix, row), row.body
        head = f'{{"change":{change},"resource":{_resource_head(scope_text, row.ref, row.revision)}'
        if body is None:
            append((head + _DELETED + "}").encode())
        else:
            append((head + _PRESENT).encode() + body + b"}}}")
    return entries


def _resource_parts(scope: Scope, rows: list[StoredResource], parts: list[bytes]) -> None:
    """Append `resource_json` of every row to `parts`, each followed by a comma."""
    scope_text = _scope_text(scope)
    extend = parts.extend
    for row in rows:
        head, body = _resource_head(scope_text, row.ref, row.revision), row.body
        if body is None:
            extend(((head + _DELETED + ",").encode(),))
        else:
            extend(((head + _PRESENT).encode(), body, b"}},"))


def resources_json(scope: Scope, rows: list[StoredResource]) -> bytes:
    """`resource_json` of every row, comma-separated (a snapshot's resources), joined once."""
    parts: list[bytes] = []
    _resource_parts(scope, rows, parts)
    return b"".join(parts)[:-1]


def snapshot_json(
    scope: Scope,
    epoch: str,
    at_seq: int,
    rows: list[StoredResource],
    next_page_token: str | None = None,
) -> bytes:
    """`{scope, project_epoch, at_seq, resources, next_page_token}`, joined once; a page
    token is base64url text and a dot (SNAP-3), so it needs no escaping."""
    head = f',"project_epoch":"{epoch}","at_seq":{at_seq},"resources":['
    parts = [b'{"scope":' + scope_json(scope) + head.encode()]
    _resource_parts(scope, rows, parts)
    if rows:
        parts[-1] = parts[-1][:-1]  # no comma after the last resource
    parts.append(f'],"next_page_token":{_null(next_page_token)}}}'.encode())
    return b"".join(parts)


def batch_json(
    scope: Scope, epoch: str, after_seq: int, entries: list[bytes], next_seq: int, more: bool
) -> bytes:
    """`{scope, cursor, entries, next_cursor, has_more}`."""
    scope_bytes = scope_json(scope)
    return b"".join(
        (
            b'{"scope":',
            scope_bytes,
            f',"cursor":{{"project_epoch":"{epoch}","after_seq":{after_seq}}},"entries":['.encode(),
            b",".join(entries),
            f'],"next_cursor":{{"project_epoch":"{epoch}","after_seq":{next_seq}}},'.encode(),
            b'"has_more":true}' if more else b'"has_more":false}',
        )
    )


def receipt_json(receipt: Receipt) -> bytes:
    """A command receipt."""
    return json_bytes(receipt.to_json())


def typed_record_json(revision: int, body: bytes) -> bytes:
    """`{revision, record}`."""
    return f'{{"revision":{revision},"record":'.encode() + body + b"}"


def optional_id_json(value: str | None) -> str:
    """An id or null, as JSON text."""
    return _null(value)
