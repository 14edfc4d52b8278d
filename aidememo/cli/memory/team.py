"""The team tier of `memory recall` (SPEC.md MEM-24): the team's shared aidememo project,
searched read-only with the server's search through a saved agent profile (`auth login`),
each call bounded by `TIMEOUT_S`, no retry. A missing profile, a token file that no longer
holds the token the profile was checked with, an unreachable or refusing server: the tier is
skipped with the reason, never a failure of the recall.
"""

from __future__ import annotations

from aidememo.agent_memory.tiers import TeamFact, TeamUnavailable
from aidememo.cli.errors import CliError

TIMEOUT_S = 3.0
PROFILE_ENV = "AIDEMEMO_MEMORY_TEAM_PROFILE"


class ProfileTeam:
    """`aidememo.agent_memory.tiers.TeamTier` over a profile's client (imported when searched)."""

    def __init__(self, name: str, timeout: float = TIMEOUT_S) -> None:
        from aidememo.cli.agent import profiles

        self.name = name
        self.timeout = timeout
        try:
            self.profile: profiles.Profile | None = profiles.get(name)
        except CliError as exc:
            self.profile, self.problem = None, str(exc)
        self.scope = f"team:{self.profile.project_id}" if self.profile else "team:unknown"

    def search(self, query: str, limit: int) -> list[TeamFact]:
        from aidememo.cli.agent import profiles
        from aidememo.cli.token_files import read_token_file
        from aidememo.client import AidememoClientError, Client

        if self.profile is None:
            raise TeamUnavailable(self.problem)
        try:
            token = read_token_file(self.profile.token_file)
        except CliError as exc:
            raise TeamUnavailable(str(exc)) from None
        if profiles.token_sha256(token) != self.profile.token_sha256:
            raise TeamUnavailable(f"the token file of profile {self.name} changed since auth login")
        client = Client(
            self.profile.url, token, self.profile.project_id, timeout=self.timeout, retries=0
        )
        try:
            found = client.search(query, limit=min(limit, 100))
        except AidememoClientError as exc:
            raise TeamUnavailable(f"{exc.code}: {exc.message}") from None
        finally:
            client.close()
        return [
            TeamFact(r.fact_id, r.content, r.score, self.scope, r.actor_id, r.session_id)
            for r in found.results
        ]
