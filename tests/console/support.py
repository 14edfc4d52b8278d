"""Servers, a team of members and a headless Chromium for the console's browser tier.

Servers (`console_server(kind)`): a real `aidememo serve` on SQLite or on a PostgreSQL
database of the test cluster (`tests.cli.agent_support.start_server`), or the edge runtime
double behind a loopback HTTP server (`tests.edge.loopback.Loopback`) with its console key
secret set. Members are bound over the admin route and act through real `aidememo` CLI
processes. The browser is Debian's `chromium` driven by Playwright from PyPI (never
`playwright install`), with a fresh profile per test.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.cli.agent_support import (
    PROJECT,
    Cli,
    Server,
    login,
    provision,
    start_server,
    write_secret,
)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_KINDS = ("sqlite", "postgres", "edge")
WAIT_MS = 15_000


def chromium_path() -> str:
    """Debian's Chromium; under CI=true its absence fails the tier instead of skipping it."""
    found = shutil.which("chromium") or (CHROMIUM if os.path.exists(CHROMIUM) else None)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (scripts/test installs it under CI=true)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


@contextmanager
def console_server(kind: str, tmp: Path, lease_ms: int | None = None) -> Iterator[Server]:
    """A fresh server of `kind` whose console can be signed in to; `lease_ms`: its handoff
    lease (the default otherwise)."""
    if kind != "edge":
        if kind == "postgres" and not os.environ.get("AIDEMEMO_TEST_PG_URL"):
            if os.environ.get("CI") == "true":
                pytest.fail("AIDEMEMO_TEST_PG_URL is not set")
            pytest.skip("AIDEMEMO_TEST_PG_URL is not set")
        lease = () if lease_ms is None else ("--handoff-lease-ms", str(lease_ms))
        with start_server(kind, tmp, *lease) as server:
            yield server
        return
    from tests.edge.loopback import Loopback

    variables = {"CONSOLE_SESSION_KEY": os.urandom(32).hex()}
    if lease_ms is not None:
        variables["HANDOFF_LEASE_MS"] = str(lease_ms)
    with Loopback(tmp / "edge", vars=variables) as edge:
        admin = write_secret(tmp / "admin.token", edge.admin_token)
        yield Server(kind, edge.url, admin, edge.stop)


@dataclass
class Team:
    """Members of the test project with CLI profiles: `alice` sends, `bob` receives."""

    server: Server
    cli: Cli
    tokens: dict[str, str] = field(default_factory=dict)

    def add(self, actor: str, role: str = "writer") -> str:
        token_file = provision(self.cli, self.server, actor, role)
        result = login(self.cli, self.server, actor, token_file)
        assert result.code == 0, result
        self.tokens[actor] = token_file.read_text().strip()
        return self.tokens[actor]

    def as_(self, actor: str, *args: str) -> Any:
        return self.cli.as_(actor, *args)

    def session(self, actor: str, topic: str) -> str:
        answer = self.as_(actor, "session", "new", topic)
        return str(answer["receipt"]["resource"]["id"])

    def fact(self, actor: str, session: str, content: str) -> str:
        answer = self.as_(actor, "fact", "add", "--session", session, content)
        return str(answer["receipt"]["resource"]["id"])


def make_team(server: Server, tmp: Path) -> Team:
    home = tmp / "cli-home"
    home.mkdir()
    team = Team(server, Cli(home))
    team.add("alice")
    team.add("bob")
    return team


@contextmanager
def browser(tmp: Path) -> Iterator[Any]:
    """A Chromium context with a fresh profile directory; yields its first page."""
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    profile = tmp / "chromium-profile"
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_FLAGS,
            accept_downloads=True,
            viewport={"width": 1280, "height": 860},
        )
        context.set_default_timeout(WAIT_MS)
        try:
            page = context.pages[0] if context.pages else context.new_page()
            yield page
        finally:
            context.close()


def sign_in(page: Any, url: str, token: str, project: str = PROJECT) -> None:
    """Sign in through the console's form and wait for the live feed's first page."""
    page.goto(f"{url}/console")
    page.fill("#project", project)
    page.fill("#token", token)
    page.click("#sign-in-form button[type=submit]")
    page.wait_for_selector("body[data-state='signed-in'][data-feed='open'][data-rendered]")
