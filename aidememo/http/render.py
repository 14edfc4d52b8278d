"""JSON response bodies, with stored resource bodies spliced in as the bytes they are.

Ids, epochs and kind names are restricted to characters that need no JSON escaping, so they
are written between quotes directly; resource bodies are canonical JSON already. This keeps
the change feed from decoding and re-encoding every body (FEED-6).
"""

from __future__ import annotations

import json
from typing import Any

from aidememo.domain.model import ChangeRecord, Receipt, Scope, StoredResource

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
