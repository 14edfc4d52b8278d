"""Every HTTP rule answers the same however a request body's bytes arrive (SPEC.md HTTP-1,
HTTP-9, ART-3), against a real `aidememo serve` on SQLite and on PostgreSQL.

Every route of the route table that takes a body (one with a body schema, and every other
route but a `GET`: the pipeline reads a body sent to it) gets its cases of
`tests.origin.framing_cases` in the three framings of `tests.origin.framing_support`: with a
`Content-Length`, chunked in one chunk, chunked in several chunks written apart. A case's
status and error code are the same in all three, a well-formed request succeeds and a
refusal gets its own code, with the same answer byte for byte in every framing (but the
headers HTTP-9 lets differ) and on both stores. The one rule about the framing itself is
ART-3's: an upload without a `Content-Length` is 411 `length_required`, in one chunk as in
several, whatever its bytes. The grant routes run on a server whose bodies are in the test S3
store (SeaweedFS, started by `scripts/test`); every other route on one with local bodies.
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
from tests.origin.framing_support import FRAMINGS, Site, alike, outcome, send, serving
from tests.origin.http_support import Answer
from tests.s3 import fresh_prefix, s3_endpoint
from tests.s3bodies.test_s3_serve import _aws, _flags

BODY_ROUTES = [r for r in ROUTES if r.body is not None or r.method != "GET"]
GRANT_ROUTES = {"artifact_upload_grant", "artifact_download_grant"}
BEFORE_THE_HANDLER = {"media type", "no token"}  # refused by stage one of HTTP-1, before ART-3
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
    schemaless = {"artifact_upload_grant", "artifact_abort", "admin_delete_tenant"}
    schemaless |= {"console_sign_in", "console_sign_out"}
    streamed = {r.name for r in ROUTES if r.streamed}
    assert streamed == {"artifact_upload", "admin_import"} and schemaless <= names
    for name, cases in {**local[1], **granting[1]}.items():
        assert cases["valid"][0] is None, name
        assert any(expected is not None for expected, _ in cases.values()), name


def _answers(site: Site, route: Route, cases: Cases) -> dict[str, dict[str, Answer]]:
    """Each case's answer in each framing."""
    return {
        case: {f: send(site.port, route.method, make(f), f) for f in FRAMINGS}
        for case, (_, make) in cases.items()
    }


# Each case's outcomes and refusals by backend (when both run): no answer depends on the store.
ANSWERED: dict[tuple[str, str], dict[str, object]] = {}


@pytest.mark.parametrize("route", BODY_ROUTES, ids=[r.name for r in BODY_ROUTES])
def test_http1_http9_a_route_answers_alike_however_its_body_is_framed(
    request: pytest.FixtureRequest, backend: str, route: Route
) -> None:
    fixture = "granting" if route.name in GRANT_ROUTES else "local"
    site, table = request.getfixturevalue(fixture)
    cases = table[route.name]  # a new route without cases fails here
    for case, answers in _answers(site, route, cases).items():
        expected = cases[case][0]
        seen = {f: outcome(answer) for f, answer in answers.items()}
        said = f"{route.name} {case}: {seen}"
        groups = [answers]  # the framings whose answers must be alike
        if route.name == "artifact_upload" and case not in BEFORE_THE_HANDLER:
            assert {seen["one_chunk"], seen["chunks"]} == {(411, "length_required")}, said
            groups = [{"length": answers["length"]}, {f: answers[f] for f in FRAMINGS[1:]}]
        for group in groups:
            assert len({seen[f] for f in group}) == 1, said
            if seen[next(iter(group))][1] is not None:  # ids differ per framing but in refusals
                assert len({repr(alike(a)) for a in group.values()}) == 1, said
        status, code = seen["length"]
        if expected is None:
            assert 200 <= status < 300 and code is None, said
        else:
            assert code == expected, said
        refusals = {f: repr(alike(a)) for f, a in answers.items() if seen[f][1] is not None}
        ANSWERED.setdefault((route.name, case), {})[backend] = (seen, refusals)
        assert len({repr(v) for v in ANSWERED[route.name, case].values()}) == 1, (
            f"{route.name} {case} differs between backends: {ANSWERED[route.name, case]}"
        )


def test_art3_an_upload_without_a_length_is_411_in_one_chunk_or_several(
    local: Served,
) -> None:
    route = next(r for r in ROUTES if r.name == "artifact_upload")
    site, table = local
    answers = _answers(site, route, {"valid": table["artifact_upload"]["valid"]})["valid"]
    assert {f: outcome(answer) for f, answer in answers.items()} == {
        "length": (200, None),
        "one_chunk": (411, "length_required"),
        "chunks": (411, "length_required"),
    }
