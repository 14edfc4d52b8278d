"""The router (aidememo/http/routing.py) answers every path and method as a scan of the whole
route table in order would (SPEC.md HTTP-1: 404 for no path, 405 with the allowed methods)."""

from __future__ import annotations

import itertools
from typing import Any

from aidememo.http.routes import ROUTES, resolve
from aidememo.http.routing import Match, Route, Router

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _scan(method: str, path: str, routes: tuple[Route, ...] = ROUTES) -> Match:
    """The rule itself: the first route of the table whose pattern matches the path (a
    parameter matches any non-empty segment) and whose method is the request's; else the
    methods of every route whose pattern matches."""
    segments = path.strip("/").split("/") if path not in ("", "/") else [""]
    allowed: list[str] = []
    for route in routes:
        if len(route.pattern) != len(segments):
            continue
        params: dict[str, str] | None = {}
        for want, got in zip(route.pattern, segments, strict=True):
            if want.startswith("{"):
                if not got:
                    params = None
                    break
                assert params is not None
                params[want[1:-1]] = got
            elif want != got:
                params = None
                break
        if params is None:
            continue
        if route.method == method:
            return Match(route, params, ())
        allowed.append(route.method)
    return Match(None, {}, tuple(allowed))


def _paths(route: Route) -> list[str]:
    """Paths near a route's pattern: filled in, with a parameter empty, a segment changed,
    a segment more or less, and a trailing slash."""
    filled = ["x1" if seg.startswith("{") else seg for seg in route.pattern]
    out = ["/" + "/".join(filled), "/" + "/".join(filled) + "/"]
    for at, seg in enumerate(route.pattern):
        changed = list(filled)
        changed[at] = "" if seg.startswith("{") else seg + "x"
        out.append("/" + "/".join(changed))
        out.append("/" + "/".join([*filled[:at], "zz", *filled[at:]]))
        out.append("/" + "/".join(filled[:at] + filled[at + 1 :]))
    return out


def test_http1_the_router_answers_as_a_scan_of_the_table() -> None:
    paths = {"", "/", "//", "/v1", "/v1/projects", "/nope/x/y"}
    for route in ROUTES:
        paths.update(_paths(route))
        # every other route's literal segments in this route's parameter slots
        for other in ROUTES:
            if len(other.pattern) == len(route.pattern):
                mixed = [
                    b if a.startswith("{") and not b.startswith("{") else "p"
                    for a, b in zip(route.pattern, other.pattern, strict=True)
                ]
                paths.add("/" + "/".join(mixed))
    checked = 0
    for path, method in itertools.product(sorted(paths), METHODS):
        got, want = resolve(method, path), _scan(method, path)
        assert got.route is want.route, (method, path)
        assert got.params == want.params and got.allowed == want.allowed, (method, path)
        checked += 1
    assert checked > 1000


def _never(*_: Any) -> Any:
    raise AssertionError("not called")


def test_http1_a_literal_and_a_parameter_in_the_last_segment_keep_the_table_order() -> None:
    """A table where a path ending in a literal also matches routes ending in a parameter,
    before and after it: the first in table order wins, and a 405 names them all."""
    table = tuple(
        Route(f"r{n}", method, path, _never, "")
        for n, (method, path) in enumerate(
            [
                ("GET", "/a/{x}"),
                ("POST", "/a/b"),
                ("PUT", "/a/{x}"),
                ("DELETE", "/{z}/b"),
                ("GET", "/a/b/{y}"),
                ("PATCH", "/a/b/c"),
                ("GET", "/{z}/{w}/c"),
            ]
        )
    )
    router = Router(table)
    paths = ["/a/b", "/a/q", "/q/b", "/a/", "/a/b/c", "/a/b/q", "/q/b/c", "/a//c", "/", "/a"]
    for path, method in itertools.product(paths, METHODS):
        got, want = router.resolve(method, path), _scan(method, path, table)
        assert got.route is want.route, (method, path)
        assert got.params == want.params and got.allowed == want.allowed, (method, path)
    assert router.resolve("GET", "/a/b").route is table[0]
    assert router.resolve("OPTIONS", "/a/b").allowed == ("GET", "POST", "PUT", "DELETE")
