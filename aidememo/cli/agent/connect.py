"""A profile's `aidememo.client.Client`, and the agent commands' exit statuses (SPEC.md CLI-2).

`connected(ns)` opens the client of `--profile` (or `AIDEMEMO_PROFILE`) after the pin check
(CLI-3): the token file must still hold the token `auth login` checked, or a token the server
says is the same actor's in the same tenant and project; anything else is refused before the
command is sent. `agent_command` turns the client's errors into exit statuses: a refusal of
the server is 1 with its code on stderr, no answer is 3.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from aidememo.cli.agent import profiles
from aidememo.cli.agent.hints import with_next_step
from aidememo.cli.errors import EXIT_FAILED, EXIT_UNREACHABLE, CliError
from aidememo.cli.options import PROG
from aidememo.cli.token_files import read_token_file
from aidememo.cli.urls import checked_url
from aidememo.client import AidememoClientError, AidememoUnreachable, Client

TIMEOUT_S = 30.0


def server_url(url: str, *, allow_insecure_http: bool = False) -> str:
    """A server URL as profiles keep it: a scheme, a host, no credentials, query or fragment;
    plain http:// only to a loopback host unless allowed (the token would travel in clear)."""
    parts = checked_url(url, "the token", allow_insecure_http=allow_insecure_http)
    return parts.geturl().rstrip("/")


def client_for(url: str, token: str, project_id: str) -> Client:
    return Client(url, token, project_id, timeout=TIMEOUT_S)


@contextmanager
def connected(ns: argparse.Namespace) -> Iterator[tuple[profiles.Profile, Client]]:
    """The profile of `ns.profile` and its client, the pinned actor checked (CLI-3)."""
    profile = profiles.get(ns.profile)
    token = read_token_file(profile.token_file)
    client = client_for(profile.url, token, profile.project_id)
    try:
        if profiles.token_sha256(token) != profile.token_sha256:
            who = client.identity()
            found = (who.tenant_id, who.project_id, who.actor_id)
            pinned = (profile.tenant_id, profile.project_id, profile.actor_id)
            if found != pinned:
                raise CliError(
                    f"profile {profile.name} acts as {profile.actor_id} only, but its token "
                    f"file {profile.token_file} now holds the token of {who.actor_id} "
                    f"({who.tenant_id}/{who.project_id}); nothing was sent. Log that actor in "
                    f"under its own profile: {PROG} auth login --profile NAME ..."
                )
        yield profile, client
    finally:
        client.close()


def refusal(error: AidememoClientError, ns: argparse.Namespace | None = None) -> CliError:
    """The client's error as the CLI's: unreachable is exit 3, a refusal exit 1; with the
    command's flags, a clause saying what was involved and what to run next (CLI-7)."""
    hint = ""
    if ns is not None:
        from aidememo.cli.agent.hints import next_step

        hint = next_step(error.code, error.message, ns, login_url=getattr(ns, "url", "") or "")
    if isinstance(error, AidememoUnreachable):
        return CliError(
            with_next_step(f"cannot reach the server: {error.message}", "unreachable", hint),
            EXIT_UNREACHABLE,
        )
    return CliError(with_next_step(error.message, error.code, hint), EXIT_FAILED)


def agent_command(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """An agent command whose client errors become exit statuses (CLI-2)."""

    @functools.wraps(fn)
    def run(ns: argparse.Namespace) -> int:
        try:
            return fn(ns)
        except AidememoClientError as error:
            raise refusal(error, ns) from None

    return run
