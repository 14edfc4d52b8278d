"""`aidememo auth login|list|logout`: named profiles (SPEC.md CLI-3).

`login` asks the server whose the token is (`GET /v1/projects/{p}/identity`) and saves what it
answers (tenant, project, actor, role) with the URL and the token file's path; nothing is
saved when the server refuses the token or cannot be reached. A profile keeps the actor it
was created for: logging in again under the same name with another actor's token is refused.
Nothing here ever prints a token.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from aidememo.cli.agent import profiles
from aidememo.cli.agent.connect import agent_command, client_for, server_url
from aidememo.cli.errors import CliError
from aidememo.cli.options import PROG
from aidememo.cli.render import emit, table
from aidememo.cli.token_files import read_token_file


@agent_command
def cmd_login(ns: argparse.Namespace) -> int:
    name = profiles.check_name(ns.profile)
    url = server_url(ns.url)
    token = read_token_file(ns.token_file)
    existing = profiles.load()
    with client_for(url, token, ns.project_id) as client:
        who = client.identity()
    old = existing.get(name)
    if old is not None and (old.tenant_id, old.actor_id) != (who.tenant_id, who.actor_id):
        raise CliError(
            f"profile {name} is pinned to actor {old.actor_id} ({old.tenant_id}); this token "
            f"is {who.actor_id}'s ({who.tenant_id}). Use another profile name, or "
            f"`{PROG} auth logout --profile {name}` first; nothing was changed"
        )
    stored = bool(ns.store_token)
    token_file = (
        str(profiles.store_token(name, token)) if stored else os.path.abspath(ns.token_file)
    )
    if old is not None and old.stored_token and not stored:
        Path(old.token_file).unlink(missing_ok=True)
    profile = profiles.Profile(
        name=name,
        url=url,
        tenant_id=who.tenant_id,
        project_id=who.project_id,
        actor_id=who.actor_id,
        role=who.role,
        token_file=token_file,
        token_sha256=profiles.token_sha256(token),
        stored_token=stored,
    )
    existing[name] = profile
    path = profiles.save(existing)
    return emit(
        ns,
        {**profile.public(), "profiles_file": str(path)},
        f"profile {name}: actor {who.actor_id} ({who.role}) in {who.tenant_id}/{who.project_id} "
        f"at {url}; saved in {path}",
    )


def cmd_list(ns: argparse.Namespace) -> int:
    found = profiles.load()
    rows = [
        [p.name, p.actor_id, p.role, f"{p.tenant_id}/{p.project_id}", p.url, p.token_file]
        for p in found.values()
    ]
    return emit(
        ns,
        {"profiles": [p.public() for p in found.values()]},
        table(
            ["PROFILE", "ACTOR", "ROLE", "PROJECT", "URL", "TOKEN FILE"],
            rows,
            f"no profiles yet (add one: {PROG} auth login --profile NAME --url URL "
            "--project-id P --token-file F)",
        ),
    )


def cmd_logout(ns: argparse.Namespace) -> int:
    removed = profiles.remove(profiles.check_name(ns.profile))
    note = " and its stored token" if removed.stored_token else ""
    print(f"removed profile {removed.name}{note}")
    return 0
