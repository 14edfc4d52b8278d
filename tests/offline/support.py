"""A team of CLI profiles against a real server behind `FaultProxy` (tests/offline).

`team(kind, tmp)` starts a server of `kind` (`tests.cli.agent_support.start_server`: an
`aidememo serve` process on SQLite or PostgreSQL, or the edge double on a loopback port),
puts a `FaultProxy` in front of it, provisions the members and logs each in under a profile
of its own name at the proxy's URL. `Team.http` reaches the server directly, as a member,
for the checks the scenario makes beside the CLI.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.cli.agent_support import PROJECT, Cli, Result, Server, provision, start_server
from tests.offline.fault_proxy import FaultProxy

P = f"/v1/projects/{PROJECT}"
MEMBERS = (("codex-a", "writer"), ("codex-b", "writer"), ("hermes", "writer"),
           ("outsider", "reader"))  # fmt: skip


@dataclass
class Team:
    server: Server
    proxy: FaultProxy
    cli: Cli
    tokens: dict[str, str] = field(default_factory=dict)

    def run(self, profile: str, *args: str) -> Result:
        return self.cli.run(*args, "--profile", profile)

    def ok(self, profile: str, *args: str) -> Result:
        result = self.run(profile, *args)
        assert result.code == 0, (args, result)
        return result

    def json(self, profile: str, *args: str) -> Any:
        return self.ok(profile, *args, "--json").json()

    def http(self, method: str, path: str, actor: str, **kw: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {self.tokens[actor]}"}
        return httpx.request(method, self.server.url + path, headers=headers, timeout=30, **kw)

    def get(self, path: str, actor: str, **params: Any) -> Any:
        answer = self.http("GET", path, actor, params=params)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def box(self, actor: str, box: str, handoff_id: str) -> int:
        """How often `handoff_id` is in `actor`'s inbox or outbox, completed ones included."""
        page = self.get(f"{P}/handoffs", actor, box=box, include_completed="true", limit=100)
        return sum(1 for a in page["assignments"] if a["record"]["handoff_id"] == handoff_id)


@contextmanager
def team(kind: str, tmp: Path, members: tuple[tuple[str, str], ...] = MEMBERS) -> Iterator[Team]:
    with start_server(kind, tmp) as server:
        proxy = FaultProxy(server.url)
        try:
            cli = Cli(tmp / "agent-home", extra_env={"HOME": str(tmp / "user-home")})
            crew = Team(server, proxy, cli)
            for actor, role in members:
                token_file = provision(cli, server, actor, role)
                crew.tokens[actor] = token_file.read_text().strip()
                cli.ok("auth", "login", "--profile", actor, "--url", proxy.url,
                       "--project-id", PROJECT, "--token-file", str(token_file))  # fmt: skip
            yield crew
        finally:
            proxy.stop()
