"""What to do next after an agent command's refusal (SPEC.md CLI-6).

The server's message says what went wrong; it cannot say which profile, token file, project
or receiver of this machine was involved, nor which command would fix it. `next_step` adds
that, from the parsed flags and the profile, as a clause placed before the error code, so the
line still ends with the code in parentheses (CLI-2) and the codes never change.
"""

from __future__ import annotations

import argparse

from aidememo.cli.options import PROG


def _profile(ns: argparse.Namespace) -> object | None:
    """The command's saved profile, or None (no profile flag, an unknown one)."""
    from aidememo.cli.agent import profiles
    from aidememo.cli.errors import CliError

    name = getattr(ns, "profile", None)
    try:
        return profiles.load().get(name) if name else None
    except CliError:  # an unreadable profiles file: the refusal itself still gets reported
        return None


def next_step(code: str, message: str, ns: argparse.Namespace, *, login_url: str = "") -> str:
    """A clause naming what was involved and the command that would help; "" when none.

    `login_url` is set by `auth login`, whose project and token are not a profile's yet."""
    from aidememo.cli.agent.profiles import Profile

    found = _profile(ns)
    profile = found if isinstance(found, Profile) else None
    project = getattr(ns, "project_id", None) if login_url else None
    if profile is not None and project is None:
        project = profile.project_id
    who = f"profile {profile.name} (actor {profile.actor_id})" if profile else ""
    if code == "unreachable":
        url = login_url or (profile.url if profile else "the server")
        offline = (
            f"; offline, read the replica: {PROG} replica get KIND ID --profile {profile.name}"
            if profile
            else ""
        )
        return (
            f"nothing answers at {url}: start the server (in a checkout: scripts/serve; "
            f"otherwise: {PROG} serve){offline}"
        )
    if code == "authentication_failed":
        token_file = getattr(ns, "token_file", None) or (profile.token_file if profile else "F")
        name = profile.name if profile else getattr(ns, "profile", "NAME")
        url = login_url or (profile.url if profile else "URL")
        return (
            f"the server at {url} does not know the token in {token_file} (revoked, or the "
            f"server's database was made anew): get a token file from the project's admin "
            f"({PROG} token new --out F; {PROG} bootstrap ... --token-file F), then {PROG} "
            f"auth login --profile {name} --url {url} --project-id {project or 'P'} "
            f"--token-file F"
        )
    if code == "project_unauthorized":
        if "may not write" in message:
            actor = profile.actor_id if profile else "ACTOR"
            return (
                f"{who or 'this actor'} is a reader of project {project}: an admin makes it a "
                f"writer with {PROG} admin member --tenant-id "
                f"{profile.tenant_id if profile else 'T'} --project-id {project} --actor-id "
                f"{actor} --role writer"
            )
        if login_url:
            return (
                f"this token's actor has no active membership in project {project!r} at "
                f"{login_url}: check --project-id ({PROG} auth list shows the projects of "
                "your profiles)"
            )
        return (
            f"{who or 'this profile'} has no active membership in project {project!r} "
            f"(any more): {PROG} auth list shows the profiles; an admin adds a member with "
            f"{PROG} bootstrap"
        )
    if code == "invalid_command" and "receiver" in message and getattr(ns, "to", None):
        listing = f"{PROG} members --profile {profile.name}" if profile else f"{PROG} members"
        return f"see who may receive in project {project}: {listing}"
    return ""


def with_next_step(message: str, code: str, hint: str) -> str:
    """`MESSAGE; HINT (CODE)`: the hint before the code, which still ends the line."""
    return f"{message}; {hint} ({code})" if hint else f"{message} ({code})"
