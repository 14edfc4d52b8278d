"""A `Services` is given everything when it is built, and refuses writes after (SPEC.md EDGE-8).

At run time: every attribute of a `Services`, and the settings of its search and archive,
refuse a write. In the source: no code of `aidememo/`, `origin/`, `worker/` or
`durable_objects/` assigns an attribute reached through `services` (which would also catch a
write into a use case whose class does not refuse it).
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from aidememo.bodies.memory import MemoryBodies
from aidememo.domain.clock import FixedClock, RandomIds
from aidememo.http.app import HttpApp
from aidememo.http.services import Services
from aidememo.stores.in_memory import InMemoryStore

ROOT = Path(__file__).resolve().parents[2]
PRODUCT_DIRS = ("aidememo", "origin", "worker", "durable_objects")


def _services() -> Services:
    return Services(InMemoryStore(), FixedClock(1), RandomIds(), 60_000, bodies=MemoryBodies())


def test_edge8_services_refuse_every_write_after_they_are_built() -> None:
    services = _services()
    for name in Services.__slots__:
        with pytest.raises(AttributeError):
            setattr(services, name, None)
        with pytest.raises(AttributeError):
            delattr(services, name)
    with pytest.raises(AttributeError):
        setattr(services, "anything_new", 1)  # noqa: B010


def test_edge8_search_and_archive_settings_are_given_at_build_time() -> None:
    services = Services(
        InMemoryStore(),
        FixedClock(1),
        RandomIds(),
        60_000,
        bodies=MemoryBodies(),
        console_key=b"k" * 32,
        search_wait_s=0,
    )
    assert services.searches.wait_s == 0
    assert services.console_key == b"k" * 32
    assert services.archive.bodies is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        services.searches.wait_s = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        services.searches.engine = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        services.archive.bodies = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        services.archive.grant_window_ms = 5  # type: ignore[misc]


def test_edge8_an_app_gives_its_services_the_console_key() -> None:
    given = HttpApp(InMemoryStore(), console_key=b"c" * 32)
    assert given.services.console_key == b"c" * 32
    fresh = HttpApp(InMemoryStore())  # a fresh key per app: a cookie dies with its process
    assert fresh.services.console_key is not None and len(fresh.services.console_key) == 32


def _writes_through_services(source: str, where: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            chain = ast.unparse(target.value) if isinstance(target, ast.Attribute) else ""
            if "services" in chain.split("."):
                found.append(f"{where}:{target.lineno}: {ast.unparse(target)}")
    return found


def test_edge8_no_code_writes_into_services() -> None:
    assert _writes_through_services("app.services.searches.engine = x", "s")
    assert _writes_through_services("services.console_key = k", "s")
    assert not _writes_through_services("self.services = Services(store)", "s")
    found: list[str] = []
    for directory in PRODUCT_DIRS:
        for path in sorted((ROOT / directory).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            found += _writes_through_services(path.read_text(encoding="utf-8"), rel)
    assert not found, "\n".join(found)
