"""A request's query parameters as its route declares them (`Route.query`, HTTP-16): read once,
by the pipeline (`parse_query`), kept on the request, and taken from there by the handler
(`query_of`)."""

from __future__ import annotations

from typing import Any

from aidememo.http.query import IDENTITY_PARAMS, read_params
from aidememo.http.types import Request, Route


def parse_query(route: Route, request: Request) -> dict[str, Any]:
    """`request`'s query parameters read against `route.query` (`read_params`), once: the
    values are kept on the request (`Request.query_values`) and a later call answers them.
    Who the caller is comes from the token, so a member or public route refuses `actor_id`
    and `tenant_id` by name; an admin route, which names no caller, as unknown parameters."""
    values = request.query_values
    if values is None:
        forbidden = frozenset() if route.admin else IDENTITY_PARAMS
        values = read_params(request.query, route.query, forbidden=forbidden)
        request.query_values = values
    return values


def query_of(request: Request) -> dict[str, Any]:
    """The query parameters `parse_query` read for `request`'s route: what a handler (or a
    front's step of it) is given. Every front runs the pipeline, which reads them first."""
    values = request.query_values
    assert values is not None, "the pipeline reads the query before any handler runs"
    return values
