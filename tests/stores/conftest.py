"""Fixtures of the PostgreSQL store tests: the driver parameter and a fresh migrated schema."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import pg


@pytest.fixture(params=pg.DRIVERS)
def driver(request: pytest.FixtureRequest) -> str:
    """Each DB-API driver the store runs on (psycopg at the origin, pg8000 at the edge)."""
    return str(request.param)


@pytest.fixture
def db() -> Iterator[pg.Database]:
    """A fresh, migrated schema on the test cluster (a module may override it)."""
    with pg.fresh_database() as database:
        yield database
