"""Every answer the contract suite sees is checked against the OpenAPI document.

So the whole suite, on every backend, doubles as a response-schema test: the status must be
documented for the route, the content type must be the documented one, and the body must
validate against the documented schema (with its error-code enum). Requests that match no
route (404 `route_not_found`, 405) are checked for the error shape only.
"""

from __future__ import annotations

import functools
from typing import Any

from aidememo.http.openapi import document
from aidememo.http.routes import ROUTES, resolve

try:
    import jsonschema_rs
except ImportError:  # pragma: no cover - comes with schemathesis in the test extra
    jsonschema_rs = None  # type: ignore[assignment]


@functools.cache
def _document() -> dict[str, Any]:
    return document(ROUTES)


@functools.cache
def _validator(method: str, path_template: str, status: str) -> Any:
    doc = _document()
    response = doc["paths"][path_template][method]["responses"][status]
    media, content = next(iter(response["content"].items()))
    # The schema sits in a root that also holds the components, so "#/components/..." resolves.
    root = {"components": doc["components"], **content["schema"]}
    return media, jsonschema_rs.Draft202012Validator(root) if jsonschema_rs else None


@functools.cache
def _error_validator() -> Any:
    doc = _document()
    root = {"components": doc["components"], "$ref": "#/components/schemas/Error"}
    return jsonschema_rs.Draft202012Validator(root) if jsonschema_rs else None


def check_response(method: str, path: str, status: int, headers: dict[str, str], body: Any) -> None:
    """Assert that this answer is one the OpenAPI document allows."""
    match = resolve(method, path)
    content_type = headers.get("content-type", "")
    if match.route is None:
        assert status in (404, 405), (method, path, status)
        assert content_type == "application/json"
        validator = _error_validator()
        if validator is not None:
            validator.validate(body)
        return
    template = "/" + "/".join(match.route.pattern)
    operation = _document()["paths"][template][method.lower()]
    assert str(status) in operation["responses"], (
        f"{method} {template} answered {status}, which the document does not list: {body}"
    )
    if "content" not in operation["responses"][str(status)]:
        assert body is None, (method, path, status, body)  # a 202 without a body
        return
    media, validator = _validator(method.lower(), template, str(status))
    assert content_type.split(";")[0].strip() == media, (content_type, media)
    if validator is not None and media == "application/json":
        errors = [e.message for e in validator.iter_errors(body)]
        assert not errors, (method, path, status, errors[:3], body)
