"""Where memory stores live, and the file-safety rules for them (SPEC.md MEM-9).

User-level store `~/.nuzo/memory/memories.sqlite`, project-level store
`<project>/.nuzo/memory/memories.sqlite`: the locations Nuzo 1.2 uses, so existing stores are found
and opened in place. Store files, exports and configs are created owner-only (0600) without
following a symbolic link; directories this module creates are 0700. A project config may only
name the portable relative path `.nuzo/memory/memories.sqlite`: an absolute path, a traversal or
a symlinked `.nuzo` is refused, so a repository cannot redirect writes outside the project.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.model import GLOBAL_SCOPE
from aidememo.agent_memory.policy import RECALL_LIMIT_DEFAULT, SCOPE_MAX, SCOPE_PATTERN

FILE_MODE = 0o600
DIR_MODE = 0o700
PROJECT_STORE = ".nuzo/memory/memories.sqlite"


def user_store_path(home: str | None = None) -> str:
    """`~/.nuzo/memory/memories.sqlite`."""
    base = home if home is not None else os.path.expanduser("~")
    return os.path.join(os.path.abspath(base), ".nuzo", "memory", "memories.sqlite")


def project_store_path(project_root: str) -> str:
    """`<project>/.nuzo/memory/memories.sqlite`."""
    return os.path.join(os.path.abspath(project_root), ".nuzo", "memory", "memories.sqlite")


def project_scope(path: str) -> str:
    """`project:` plus the first 16 hex digits of SHA-256 of the project's real path."""
    resolved = os.path.abspath(path)
    try:
        resolved = os.path.realpath(resolved, strict=True)
    except OSError:
        pass
    return "project:" + hashlib.sha256(resolved.encode("utf-8")).hexdigest()[:16]


def resolve_scope(scope: str, project_root: str | None = None) -> str:
    """`project:auto` resolved against the project root (the working directory by default)."""
    return project_scope(project_root or os.getcwd()) if scope == "project:auto" else scope


def ensure_private_dir(path: str) -> None:
    """Create `path` and every missing parent with mode 0700, as Nuzo's recursive mkdir does
    (`os.makedirs` gives the mode to the leaf only); existing directories are kept."""
    missing: list[str] = []
    current = os.path.abspath(path)
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise


def protect(path: str) -> None:
    """chmod 0600 the store and its `-wal`/`-shm` sidecars where present (never through a link)."""
    for candidate in (path, f"{path}-wal", f"{path}-shm"):
        try:
            if not os.path.islink(candidate) and os.path.exists(candidate):
                os.chmod(candidate, FILE_MODE)
        except OSError:
            pass


def create_private_file(path: str) -> None:
    """Open-or-create `path` as a regular 0600 file without following a symbolic link."""
    unsafe = AgentMemoryError(
        C.MEMORY_STORE_PATH_UNSAFE,
        "SQLite memory store path must be a regular file and cannot be a symbolic link.",
        {"path": path},
    )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    except OSError:
        raise unsafe from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise unsafe
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def write_private_file(path: str, text: str, mode: int = FILE_MODE) -> None:
    """Write `text` to `path` (0600 unless `mode` says otherwise, truncating) without following
    a symbolic link."""
    unsafe = AgentMemoryError(
        C.MEMORY_FILE_WRITE_UNSAFE,
        "Refusing to write through a symbolic link or non-file path.",
        {"path": path},
    )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    except OSError as exc:
        if os.path.islink(path):
            raise unsafe from None
        raise AgentMemoryError(
            C.MEMORY_FILE_WRITE_FAILED,
            "File could not be written.",
            {"path": path, "reason": exc.strerror},
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise unsafe
        os.fchmod(fd, mode)
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


EXPORT_MAX_BYTES = 10 * 1024 * 1024


def read_export_file(path: str) -> Any:
    """The JSON document at `path` (no-follow, a regular file, at most 10 MiB)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        raise AgentMemoryError(
            C.MEMORY_EXPORT_READ_FAILED, "Memory export file could not be read.", {"path": path}
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise AgentMemoryError(
                C.MEMORY_EXPORT_READ_FAILED, "Memory export path is not a file.", {"path": path}
            )
        if info.st_size > EXPORT_MAX_BYTES:
            raise AgentMemoryError(
                C.MEMORY_EXPORT_TOO_LARGE,
                "Memory export file is too large.",
                {"maxBytes": EXPORT_MAX_BYTES, "path": path},
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            raw = handle.read(EXPORT_MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise AgentMemoryError(
            C.MEMORY_EXPORT_INVALID, "Memory export JSON is invalid.", {"path": path}
        ) from None


# -- runtime configuration ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryRuntime:
    """Where the store is and which scope and recall defaults apply (MEM-9)."""

    store_path: str
    scope: str
    project_root: str
    recall_limit: int = RECALL_LIMIT_DEFAULT
    include_global: bool = False
    record_recall_events: bool = False
    team_scope: str | None = None


def _config_invalid(path: str, message: str = "Nuzo config has an unsupported shape.") -> Exception:
    return AgentMemoryError(C.MEMORY_CONFIG_INVALID, message, {"path": path})


def _valid_scope(value: object) -> bool:
    return isinstance(value, str) and len(value) <= SCOPE_MAX and bool(SCOPE_PATTERN.match(value))


def _inside(path: str, root: str, config: str) -> None:
    try:
        real, real_root = os.path.realpath(path, strict=True), os.path.realpath(root, strict=True)
    except OSError:
        raise _config_invalid(config, "Project Nuzo config resolves through an invalid local path.")  # noqa: B904
    rel = os.path.relpath(real, real_root)
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        raise _config_invalid(
            config, "Project Nuzo config must keep storage inside the project .nuzo directory."
        )


def read_json(path: str, unreadable: Exception) -> Any:
    """The JSON document in the file at `path`; `unreadable` when it cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        raise unreadable from None


def read_config(path: str, *, project: bool, home: str) -> dict[str, Any]:
    """The config at `path`, checked; for a project config the store path rules (MEM-9)."""
    value = read_json(path, _config_invalid(path, "Nuzo config is not valid JSON."))
    storage = value.get("storage") if isinstance(value, dict) else None
    if (
        not isinstance(value, dict)
        or value.get("version") != 1
        or not _valid_scope(value.get("default_scope"))
        or not isinstance(storage, dict)
        or storage.get("driver") != "sqlite"
        or not isinstance(storage.get("path"), str)
        or (project and storage["path"] != PROJECT_STORE)
        or (
            not project and not (os.path.isabs(storage["path"]) or storage["path"].startswith("~/"))
        )
        or (project and "authorization" in value)
    ):
        raise _config_invalid(path)
    recall = value.get("recall", {"limit": RECALL_LIMIT_DEFAULT, "include_global": False})
    if (
        not isinstance(recall, dict)
        or not isinstance(recall.get("limit"), int)
        or isinstance(recall.get("limit"), bool)
        or not 1 <= recall["limit"] <= 50
        or not isinstance(recall.get("include_global"), bool)
    ):
        raise _config_invalid(path)
    privacy = value.get("privacy", {"allow_network": False, "record_recall_events": False})
    if (
        not isinstance(privacy, dict)
        or privacy.get("allow_network") is not False
        or not isinstance(privacy.get("record_recall_events"), bool)
    ):
        raise _config_invalid(path)
    team = value.get("team_scope")
    if team is not None and not (_valid_scope(team) and str(team).startswith("team:")):
        raise _config_invalid(path)
    store = storage["path"]
    if not project and store.startswith("~/"):
        store = os.path.join(home, store[2:])
    return {
        "default_scope": value["default_scope"],
        "store": os.path.abspath(store),
        "recall": recall,
        "record_recall_events": privacy["record_recall_events"],
        "team_scope": team,
    }


def _project_config(root: str, home: str) -> dict[str, Any] | None:
    config = os.path.join(root, ".nuzo", "config.json")
    if not os.path.exists(config):
        return None
    nuzo = os.path.join(root, ".nuzo")
    try:
        if os.path.realpath(nuzo, strict=True) != os.path.join(os.path.realpath(root), ".nuzo"):
            raise OSError
    except OSError:
        raise _config_invalid(
            config, "Project .nuzo must be a real directory inside the project root."
        ) from None
    _inside(config, nuzo, config)
    store_dir = os.path.join(nuzo, "memory")
    store = os.path.join(store_dir, "memories.sqlite")
    for candidate in (store_dir, store):
        if os.path.lexists(candidate):
            _inside(candidate, nuzo, config)
    parsed = read_config(config, project=True, home=home)
    parsed["store"] = store
    return parsed


def _discover(cwd: str) -> str | None:
    candidate = Path(cwd)
    while True:
        if (candidate / ".nuzo" / "config.json").exists():
            return str(candidate)
        if candidate.parent == candidate:
            return None
        candidate = candidate.parent


def _team_env(environ: Mapping[str, str]) -> str | None:
    team = environ.get("AIDEMEMO_MEMORY_TEAM_SCOPE")
    if team is not None and not (_valid_scope(team) and team.startswith("team:")):
        raise AgentMemoryError(
            C.MEMORY_CONFIG_INVALID, "AIDEMEMO_MEMORY_TEAM_SCOPE must be a team: scope."
        )
    return team


def resolve_runtime(
    *,
    store: str | None = None,
    scope: str | None = None,
    cwd: str | None = None,
    home: str | None = None,
    env: Mapping[str, str] | None = None,
) -> MemoryRuntime:
    """The store path and default scope as Nuzo resolves them (MEM-9).

    Project root: `NUZO_PROJECT_ROOT`, else the nearest ancestor with `.nuzo/config.json`, else
    the working directory. Store: `store` > `NUZO_MEMORY_STORE` > config > the user store.
    Scope: `scope` > `NUZO_MEMORY_SCOPE` > config `default_scope` > `user:default`.
    """
    environ = os.environ if env is None else env
    home_dir = home if home is not None else os.path.expanduser("~")
    here = os.path.realpath(cwd or os.getcwd())
    root_env = environ.get("NUZO_PROJECT_ROOT")
    if root_env is not None:
        if not root_env.strip() or not os.path.isdir(root_env):
            raise AgentMemoryError(
                C.MEMORY_CONFIG_INVALID, "NUZO_PROJECT_ROOT must resolve to an existing directory."
            )
        root = os.path.realpath(root_env)
    else:
        root = _discover(here) or here
    config = _project_config(root, home_dir)
    if config is None:
        user = os.path.join(home_dir, ".nuzo", "config.json")
        config = read_config(user, project=False, home=home_dir) if os.path.exists(user) else None
    for name, given in (
        ("store option", store),
        ("NUZO_MEMORY_STORE", environ.get("NUZO_MEMORY_STORE")),
    ):
        if given is not None and not given.strip():
            raise AgentMemoryError(C.MEMORY_CONFIG_INVALID, f"{name} must not be empty.")
    store_env = environ.get("NUZO_MEMORY_STORE")
    if store is not None:
        store_path = os.path.abspath(store)
    elif store_env is not None:
        store_path = os.path.abspath(store_env)
    elif config is not None:
        store_path = str(config["store"])
    else:
        store_path = user_store_path(home_dir)
    chosen = scope if scope is not None else environ.get("NUZO_MEMORY_SCOPE")
    if chosen is not None and not _valid_scope(chosen):
        raise AgentMemoryError(
            C.MEMORY_CONFIG_INVALID,
            "scope option contains an invalid Nuzo memory scope.",
            {"scope": chosen},
        )
    if chosen is None:
        chosen = str(config["default_scope"]) if config is not None else GLOBAL_SCOPE
    recall = config["recall"] if config is not None else {}
    return MemoryRuntime(
        store_path=store_path,
        scope=resolve_scope(chosen, root),
        project_root=root,
        recall_limit=int(recall.get("limit", RECALL_LIMIT_DEFAULT)),
        include_global=bool(recall.get("include_global", False)),
        record_recall_events=bool(config["record_recall_events"]) if config else False,
        team_scope=(config or {}).get("team_scope") or _team_env(environ),
    )


GITIGNORE_RULES = (".nuzo/memory/", ".nuzo/**/*.sqlite", ".nuzo/**/*.sqlite-*")


def ensure_project_gitignore(project_root: str) -> None:
    """Add the rules that keep the project's store out of git to `<project>/.gitignore`, as
    Nuzo's project init does: only the missing ones, after the existing text, keeping the file's
    mode (0644 for a new file), never through a symbolic link."""
    path = os.path.join(project_root, ".gitignore")
    existing, mode = "", 0o644
    if os.path.lexists(path):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            raise AgentMemoryError(
                C.MEMORY_FILE_READ_FAILED, "File could not be read.", {"path": path}
            ) from exc
        try:
            mode = os.fstat(fd).st_mode & 0o777
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
        finally:
            os.close(fd)
        existing = b"".join(chunks).decode("utf-8")
    present = set(existing.replace("\r\n", "\n").split("\n"))
    missing = [rule for rule in GITIGNORE_RULES if rule not in present]
    if not missing:
        return
    separator = "\n" if existing and not existing.endswith("\n") else ""
    write_private_file(path, existing + separator + "\n".join(missing) + "\n", mode)
