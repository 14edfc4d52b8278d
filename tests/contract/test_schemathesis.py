"""Schemathesis against a live uvicorn server: no 5xx, no answer outside the OpenAPI document.

The server runs in a thread on a loopback socket, over a SQLite file, with a bootstrapped
writer token sent as the bearer on every case. Generation is derandomized and bounded, so the
run is deterministic and short. Valid project ids are pinned to the provisioned project so
cases reach the domain rules instead of stopping at 403.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("uvicorn")
requests = pytest.importorskip("requests")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from aidememo.bodies.memory import MemoryBodies  # noqa: E402
from aidememo.domain.ids import is_valid_id  # noqa: E402
from aidememo.domain.model import Role  # noqa: E402
from aidememo.http.app import HttpApp  # noqa: E402
from aidememo.http.openapi import document  # noqa: E402
from aidememo.http.routes import ROUTES  # noqa: E402
from aidememo.stores.sqlite.store import SqliteStore  # noqa: E402
from tests.contract.live import LiveServer  # noqa: E402
from tests.contract.support import EPOCH, PROJECT, RECEIVER, TENANT, WRITER  # noqa: E402

MAX_EXAMPLES = 20
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Any]]:
    """`(base_url, writer token, keep-alive session)` of a live server on a fresh project."""
    path: Path = tmp_path_factory.mktemp("schemathesis") / "ssot.sqlite"
    store = SqliteStore.open_file(path, synchronous="OFF")  # durability is not tested here
    app = HttpApp(store, bodies=MemoryBodies())  # artifact bodies (ART-*) in memory
    tokens: dict[str, str] = {}
    for actor, role in ((WRITER, Role.WRITER), (RECEIVER, Role.WRITER)):
        tokens[actor] = secrets.token_hex(32)
        app.services.identity.bootstrap(
            tenant_id=TENANT,
            project_id=PROJECT,
            actor_id=actor,
            role=role,
            project_epoch=EPOCH,
            token_sha256=hashlib.sha256(tokens[actor].encode()).digest(),
        )
    try:
        with LiveServer(app) as server, requests.Session() as session:
            yield server.url, tokens[WRITER], session
    finally:
        store.close()


# Admin imports are JSON Lines: sent as the text they are.
schemathesis.serializer.alias("application/x-ndjson", "text/plain")
schema = schemathesis.openapi.from_dict(document(ROUTES))


@schema.parametrize()  # type: ignore[untyped-decorator]
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_http2_http15_openapi_schemathesis_no_5xx_and_every_answer_in_the_schema(
    case: Any, live: tuple[str, str, Any]
) -> None:
    base_url, token, session = live
    if is_valid_id(case.path_parameters.get("project_id") if case.path_parameters else None):
        case.path_parameters["project_id"] = PROJECT
    if isinstance(case.body, dict) and is_valid_id(case.body.get("project_id")):
        case.body["project_id"] = PROJECT
    case.call_and_validate(
        base_url=base_url,
        session=session,
        headers={"Authorization": f"Bearer {token}"},
        checks=CHECKS,
        timeout=30,
    )
