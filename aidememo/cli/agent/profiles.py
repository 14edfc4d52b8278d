"""Named profiles: `$AIDEMEMO_HOME/profiles.json` (SPEC.md CLI-3).

A profile names one member of one project: the server's URL, the tenant, project, actor and
role its token was checked to have at `auth login`, and the path of the token file (the token
itself never enters profiles.json; `--store-token` copies it into `$AIDEMEMO_HOME/tokens/`).
The file is written 0600, atomically (a new file in the same directory, fsynced, then renamed
over the old one), so a crash leaves the old file or the new one, never half of either.

A profile pins its actor. The SHA-256 of the token seen at login is kept; when the token file
later holds another token, the agent commands ask the server whose it is before using it
(`aidememo.cli.agent.connect`) and refuse one of another actor.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.options import PROG, TOKEN_FILE_MODE
from aidememo.cli.private_files import NEW_FILE_FLAGS, write_all
from aidememo.cli.stores import data_home, ensure_data_home

PROFILES_FILE = "profiles.json"
TOKENS_DIR = "tokens"
FORMAT = 1
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class Profile(NamedTuple):
    """One member of one project, as `auth login` found it."""

    name: str
    url: str
    tenant_id: str
    project_id: str
    actor_id: str
    role: str
    token_file: str
    token_sha256: str  # of the token `auth login` checked; never the token
    stored_token: bool = False  # token_file is this home's copy (removed by `auth logout`)

    def public(self) -> dict[str, Any]:
        """What `auth list` shows: everything but the token's digest."""
        shown = self._asdict()
        del shown["token_sha256"]
        return shown


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise CliError(
            f"profile name {name!r} must be 1-64 characters of letters, digits, '.', '_', '-' "
            "starting with a letter or digit",
            EXIT_USAGE,
        )
    return name


def profiles_path() -> Path:
    return data_home() / PROFILES_FILE


def load() -> dict[str, Profile]:
    """Every profile by name; none when the file does not exist yet."""
    path = profiles_path()
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        document = json.loads(raw)
        entries = document["profiles"]
        return {name: Profile(name=name, **fields) for name, fields in entries.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise CliError(
            f"{path} is not a profiles file of this version; move it away and log in again"
        ) from None


def save(profiles: dict[str, Profile]) -> Path:
    """Write every profile to profiles.json, 0600 and atomically."""
    home = ensure_data_home()
    path = home / PROFILES_FILE
    entries = {}
    for name, profile in sorted(profiles.items()):
        fields = profile._asdict()
        del fields["name"]
        entries[name] = fields
    data = json.dumps({"format": FORMAT, "profiles": entries}, indent=2) + "\n"
    _write_atomically(path, data.encode("utf-8"))
    return path


def _write_atomically(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, NEW_FILE_FLAGS, TOKEN_FILE_MODE)
    except FileExistsError:  # left by a crashed run of this same pid number
        temp.unlink()
        fd = os.open(temp, NEW_FILE_FLAGS, TOKEN_FILE_MODE)
    try:
        try:
            os.fchmod(fd, TOKEN_FILE_MODE)  # whatever the umask did
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    try:  # the rename is durable once the directory is
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def store_token(name: str, token: str) -> Path:
    """Copy `token` to `$AIDEMEMO_HOME/tokens/NAME.token` (directory 0700, file 0600)."""
    folder = ensure_data_home() / TOKENS_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    path = folder / f"{name}.token"
    _write_atomically(path, (token + "\n").encode("utf-8"))
    return path


def get(name: str | None) -> Profile:
    """The profile `name`; refuses a missing name or profile, naming the known ones."""
    profiles = load()
    known = ", ".join(sorted(profiles)) or "none yet"
    if not name:
        raise CliError(
            f"--profile is required (or set AIDEMEMO_PROFILE); profiles: {known} "
            f"(add one: {PROG} auth login --profile NAME --url URL --project-id P "
            "--token-file F)",
            EXIT_USAGE,
        )
    profile = profiles.get(name)
    if profile is None:
        raise CliError(
            f"no profile {name!r} (profiles: {known}; add it: {PROG} auth login --profile "
            f"{name} ...)",
            EXIT_USAGE,
        )
    return profile


def remove(name: str) -> Profile:
    """Delete profile `name` (and its stored token copy); the removed profile."""
    profiles = load()
    profile = profiles.pop(name, None)
    if profile is None:
        known = ", ".join(sorted(profiles)) or "none"
        raise CliError(f"no profile {name!r} (profiles: {known})", EXIT_USAGE)
    save(profiles)
    if profile.stored_token:
        Path(profile.token_file).unlink(missing_ok=True)
    return profile
