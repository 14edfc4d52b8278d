"""Who may see which record (SPEC.md VIS-1).

Handoffs and handoff contexts are visible only to their sender and receiver, on every read
path. A deleted participant-scoped record keeps no participants, so it is visible to nobody.
An artifact is participant-scoped when its path is under `handoffs/<h>/`: its publication
carries the handoff's sender and receiver (VIS-2); any other artifact is visible to every
member.
"""

from __future__ import annotations

from aidememo.domain.canonical import decode_stored

PARTICIPANT_KINDS = frozenset({"handoff", "handoff_context", "artifact"})


def participants(body: bytes | None) -> tuple[str, str] | None:
    """`(from_actor, to_actor)` of a participant-scoped record body, None when unknown."""
    if body is None:
        return None
    record = decode_stored(body)
    if not isinstance(record, dict):
        return None
    sender, receiver = record.get("from_actor"), record.get("to_actor")
    if isinstance(sender, str) and isinstance(receiver, str):
        return sender, receiver
    return None


def visible_to(kind: str, body: bytes | None, actor_id: str) -> bool:
    """True when `actor_id` may see a record of `kind` with this body (VIS-1)."""
    if kind not in PARTICIPANT_KINDS:
        return True
    pair = participants(body)
    if pair is None and kind == "artifact" and body is not None:
        record = decode_stored(body)
        path = record.get("path") if isinstance(record, dict) else None
        return isinstance(path, str) and not path.startswith("handoffs/")
    return pair is not None and actor_id in pair
