"""The OpenAPI document: committed copy in sync, served as is, and covering every route."""

from __future__ import annotations

import json
from pathlib import Path

from aidememo.domain.errors import HTTP_STATUS, ErrorCode
from aidememo.http.openapi import document, document_text, route_errors
from aidememo.http.routes import ROUTES
from tests.contract.support import Api

ROOT = Path(__file__).resolve().parents[2]


def test_http15_openapi_committed_file_equals_generated() -> None:
    committed = (ROOT / "openapi.json").read_text(encoding="utf-8")
    assert committed == document_text(ROUTES), "run scripts/gen_openapi.py and commit openapi.json"


def test_http15_openapi_served_document_equals_generated(api: Api) -> None:
    reply = api.get("/openapi.json", None)
    assert reply.expect(200) == json.loads(document_text(ROUTES))
    assert reply.headers["content-type"].startswith("application/json")


def test_http15_openapi_covers_every_route_with_closed_bodies() -> None:
    doc = document(ROUTES)
    assert doc["openapi"] == "3.1.0"
    for route in ROUTES:
        op = doc["paths"]["/" + "/".join(route.pattern)][route.method.lower()]
        assert op["operationId"] == route.name and op["summary"] == route.summary
        assert ("requestBody" in op) == route.has_body
        if route.admin:
            assert op["security"] == [{"admin": []}]
        else:
            assert (op["security"] == [{"bearer": []}]) == route.authenticated
        # The live feed answers 101 (a WebSocket) when it succeeds (LIVE-1).
        assert ("101" if route.upgrade else "200") in op["responses"]
        for code in route_errors(route):
            response = op["responses"][str(HTTP_STATUS[code])]
            schema = response["content"]["application/json"]["schema"]
            assert (
                code.value
                in schema["allOf"][1]["properties"]["error"]["properties"]["code"]["enum"]
            )
        names = {p["name"] for p in op.get("parameters", [])}
        assert names >= {seg[1:-1] for seg in route.pattern if seg.startswith("{")}
    schemas = doc["components"]["schemas"]
    assert schemas["ErrorCode"]["enum"] == [c.value for c in ErrorCode]

    def closed(schema: object) -> None:
        if isinstance(schema, dict):
            if schema.get("type") == "object" and "properties" in schema:
                assert schema["additionalProperties"] is False, schema
            for value in schema.values():
                closed(value)
        elif isinstance(schema, list):
            for value in schema:
                closed(value)

    closed(schemas)
