"""The console in headless Chromium against real servers (SPEC.md CONSOLE-*): a handoff moving
sent -> claimed -> completed while CLI processes drive it, a lease running out, search, an
artifact download, sign-out, a revoked token losing the console and its live feed, agent text
that executes nothing, cross-site requests refused, accessibility (axe-core) and the keyboard."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.agent_support import PROJECT, Server
from tests.console.support import browser, console_server, make_team, sign_in

REPO = Path(__file__).resolve().parents[2]
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"


def _id(answer: dict[str, Any]) -> str:
    return str(answer["receipt"]["resource"]["id"])


def _status(page: Any, path: str) -> int:
    status: int = page.evaluate(f"fetch({json.dumps(path)}).then((r) => r.status)")
    return status


def test_console1_console2_a_handoff_moves_live_then_search_download_and_sign_out(
    server: Server, tmp_path: Path
) -> None:
    team = make_team(server, tmp_path)
    sid = team.session("alice", "console flow")
    needle = team.fact("alice", sid, "the lexical needle sits in this fact")
    with browser(tmp_path) as page:
        sign_in(page, server.url, team.tokens["alice"])
        assert page.evaluate("document.cookie") == ""  # HttpOnly: script never reads it
        assert team.tokens["alice"] not in page.content()
        hid = _id(
            team.as_(
                "alice", "handoff", "send", "--session", sid, "--to", "bob",
                "--focus", "review the draft",
            )
        )  # fmt: skip
        card = f"li[data-handoff='{hid}']"
        page.wait_for_selector(f"{card}[data-column='sent']")
        team.as_("bob", "handoff", "accept", hid)
        page.wait_for_selector(f"{card}[data-column='claimed'] [data-lease]")
        assert "claimed by bob" in page.inner_text(card)
        result = team.fact("bob", sid, "review done")
        team.as_("bob", "handoff", "return", hid, "--result-fact", result)
        page.wait_for_selector(f"{card}[data-column='completed'] [data-outcome='succeeded']")
        assert "attempts: 1" in page.inner_text(card)
        page.click(f"{card} a[href*='fact=']")  # the result fact, in its session's timeline
        page.wait_for_selector(f"li[data-fact='{result}'][aria-current='true']")

        page.click("#nav a[data-page='search']")
        page.fill("#q", "needle")
        page.press("#q", "Enter")
        explained = page.wait_for_selector(f"li[data-result='{needle}'] [data-explain]")
        assert "score" in explained.inner_text()
        head = page.inner_text("[data-search-head]")  # what ran, as the answer says it
        assert "mode: " in head and "index_seq: " in head and "semantic_model: " in head

        body = tmp_path / "result.txt"
        body.write_bytes(b"artifact bytes for the console\n")
        path = f"sessions/{sid}/artifacts/result.txt"
        put = team.as_("bob", "artifact", "put", path, str(body), "--content-type", "text/plain")
        page.click("#nav a[data-page='artifacts']")
        row = page.wait_for_selector(f"tr[data-artifact='{put['artifact_id']}']")
        assert put["sha256"] in row.inner_text()
        with page.expect_download() as got:
            row.query_selector("button").click()
        saved = got.value.path()
        assert saved is not None and Path(saved).read_bytes() == body.read_bytes()

        page.click("#sign-out")
        page.wait_for_selector("body[data-state='signed-out']")
        assert _status(page, f"/v1/projects/{PROJECT}/identity") == 401


@pytest.mark.parametrize("kind", ["sqlite", "edge"])
def test_console1_a_lease_runs_out_on_the_board(kind: str, tmp_path: Path) -> None:
    with console_server(kind, tmp_path, lease_ms=4_000) as server:
        team = make_team(server, tmp_path)
        sid = team.session("alice", "lease")
        hid = _id(team.as_("alice", "handoff", "send", "--session", sid, "--to", "bob"))
        with browser(tmp_path) as page:
            sign_in(page, server.url, team.tokens["alice"])
            team.as_("bob", "handoff", "accept", hid)
            card = f"li[data-handoff='{hid}']"
            page.wait_for_selector(f"{card}[data-column='claimed']")
            page.wait_for_selector(f"{card}[data-column='expired'] [data-lease-expired]")


def test_console3_a_revoked_token_loses_the_console_and_its_live_feed(
    server: Server, tmp_path: Path
) -> None:
    team = make_team(server, tmp_path)
    with browser(tmp_path) as page:
        sign_in(page, server.url, team.tokens["alice"])
        admin = server.admin_token_file.read_text().strip()
        revoked = httpx.post(
            f"{server.url}/v1/admin/tokens/revoke",
            headers={"authorization": f"Bearer {admin}"},
            json={"token_sha256": hashlib.sha256(team.tokens["alice"].encode()).hexdigest()},
            timeout=30,
        )
        assert revoked.status_code == 200, revoked.text
        page.wait_for_selector("body[data-state='signed-out'][data-feed='closed']")
        assert "no longer valid" in page.inner_text("#sign-in-error")
        assert _status(page, f"/v1/projects/{PROJECT}/identity") == 401


XSS = [
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "javascript:window.__pwned = 'link'",
    "<a href=\"javascript:window.__pwned='a'\">click</a><svg onload=\"window.__pwned='svg'\">",
]


def test_console5_agent_text_with_markup_executes_nothing(tmp_path: Path) -> None:
    with console_server("sqlite", tmp_path) as server:
        team = make_team(server, tmp_path)
        sid = team.session("alice", XSS[1])
        facts = [team.fact("alice", sid, text) for text in XSS]
        team.as_("alice", "handoff", "send", "--session", sid, "--to", "bob", "--focus", XSS[0])
        with browser(tmp_path) as page:
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            sign_in(page, server.url, team.tokens["alice"])
            pages = ["handoffs", "sessions", f"session/{sid}", "search?q=pwned", "overview"]
            for at in pages:
                page.goto(f"{server.url}/console#/{at}")
                page.wait_for_selector("body[data-page]")
                page.wait_for_timeout(300)
                if at.startswith("session/"):
                    page.wait_for_selector(f"li[data-fact='{facts[-1]}']")
                    shown = page.inner_text("#page")
                    for text in XSS:
                        assert text in shown  # shown as the text it is
                assert page.evaluate("window.__pwned") is None
                assert (
                    page.evaluate("document.querySelectorAll('#page img, #page svg').length") == 0
                )
                assert page.evaluate("document.querySelectorAll('script').length") == 1
                hrefs = page.evaluate("[...document.links].map((a) => a.getAttribute('href'))")
                assert all(h.startswith(("#", "/")) for h in hrefs), hrefs
            assert dialogs == []


EVIL = "http://evil.test"


def test_console4_a_cross_site_page_cannot_sign_in_out_or_open_the_feed(tmp_path: Path) -> None:
    with console_server("sqlite", tmp_path) as server:
        team = make_team(server, tmp_path)
        with browser(tmp_path) as page:
            sign_in(page, server.url, team.tokens["alice"])
            identity = page.evaluate(
                f"fetch('/v1/projects/{PROJECT}/identity').then((r) => r.json())"
            )
            evil = page.context.new_page()
            evil.route(
                f"{EVIL}/**",
                lambda route: route.fulfill(
                    status=200, content_type="text/html", body="<!doctype html><p>evil</p>"
                ),
            )
            evil.goto(f"{EVIL}/")
            target = server.url
            outcome = evil.evaluate(
                """async ([target, project, epoch]) => {
                  const out = {};
                  try {
                    await fetch(target + "/console/session", {method: "DELETE",
                      credentials: "include", headers: {"x-aidememo-console": "1"}});
                    out.signOut = "sent";
                  } catch (e) { out.signOut = "blocked"; }
                  try {
                    const r = await fetch(target + "/console/session", {method: "POST",
                      mode: "no-cors", credentials: "include"});
                    out.signIn = r.type;
                  } catch (e) { out.signIn = "blocked"; }
                  out.ws = await new Promise((resolve) => {
                    const ws = new WebSocket(target.replace("http", "ws") +
                      `/v1/projects/${project}/changes/live?project_epoch=${epoch}&after_seq=0`);
                    ws.onmessage = () => resolve("message");
                    ws.onerror = () => resolve("refused");
                    ws.onclose = () => resolve("refused");
                  });
                  return out;
                }""",
                [target, PROJECT, identity["project_epoch"]],
            )
            # The sign-in post leaves opaque (or is blocked outright as a request from a public
            # origin into the loopback network); either way it carries no console header.
            assert outcome["signOut"] == "blocked" and outcome["ws"] == "refused"
            assert outcome["signIn"] in ("opaque", "blocked")
            # A cross-site form post navigates to the refusal, and changes nothing.
            evil.set_content(
                f'<form method="post" action="{target}/console/session"><button>go</button></form>'
            )
            with evil.expect_navigation():
                evil.click("button")
            refused = evil.content()  # no bearer header: refused before anything else
            assert "authentication_failed" in refused and "actor_id" not in refused
            evil.close()
            assert _status(page, f"/v1/projects/{PROJECT}/identity") == 200  # still signed in


def test_console1_pages_pass_axe_and_work_from_the_keyboard(tmp_path: Path) -> None:
    if not AXE.exists():
        pytest.fail("node_modules/axe-core is missing: scripts/test runs npm ci")
    with console_server("sqlite", tmp_path) as server:
        team = make_team(server, tmp_path)
        sid = team.session("alice", "accessibility")
        team.fact("alice", sid, "contrast and keyboard")
        team.as_("alice", "handoff", "send", "--session", sid, "--to", "bob", "--focus", "check")
        with browser(tmp_path) as page:
            page.goto(f"{server.url}/console")
            page.wait_for_selector("body[data-state='signed-out']")
            _no_axe_violations(page, "sign-in")
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.className") == "skip"
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.id") == "project"
            page.keyboard.type(PROJECT)
            page.keyboard.press("Tab")
            page.keyboard.type(team.tokens["alice"])
            page.keyboard.press("Enter")
            page.wait_for_selector("body[data-state='signed-in'][data-feed='open']")
            page.wait_for_selector("li[data-handoff]")
            _no_axe_violations(page, "handoffs")
            for at in ("overview", "sessions", f"session/{sid}", "search?q=keyboard", "artifacts"):
                page.goto(f"{server.url}/console#/{at}")
                page.wait_for_timeout(300)
                _no_axe_violations(page, at)
            # Every page is reachable from the keyboard: Tab to the nav link, Enter.
            page.goto(f"{server.url}/console#/handoffs")
            for _ in range(12):
                page.keyboard.press("Tab")
                if page.evaluate("document.activeElement.dataset.page") == "overview":
                    break
            page.keyboard.press("Enter")
            page.wait_for_selector("body[data-page='overview']")


def _no_axe_violations(page: Any, where: str) -> None:
    page.evaluate(AXE.read_text())  # through DevTools: the page's CSP does not apply
    violations = page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then((r) => r.violations.map("
        "(v) => ({id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' '))})))"
    )
    assert violations == [], (where, violations)
