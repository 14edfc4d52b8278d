#!/usr/bin/env python3
"""Screenshots of the console's main pages into docs/console/*.png (SPEC.md CONSOLE-1).

Starts a real `aidememo serve` on SQLite, lets two agents work through the `aidememo` CLI (a
session with facts, handoffs left sent, claimed, failed once and completed, an artifact), signs
in as one of them in headless Chromium (Debian's `chromium`, driven by Playwright) and saves
the handoff board, the overview, a session's timeline, a search and the artifacts page.
Run from the repository root: `.venv/bin/python scripts/console_screenshots.py`.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.console.support import browser, console_server, make_team, sign_in  # noqa: E402

OUT = REPO / "docs" / "console"


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="console-shots-") as tmp:
        folder = Path(tmp)
        with console_server("sqlite", folder) as server:
            team = make_team(server, folder)
            sid = team.session("alice", "Release 2.4: migrate the billing exports")
            team.fact("alice", sid, "The exports job reads the ledger through the v1 view.")
            team.fact("alice", sid, "Customers on the EU shard need the CSV in UTF-8 with BOM.")

            def send(focus: str) -> str:
                answer = team.as_(
                    "alice", "handoff", "send", "--session", sid, "--to", "bob", "--focus", focus
                )
                return str(answer["receipt"]["resource"]["id"])

            done = send("Port the exports job to the v2 ledger view")
            failed = send("Benchmark the CSV writer on the EU shard")
            claimed = send("Review the migration runbook")
            send("Draft the customer announcement")
            team.as_("bob", "handoff", "accept", done)
            body = folder / "plan.md"
            body.write_text("# Migration plan\n\n1. Switch the view.\n2. Re-run the exports.\n")
            path = f"sessions/{sid}/artifacts/plan.md"
            team.as_("bob", "artifact", "put", path, str(body), "--content-type", "text/markdown")
            result = team.fact("bob", sid, "Exports job now reads ledger v2; 3 reports verified.")
            team.as_("bob", "handoff", "return", done, "--result-fact", result)
            team.as_("bob", "handoff", "accept", failed)
            note = team.fact("bob", sid, "CSV writer benchmark blocked: no EU shard credentials.")
            team.as_(
                "bob", "handoff", "return", failed, "--result-fact", note, "--outcome", "failed"
            )
            team.as_("bob", "handoff", "accept", claimed)
            with browser(folder) as page:
                sign_in(page, server.url, team.tokens["alice"])
                page.wait_for_timeout(500)
                page.screenshot(path=str(OUT / "handoffs.png"))
                for name, at in (
                    ("overview", "overview"),
                    ("timeline", f"session/{sid}"),
                    ("search", "search?q=exports%20ledger"),
                    ("artifacts", "artifacts"),
                ):
                    page.goto(f"{server.url}/console#/{at}")
                    page.wait_for_timeout(700)
                    page.screenshot(path=str(OUT / f"{name}.png"))
    for shot in sorted(OUT.glob("*.png")):
        print(shot.relative_to(REPO))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
