"""The matcher of a route table: it tells "no such route" from "wrong method" (HTTP-1).

The values it matches (`Route`, `Match`, `Auth`) are `aidememo.http.types`'; they are named here
too for the fronts that route.
"""

from __future__ import annotations

from aidememo.http.types import JSON, NDJSON, Auth, Match, Route

__all__ = ["JSON", "NDJSON", "Auth", "Match", "Route", "Router"]


_Compiled = tuple[Route, tuple[tuple[int, str], ...], tuple[tuple[int, str], ...]]
"""A route with its literal segments and its parameters, each with its position."""


def _compile(route: Route) -> _Compiled:
    literals: list[tuple[int, str]] = []
    params: list[tuple[int, str]] = []
    for at, want in enumerate(route.pattern):
        if want.startswith("{"):
            params.append((at, want[1:-1]))
        else:
            literals.append((at, want))
    return route, tuple(literals), tuple(params)


def _match(
    segments: list[str],
    literals: tuple[tuple[int, str], ...],
    names: tuple[tuple[int, str], ...],
) -> dict[str, str] | None:
    """The parameters of a path whose length is the route's, or None when it does not match
    (a literal segment differs, or a parameter's segment is empty)."""
    for at, want in literals:
        if segments[at] != want:
            return None
    params: dict[str, str] = {}
    for at, name in names:
        got = segments[at]
        if not got:
            return None
        params[name] = got
    return params


class Router:
    """Finds the route of a method and path in a fixed table.

    Only routes with as many segments as the path can match it, and of those only the ones
    whose last segment is the path's or a parameter: each (length, last segment) has its list
    of candidates made once, in table order, so a request compares its path with a few
    routes, not with every route of its length. The first candidate that matches with the
    request's method wins; the methods of the others that match make a 405's `allowed`."""

    def __init__(self, routes: tuple[Route, ...]) -> None:
        self.routes = routes
        by_last: dict[tuple[int, str], list[int]] = {}
        open_last: dict[int, list[int]] = {}  # routes whose last segment is a parameter
        for at, route in enumerate(routes):
            last, length = route.pattern[-1], len(route.pattern)
            if last.startswith("{"):
                open_last.setdefault(length, []).append(at)
            else:
                by_last.setdefault((length, last), []).append(at)
        compiled = [_compile(route) for route in routes]
        self._by_last = {
            (length, last): tuple(compiled[at] for at in sorted(ats + open_last.get(length, [])))
            for (length, last), ats in by_last.items()
        }
        self._open_last = {
            length: tuple(compiled[at] for at in ats) for length, ats in open_last.items()
        }
        self._by_name = {route.name: route for route in routes}
        if len(self._by_name) != len(routes):
            raise ValueError("route names must be unique")

    def resolve(self, method: str, path: str) -> Match:
        """The route for `method` and `path`; `allowed` is empty when no path matches."""
        segments = path.strip("/").split("/") if path not in ("", "/") else [""]
        length = len(segments)
        candidates = self._by_last.get((length, segments[-1]))
        if candidates is None:
            candidates = self._open_last.get(length, ())
        allowed: list[str] = []
        for route, literals, names in candidates:
            params = _match(segments, literals, names)
            if params is None:
                continue
            if route.method == method:
                return Match(route, params, ())
            allowed.append(route.method)
        return Match(None, {}, tuple(allowed))

    def named(self, name: str) -> Route | None:
        """The route whose `name` is `name`, or None."""
        return self._by_name.get(name)
