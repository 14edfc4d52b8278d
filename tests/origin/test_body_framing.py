"""Every HTTP rule answers the same however a request body's bytes arrive (SPEC.md HTTP-1,
HTTP-9, ART-3), against a real `aidememo serve` on SQLite and on PostgreSQL.

Every route of the route table that takes a body (one with a body schema, and every other
route but a `GET`: the pipeline reads a body sent to it) gets its cases of
`tests.origin.framing_cases` in the three framings of `tests.origin.framing_support`: with a
`Content-Length`, chunked in one chunk, chunked in several chunks written apart. A case's
status and error code are the same in all three, a well-formed request succeeds and a
refusal gets its own code. The one rule about the framing itself is ART-3's: an upload
without a `Content-Length` is 411 `length_required`, in one chunk as in several, whatever its
bytes. The grant routes run on a server whose bodies are in the test S3 store (SeaweedFS,
started by `scripts/test`); every other route on one with local bodies.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from aidememo.http.routes import ROUTES, Route
from tests import pg
from tests.origin.framing_cases import (
    Cases,
    Project,
    admin_cases,
    bodyless_cases,
    grant_cases,
    member_cases,
    upload_cases,
)
from tests.origin.framing_support import FRAMINGS, Site, outcome, send, serving
from tests.s3 import fresh_prefix, s3_endpoint
from tests.s3bodies.test_s3_serve import _aws, _flags

BODY_ROUTES = [r for r in ROUTES if r.body is not None or r.method != "GET"]
GRANT_ROUTES = {"artifact_upload_grant", "artifact_download_grant"}
Served = tuple[Site, dict[str, Cases]]  # a server and the cases of the routes it answers
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@contextmanager
def database(backend: str, tmp: Path) -> Iterator[str]:
    """A new database of `backend`: a SQLite path or a PostgreSQL URL."""
    if backend == "sqlite":
        yield str(tmp / "framing.sqlite")
        return
    with pg.fresh_database() as db:
        yield db.url


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def local(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Every non-grant route's cases, on a server with local bodies."""
    tmp = tmp_path_factory.mktemp(f"framing-{backend}")
    with (
        database(backend, tmp) as url,
        serving(tmp, url, "--artifact-root", str(tmp / "b")) as site,
    ):
        project = Project(site)
        cases = {
            **member_cases(project),
            "artifact_upload": upload_cases(project),
            **admin_cases(project),
            **bodyless_cases(project),
        }
        yield site, cases


@pytest.fixture(scope="module")
def granting(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The grant routes' cases, on a server whose bodies are in the test S3 store."""
    s3 = s3_endpoint()
    tmp = tmp_path_factory.mktemp(f"framing-s3-{backend}")
    with database(backend, tmp) as url:
        with serving(tmp, url, *_flags(s3, fresh_prefix()), **_aws(s3)) as site:
            yield site, grant_cases(Project(site))


def test_http1_every_route_that_takes_a_body_has_framing_cases(
    local: Served, granting: Served
) -> None:
    names = {r.name for r in BODY_ROUTES}
    assert set(local[1]) | set(granting[1]) == names
    assert not set(local[1]) & set(granting[1])
    assert len(names) == 23, sorted(names)  # the 18 with a body schema, the 5 without
    for name, cases in {**local[1], **granting[1]}.items():
        assert "valid" in cases and len(cases) >= 3, name


def _answers(
    site: Site, route: Route, cases: Cases
) -> dict[str, dict[str, tuple[int, str | None]]]:
    """Each case's outcome in each framing."""
    return {
        case: {f: outcome(send(site.port, route.method, make(f), f)) for f in FRAMINGS}
        for case, (_, make) in cases.items()
    }


@pytest.mark.parametrize("route", BODY_ROUTES, ids=[r.name for r in BODY_ROUTES])
def test_http1_http9_a_route_answers_alike_however_its_body_is_framed(
    request: pytest.FixtureRequest, backend: str, route: Route
) -> None:
    fixture = "granting" if route.name in GRANT_ROUTES else "local"
    site, table = request.getfixturevalue(fixture)
    cases = table[route.name]  # a new route without cases fails here
    for case, answers in _answers(site, route, cases).items():
        expected = cases[case][0]
        alike = answers
        if route.name == "artifact_upload" and case not in {"media type", "no token"}:
            chunked = {answers["one_chunk"], answers["chunks"]}
            assert chunked == {(411, "length_required")}, f"{case}: {answers}"
            alike = {"length": answers["length"]}
        assert len(set(alike.values())) == 1, f"{route.name} {case}: {answers}"
        status, code = answers["length"]
        if expected is None:
            assert 200 <= status < 300 and code is None, f"{route.name} {case}: {answers}"
        else:
            assert code == expected, f"{route.name} {case}: {answers}"


def test_art3_an_upload_without_a_length_is_411_in_one_chunk_or_several(
    local: Served,
) -> None:
    route = next(r for r in ROUTES if r.name == "artifact_upload")
    site, table = local
    answers = _answers(site, route, {"valid": table["artifact_upload"]["valid"]})["valid"]
    assert answers == {
        "length": (200, None),
        "one_chunk": (411, "length_required"),
        "chunks": (411, "length_required"),
    }
