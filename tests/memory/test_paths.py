"""Default locations, the project config rules and file safety (MEM-9)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aidememo.agent_memory import AgentMemoryError, MemoryErrorCode, paths


def _project(root: Path, store_path: str = ".nuzo/memory/memories.sqlite", **extra: object) -> None:
    (root / ".nuzo").mkdir(parents=True, exist_ok=True)
    config = {
        "version": 1,
        "default_scope": "project:auto",
        "storage": {"driver": "sqlite", "path": store_path},
    } | extra
    (root / ".nuzo" / "config.json").write_text(json.dumps(config))


def test_mem9_default_locations(isolated_home: Path, tmp_path: Path) -> None:
    runtime = paths.resolve_runtime(env={})
    assert runtime.store_path == str(isolated_home / ".nuzo" / "memory" / "memories.sqlite")
    assert runtime.scope == "user:default"
    project = tmp_path / "proj"
    _project(project)
    nested = project / "src" / "deep"
    nested.mkdir(parents=True)
    found = paths.resolve_runtime(cwd=str(nested), env={})
    assert found.store_path == str(project / ".nuzo" / "memory" / "memories.sqlite")
    assert found.scope == paths.project_scope(str(project))
    assert found.scope.startswith("project:") and len(found.scope) == len("project:") + 16
    override = paths.resolve_runtime(
        cwd=str(nested), env={"NUZO_MEMORY_STORE": "/x/s.sqlite", "NUZO_MEMORY_SCOPE": "team:core"}
    )
    assert (override.store_path, override.scope) == ("/x/s.sqlite", "team:core")


@pytest.mark.parametrize(
    "store_path", ["/tmp/outside.sqlite", "../outside.sqlite", ".nuzo/../outside.sqlite"]
)
def test_mem9_project_config_names_only_the_portable_path(tmp_path: Path, store_path: str) -> None:
    project = tmp_path / "proj"
    _project(project, store_path)
    with pytest.raises(AgentMemoryError) as caught:
        paths.resolve_runtime(cwd=str(project), env={})
    assert caught.value.code == MemoryErrorCode.MEMORY_CONFIG_INVALID
    assert not (tmp_path / "outside.sqlite").exists()


def test_mem9_project_config_may_not_escape_through_symlinks(tmp_path: Path) -> None:
    project, outside = tmp_path / "proj", tmp_path / "outside"
    outside.mkdir()
    _project(project)
    (project / ".nuzo" / "memory").mkdir()
    (project / ".nuzo" / "memory" / "memories.sqlite").symlink_to(outside / "db.sqlite")
    with pytest.raises(AgentMemoryError) as caught:
        paths.resolve_runtime(cwd=str(project), env={})
    assert caught.value.code == MemoryErrorCode.MEMORY_CONFIG_INVALID
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".nuzo").symlink_to(project / ".nuzo")
    with pytest.raises(AgentMemoryError):
        paths.resolve_runtime(cwd=str(linked), env={})
    authorized = tmp_path / "auth"
    _project(authorized, authorization={"mode": "administrator"})
    with pytest.raises(AgentMemoryError):
        paths.resolve_runtime(cwd=str(authorized), env={})


def test_mem9_exports_and_imports_never_follow_symlinks(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("unchanged")
    link = tmp_path / "export.json"
    link.symlink_to(target)
    with pytest.raises(AgentMemoryError) as caught:
        paths.write_private_file(str(link), "{}")
    assert caught.value.code == MemoryErrorCode.MEMORY_FILE_WRITE_UNSAFE
    assert target.read_text() == "unchanged"
    with pytest.raises(AgentMemoryError) as caught:
        paths.read_export_file(str(link))
    assert caught.value.code == MemoryErrorCode.MEMORY_EXPORT_READ_FAILED
    fresh = tmp_path / "fresh.json"
    paths.write_private_file(str(fresh), "{}")
    assert fresh.stat().st_mode & 0o777 == 0o600
    paths.ensure_private_dir(str(tmp_path / "new" / "dir"))
    assert (tmp_path / "new" / "dir").stat().st_mode & 0o777 == 0o700 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_mem6_mem9_the_team_scope_comes_from_the_config_or_the_environment(tmp_path: Path) -> None:
    project = tmp_path / "teamproj"
    _project(project, team_scope="team:platform")
    assert paths.resolve_runtime(cwd=str(project), env={}).team_scope == "team:platform"
    plain = tmp_path / "plain"
    plain.mkdir()
    env = {"AIDEMEMO_MEMORY_TEAM_SCOPE": "team:core"}
    assert paths.resolve_runtime(cwd=str(plain), env=env).team_scope == "team:core"
    with pytest.raises(AgentMemoryError):
        paths.resolve_runtime(cwd=str(plain), env={"AIDEMEMO_MEMORY_TEAM_SCOPE": "user:x"})
