"""The member routes' components: records, batches, pages and answers (`member_routes`)."""

from __future__ import annotations

from aidememo.domain.errors import STORE_STATES
from aidememo.domain.limits import (
    CONTENT_MAX_BYTES,
    FOCUS_MAX_BYTES,
    MAILBOX_LIMIT_MAX,
    SEARCH_LIMIT_MAX,
    SESSION_FACTS_LIMIT_MAX,
    SESSIONS_LIMIT_MAX,
    SNAPSHOT_LIMIT_MAX,
    TOPIC_MAX_BYTES,
)
from aidememo.domain.model import ActorKind, MemberStatus, Role
from aidememo.http.schemas import NO_CONTROL, Schema, integer, nullable, obj, ref, text


def member_schemas(s: dict[str, Schema]) -> None:
    """The member routes' bodies and answers, and the live feed's messages."""
    mode = {"type": "string", "enum": ["single_node", "postgres", "edge"]}
    state = {
        "type": "string",
        "enum": list(STORE_STATES),
        "description": "The canonical store's state (SPEC.md READY-1).",
    }
    s["Health"] = obj(
        {
            "status": {"const": "ok"},
            "mode": mode,
            "schema_version": nullable(
                integer(1, description="The canonical store's schema version (null: unread).")
            ),
            "state": state,
        }
    )
    s["Ready"] = obj(
        {"ready": {"type": "boolean"}, "mode": mode, "state": state},
        {
            "semantic": obj(
                {
                    "semantic_model": ref("SemanticModel"),
                    "index_lag": nullable(
                        integer(0, description="Sequences behind (null: not reported yet).")
                    ),
                    "facts_indexed": integer(0),
                    "errors": integer(0),
                    "last_error": nullable({"type": "string"}),
                }
            )
        },
    )
    s["Identity"] = obj(
        {
            "tenant_id": ref("Id"),
            "project_id": ref("Id"),
            "project_epoch": ref("Id"),
            "actor_id": ref("Id"),
            "role": {"type": "string", "enum": ["owner", "admin", "writer", "reader"]},
        }
    )
    s["State"] = {
        "oneOf": [
            obj({"state": {"const": "present"}, "body": {"description": "The exact JSON body."}}),
            obj({"state": {"const": "deleted"}}),
        ]
    }
    s["Resource"] = obj(
        {
            "scope": ref("Scope"),
            "resource": ref("ResourceRef"),
            "revision": ref("Revision"),
            "state": ref("State"),
        }
    )
    s["Cursor"] = obj({"project_epoch": ref("Id"), "after_seq": integer(0)})
    s["ChangeEntry"] = obj(
        {
            "tenant_id": ref("Id"),
            "project_id": ref("Id"),
            "project_epoch": ref("Id"),
            "seq": ref("Seq"),
            "resource": ref("ResourceRef"),
            "operation": {"type": "string", "enum": ["upsert", "delete"]},
            "revision": ref("Revision"),
            "actor_id": ref("Id"),
            "committed_at_ms": ref("TimestampMs"),
        }
    )
    s["MaterializedEntry"] = obj({"change": ref("ChangeEntry"), "resource": ref("Resource")})
    batch_doc = (
        "`limit` counts scanned entries: entries the caller may not see are left out but still "
        "advance `next_cursor`, so a page may be empty with `has_more: true`."
    )
    for name, entry in (("ChangeBatch", "ChangeEntry"), ("MaterializedBatch", "MaterializedEntry")):
        s[name] = {
            **obj(
                {
                    "scope": ref("Scope"),
                    "cursor": ref("Cursor"),
                    "entries": {"type": "array", "items": ref(entry)},
                    "next_cursor": ref("Cursor"),
                    "has_more": {"type": "boolean"},
                }
            ),
            "description": batch_doc,
        }
    s["Snapshot"] = obj(
        {
            "scope": ref("Scope"),
            "project_epoch": ref("Id"),
            "at_seq": integer(0),
            "resources": {
                "type": "array",
                "maxItems": SNAPSHOT_LIMIT_MAX,
                "items": ref("Resource"),
            },
            "next_page_token": {
                **nullable({"type": "string"}),
                "description": "Opaque; null on the last page (SNAP-2, SNAP-3).",
            },
        }
    )
    s["HandoffRecord"] = obj(
        {
            "handoff_id": ref("Id"),
            "session_id": ref("Id"),
            "source_id": ref("Id"),
            "from_actor": ref("Id"),
            "to_actor": ref("Id"),
            "focus": nullable({"type": "string", "maxLength": FOCUS_MAX_BYTES}),
            "done_when": nullable({"type": "string", "maxLength": FOCUS_MAX_BYTES}),
            "context_id": nullable(ref("Id")),
            "status": {"type": "string", "enum": ["pending", "accepted", "completed"]},
            "claim_id": nullable(ref("Id")),
            "claim_heartbeat_at_ms": nullable(ref("TimestampMs")),
            "claim_expires_at_ms": nullable(ref("TimestampMs")),
            "attempt_count": integer(0),
            "result_fact_id": nullable(ref("Id")),
            "outcome": nullable({"type": "string", "enum": ["succeeded", "failed"]}),
        },
        {"result_artifact_id": ref("Id")},
    )
    s["LeaseState"] = {
        "type": "string",
        "enum": ["live", "expired"],
        "description": "Derived at read time from claim_expires_at_ms and the clock, never "
        "stored; absent unless the handoff is accepted with a claim.",
    }
    s["HandoffStatus"] = obj(
        {"revision": ref("Revision"), "record": ref("HandoffRecord")},
        {"lease_state": ref("LeaseState")},
    )
    s["Mailbox"] = _page(
        "assignments",
        MAILBOX_LIMIT_MAX,
        ref("HandoffRecord"),
        "next_before_seq",
        {"lease_state": ref("LeaseState")},
    )
    session = {
        "session_id": ref("Id"),
        "source_id": ref("Id"),
        "topic": {"type": "string", "maxLength": TOPIC_MAX_BYTES},
        "created_by": ref("Id"),
    }
    s["Sessions"] = _page("sessions", SESSIONS_LIMIT_MAX, obj(session), "next_before_seq")
    fact = {
        "fact_id": ref("Id"),
        "session_id": ref("Id"),
        "source_id": ref("Id"),
        "actor_id": ref("Id"),
        "content": {"type": "string", "maxLength": CONTENT_MAX_BYTES},
    }
    s["SessionFacts"] = _page("facts", SESSION_FACTS_LIMIT_MAX, obj(fact), "next_after_seq")
    s["Members"] = obj(
        {
            "members": {
                "type": "array",
                "items": obj(
                    {
                        "actor_id": ref("Id"),
                        "kind": {"type": "string", "enum": [k.value for k in ActorKind]},
                        "role": {"type": "string", "enum": [r.value for r in Role]},
                        "status": {"type": "string", "enum": [m.value for m in MemberStatus]},
                    }
                ),
            }
        }
    )
    rank = nullable(integer(1))
    s["SearchResult"] = obj(
        {
            "fact_id": ref("Id"),
            "session_id": ref("Id"),
            "source_id": ref("Id"),
            "actor_id": ref("Id"),
            "content": {"type": "string"},
            "score": {
                "type": "number",
                "description": "lexical: BM25 over the project's own facts (SRCH-4); semantic: "
                "the cosine; hybrid: the fused score (SEM-4). Higher is better.",
            },
            "lexical_score": nullable({"type": "number"}),
            "lexical_rank": rank,
            "semantic_score": nullable({"type": "number"}),
            "semantic_rank": rank,
        }
    )
    s["SemanticModel"] = obj(
        {
            "provider": {"type": "string"},
            "model": {"type": "string"},
            "revision": {"type": "string"},
            "dimensions": integer(1),
        }
    )
    s["Search"] = obj(
        {
            "project_epoch": ref("Id"),
            "index_seq": integer(0),
            "mode": {
                "type": "string",
                "enum": ["lexical", "semantic", "hybrid"],
                "description": "the mode that ran (SEM-3)",
            },
            "semantic_model": nullable(ref("SemanticModel")),
            "semantic_lag": nullable(integer(0)),
            "fallback_reason": nullable(
                {
                    "type": "string",
                    "enum": [
                        "semantic_unavailable",
                        "semantic_index_not_built",
                        "semantic_index_behind",
                    ],
                }
            ),
            "exhaustive": {
                "type": "boolean",
                "description": "false when a term matched more than 10,000 of the project's "
                "facts and only the newest were evaluated (SRCH-5, SRCH-7).",
            },
            "terms_dropped": {
                **integer(0),
                "description": "Distinct query terms past the first 32, not searched (SRCH-7).",
            },
            "results": {
                "type": "array",
                "maxItems": SEARCH_LIMIT_MAX,
                "items": ref("SearchResult"),
            },
        }
    )
    # -- request bodies --
    s["JsonObject"] = {
        "type": "object",
        "description": "Any JSON object (nesting at most 64 deep, integers within int64).",
    }
    raw_common = {
        "command_id": ref("Id"),
        "project_id": ref("Id"),
        "resource": obj({"kind": ref("CustomKind"), "id": ref("Id")}),
    }
    revision = nullable(integer(1))
    s["RawCommand"] = {
        "description": "A raw put or delete of a custom.* resource; `expected_revision` null or "
        "absent is an unconditional write.",
        "oneOf": [
            obj(
                {
                    **raw_common,
                    "operation": {"const": "resource.put"},
                    "change": {"const": "upsert"},
                    "payload": ref("JsonObject"),
                },
                {"expected_revision": revision},
            ),
            obj(
                {
                    **raw_common,
                    "operation": {"const": "resource.delete"},
                    "change": {"const": "delete"},
                },
                {"expected_revision": revision, "payload": {"type": "null"}},
            ),
        ],
    }
    topic = {
        **text(TOPIC_MAX_BYTES, TOPIC_MAX_BYTES, what="Not blank, no control characters"),
        "allOf": [{"pattern": NO_CONTROL}, {"pattern": "[^\\s\\u0085]"}],
    }
    content = text(CONTENT_MAX_BYTES, CONTENT_MAX_BYTES)
    focus = nullable(text(FOCUS_MAX_BYTES, FOCUS_MAX_BYTES, min_length=0))
    payloads = {
        "SessionPayload": obj(
            {"session_id": ref("Id"), "topic": topic},
            {"source_id": nullable(ref("Id"))},
        ),
        "FactPayload": obj({"fact_id": ref("Id"), "session_id": ref("Id"), "content": content}),
        "HandoffContextPayload": obj(
            {
                "context_id": ref("Id"),
                "handoff_id": ref("Id"),
                "session_id": ref("Id"),
                "to_actor": ref("Id"),
                "content": content,
            }
        ),
        "HandoffPayload": obj(
            {"handoff_id": ref("Id"), "session_id": ref("Id"), "to_actor": ref("Id")},
            {"focus": focus, "done_when": focus, "context_id": nullable(ref("Id"))},
        ),
        "ClaimPayload": obj({"claim_id": ref("Id")}),
        "ReturnPayload": obj(
            {
                "claim_id": ref("Id"),
                "result_fact_id": ref("Id"),
                "outcome": {"type": "string", "enum": ["succeeded", "failed"]},
            },
            {"result_artifact_id": ref("Id")},
        ),
    }
    s.update(payloads)
    for name, payload in (
        ("SessionCreate", "SessionPayload"),
        ("FactCreate", "FactPayload"),
        ("HandoffContextCreate", "HandoffContextPayload"),
        ("HandoffSend", "HandoffPayload"),
    ):
        s[name] = obj({"command_id": ref("Id"), "payload": ref(payload)})
    for name, payload in (
        ("ClaimTransition", "ClaimPayload"),
        ("ReturnTransition", "ReturnPayload"),
    ):
        s[name] = obj(
            {
                "command_id": ref("Id"),
                "expected_revision": integer(1),
                "payload": ref(payload),
            }
        )
    s["LeaseExpired"] = obj(
        {"type": {"const": "lease_expired"}, "handoff_id": ref("Id"), "claim_id": ref("Id")}
    )
    s["LiveMessage"] = {
        "description": "One text message of the live change feed (LIVE-2..LIVE-7): a change "
        "batch in the shape of /changes/materialized, a lease notice, or an error just before "
        "the close.",
        "oneOf": [ref("MaterializedBatch"), ref("LeaseExpired"), ref("Error")],
    }


def _page(
    name: str, most: int, record: Schema, cursor: str, optional: dict[str, Schema] | None = None
) -> Schema:
    """A page of records: `{<name>: [{project_seq, revision, record}], <cursor>: seq or null}`."""
    entry = obj(
        {"project_seq": ref("Seq"), "revision": ref("Revision"), "record": record}, optional
    )
    return obj(
        {
            name: {"type": "array", "maxItems": most, "items": entry},
            cursor: nullable(ref("Seq")),
        }
    )
