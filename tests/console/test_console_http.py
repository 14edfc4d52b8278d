"""The console's routes over HTTP, on `aidememo serve` (SQLite, PostgreSQL) and on the edge
runtime double: its files and their headers, sign-in and sign-out, what the cookie may and may
not do, revocation (SPEC.md CONSOLE-1..CONSOLE-4)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import websockets

from aidememo.http.console_handlers import CONTENT_SECURITY_POLICY
from tests.cli.agent_support import PROJECT, Server, provision
from tests.console.support import Team, make_team

CONSOLE = {"x-aidememo-console": "1"}


@contextmanager
def _signed_in(server: Server, token: str) -> Iterator[httpx.Client]:
    """A client holding the console cookie of `token`, as the browser would."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        answer = client.post(
            "/console/session",
            headers={**CONSOLE, "origin": server.url, "authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 200, answer.text
        yield client


def _team_tokens(server: Server, tmp: Any) -> dict[str, str]:
    from tests.cli.agent_support import Cli

    home = tmp / "cli-home"
    home.mkdir()
    cli = Cli(home)
    return {a: provision(cli, server, a).read_text().strip() for a in ("alice", "bob")}


def test_console1_files_are_served_with_a_strict_policy(server: Server) -> None:
    page = httpx.get(f"{server.url}/console", timeout=30)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["x-frame-options"] == "DENY"
    assert "<script>" not in page.text and 'type="module"' in page.text
    script = httpx.get(f"{server.url}/console/console.js", timeout=30)
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javas")
    for name in ("nope.js", "..", "%2e%2e%2fpyproject.toml", "__init__.py"):
        missing = httpx.get(f"{server.url}/console/{name}", timeout=30)
        assert missing.status_code == 404, name
        assert missing.json()["error"]["code"] == "route_not_found"


def test_console2_sign_in_sets_an_httponly_strict_cookie_without_the_token(
    server: Server, tmp_path: Any
) -> None:
    tokens = _team_tokens(server, tmp_path)
    answer = httpx.post(
        f"{server.url}/console/session",
        headers={**CONSOLE, "origin": server.url, "authorization": f"Bearer {tokens['alice']}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["actor_id"] == "alice"
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Max-Age=3600" in cookie
    assert tokens["alice"] not in cookie
    assert hashlib.sha256(tokens["alice"].encode()).hexdigest() not in cookie
    bad = httpx.post(
        f"{server.url}/console/session",
        headers={**CONSOLE, "origin": server.url, "authorization": "Bearer not-a-token"},
        timeout=30,
    )
    assert bad.status_code == 401
    assert "set-cookie" not in bad.headers


def test_console3_cookie_reads_but_never_writes(server: Server, tmp_path: Any) -> None:
    tokens = _team_tokens(server, tmp_path)
    with _signed_in(server, tokens["alice"]) as client:
        identity = client.get(f"/v1/projects/{PROJECT}/identity")
        assert identity.status_code == 200 and identity.json()["actor_id"] == "alice"
        assert client.get(f"/v1/projects/{PROJECT}/members").status_code == 200
        write = client.post(
            f"/v1/projects/{PROJECT}/sessions",
            json={"command_id": str(uuid.uuid4()), "payload": {"topic": "forged"}},
            headers={"origin": server.url},
        )
        assert write.status_code == 401
        assert write.json()["error"]["code"] == "authentication_failed"
        # The bearer header, when sent, wins over the cookie.
        other = client.get(
            f"/v1/projects/{PROJECT}/identity",
            headers={"authorization": f"Bearer {tokens['bob']}"},
        )
        assert other.json()["actor_id"] == "bob"
        # A download is a read by POST: only from the console's own origin.
        cross = client.post(
            f"/v1/projects/{PROJECT}/artifacts/art_x/downloads",
            json={"revision": 1},
            headers={"origin": "http://evil.test"},
        )
        assert cross.status_code == 403
        assert cross.json()["error"]["code"] == "origin_not_allowed"
        same = client.post(
            f"/v1/projects/{PROJECT}/artifacts/art_x/downloads",
            json={"revision": 1},
            headers={"origin": server.url},
        )
        assert same.status_code == 404  # past authentication: the artifact does not exist


def test_console3_forged_cookie_is_401(server: Server) -> None:
    answer = httpx.get(
        f"{server.url}/v1/projects/{PROJECT}/identity",
        headers={"cookie": "aidememo-console=" + "A" * 96},
        timeout=30,
    )
    assert answer.status_code == 401


def test_console3_live_feed_upgrade_with_cookie_needs_same_origin(
    server: Server, tmp_path: Any
) -> None:
    tokens = _team_tokens(server, tmp_path)
    with _signed_in(server, tokens["alice"]) as client:
        identity = client.get(f"/v1/projects/{PROJECT}/identity").json()
        cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    ws_url = server.url.replace("http://", "ws://")
    query = f"project_epoch={identity['project_epoch']}&after_seq=0"
    url = f"{ws_url}/v1/projects/{PROJECT}/changes/live?{query}"

    async def attempt(origin: str) -> Any:
        headers = {"cookie": cookie, "origin": origin}
        try:
            async with websockets.connect(url, additional_headers=headers, origin=None) as ws:
                return json.loads(await asyncio.wait_for(ws.recv(), 10))
        except websockets.InvalidStatus as refused:
            return refused.response.status_code

    assert asyncio.run(attempt("http://evil.test")) == 403
    first = asyncio.run(attempt(server.url))
    assert isinstance(first, dict) and first["cursor"]["after_seq"] == 0


def test_console3_revoked_token_loses_the_console(server: Server, tmp_path: Any) -> None:
    tokens = _team_tokens(server, tmp_path)
    with _signed_in(server, tokens["alice"]) as client:
        assert client.get(f"/v1/projects/{PROJECT}/identity").status_code == 200
        admin = server.admin_token_file.read_text().strip()
        revoked = httpx.post(
            f"{server.url}/v1/admin/tokens/revoke",
            headers={"authorization": f"Bearer {admin}"},
            json={"token_sha256": hashlib.sha256(tokens["alice"].encode()).hexdigest()},
            timeout=30,
        )
        assert revoked.status_code == 200, revoked.text
        after = client.get(f"/v1/projects/{PROJECT}/identity")
        assert after.status_code == 401


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.test", **CONSOLE},
        {},  # a plain cross-site form: no Origin match, no console header
        {"origin": "SAME"},  # same origin but no console header
    ],
)
def test_console4_sign_in_and_out_refuse_cross_site_requests(
    server: Server, tmp_path: Any, headers: dict[str, str]
) -> None:
    tokens = _team_tokens(server, tmp_path)
    sent = {k: server.url if v == "SAME" else v for k, v in headers.items()}
    sign_in = httpx.post(
        f"{server.url}/console/session",
        headers={**sent, "authorization": f"Bearer {tokens['alice']}"},
        timeout=30,
    )
    assert sign_in.status_code == 403 and "set-cookie" not in sign_in.headers
    assert sign_in.json()["error"]["code"] == "origin_not_allowed"
    sign_out = httpx.delete(f"{server.url}/console/session", headers=sent, timeout=30)
    assert sign_out.status_code == 403 and "set-cookie" not in sign_out.headers
    done = httpx.delete(
        f"{server.url}/console/session", headers={**CONSOLE, "origin": server.url}, timeout=30
    )
    assert done.status_code == 200
    assert all("Max-Age=0" in c for c in done.headers.get_list("set-cookie"))


def test_console2_team_helper_runs(server: Server, tmp_path: Any) -> None:
    team: Team = make_team(server, tmp_path)
    assert set(team.tokens) == {"alice", "bob"}


def test_console2_edge_without_its_key_refuses_sign_in_and_reads_no_cookie(
    tmp_path: Any,
) -> None:
    from tests.edge.loopback import Loopback

    with Loopback(tmp_path / "edge") as edge:  # no CONSOLE_SESSION_KEY secret
        admin = edge.admin_token
        token = os.urandom(16).hex()
        bound = httpx.post(
            f"{edge.url}/v1/admin/bootstrap",
            headers={"authorization": f"Bearer {admin}"},
            json={
                "tenant_id": "t-key",
                "project_id": PROJECT,
                "actor_id": "alice",
                "role": "writer",
                "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
            },
            timeout=30,
        )
        assert bound.status_code == 200, bound.text
        refused = httpx.post(
            f"{edge.url}/console/session",
            headers={**CONSOLE, "origin": edge.url, "authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert refused.status_code == 403 and "set-cookie" not in refused.headers
        assert refused.json()["error"]["code"] == "origin_not_allowed"
        cookie = httpx.get(
            f"{edge.url}/v1/projects/{PROJECT}/identity",
            headers={"cookie": "aidememo-console=" + "A" * 96},
            timeout=30,
        )
        assert cookie.status_code == 401
        assert cookie.json()["error"]["message"] == "missing bearer token"
