"""The content-free health report of a local memory environment (SPEC.md MEM-19).

`doctor_report` reads, never writes or chmods: whether the store and its directory exist, its
integrity report (`aidememo.agent_memory.integrity`),
file safety (modes, owners and symbolic links of
the `.nuzo` roots, the store directory, the store, its sidecars and the `exports/` and `logs/`
trees; stale artifacts and unexpected entries), whether any memory database or export in the
working directory's Git worktree is tracked (skipped with `NUZO_DOCTOR_SKIP_GIT=1`), active
`project:auto` memories left by old versions and, when asked, a secret scan of the active
memories that reports counts by kind only. No memory content or configuration value is printed.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Mapping
from typing import Any

from aidememo.agent_memory.integrity import inspect_store, open_readonly, semantic_line
from aidememo.agent_memory.policy import secret_findings
from aidememo.agent_memory.privacy import semantic_index_path

FILE, DIRECTORY = 0o600, 0o700
_ROOT_ENTRIES = {"config.json", "exports", "logs", "managed-hosts.json", "memory", "models"}
# Nuzo's stale-artifact names, plus the temporary files an interrupted `repair-fts` or `restore`
# leaves (`<backup>.tmp-<uuid>`, `<store>.restore-<uuid>`, and their SQLite journals).
_STALE = re.compile(
    r"(?:^\.nuzo-semantic-model-|\.bak$|\.backup(?:-|$)|\.tmp$"
    r"|\.(?:tmp|restore)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
)
GIT_PATTERNS = (
    ".nuzo",
    "*.sqlite",
    "*.sqlite-*",
    "*.memory.export.md",
    "*.memory.export.json",
    "memories.sqlite",
    "memories.sqlite-*",
)


class _Safety:
    def __init__(self) -> None:
        self.inspected = 0
        self.unsafe: list[dict[str, Any]] = []
        self.stale: list[str] = []
        self.unexpected: list[str] = []

    def known(self, path: str, expected: int) -> None:
        if not os.path.lexists(path):
            return
        try:
            info = os.lstat(path)
        except OSError:
            self._finding(path, "other", "inspection_error", None, expected)
            return
        self.inspected += 1
        if stat.S_ISLNK(info.st_mode):
            self._finding(path, "symlink", "symlink", None, expected)
            return
        kind = (
            "directory"
            if stat.S_ISDIR(info.st_mode)
            else "file"
            if stat.S_ISREG(info.st_mode)
            else "other"
        )
        mode = info.st_mode & 0o777
        if mode & 0o077:
            self._finding(path, kind, "permissions", mode, expected)
        if info.st_uid != os.getuid():
            self._finding(path, kind, "ownership", mode, expected)

    def _finding(self, path: str, kind: str, reason: str, mode: int | None, expected: int) -> None:
        self.unsafe.append(
            {
                "path": path,
                "type": kind,
                "reason": reason,
                "actual_mode": mode,
                "expected_mode": expected,
            }
        )

    def tree(self, root: str) -> None:
        if not os.path.exists(root):
            return
        self.known(root, DIRECTORY)
        if os.path.islink(root) or not os.path.isdir(root):
            return
        try:
            entries = sorted(os.scandir(root), key=lambda e: e.name)
        except OSError:
            self._finding(root, "directory", "inspection_error", None, DIRECTORY)
            return
        for entry in entries:
            is_dir = entry.is_dir(follow_symlinks=False)
            self.known(entry.path, DIRECTORY if is_dir else FILE)
            if _STALE.search(entry.name):
                self.stale.append(entry.path)
            if is_dir:
                self.tree(entry.path)

    def entries(self, root: str, *, unexpected: bool) -> None:
        if not os.path.isdir(root) or os.path.islink(root):
            return
        try:
            names = sorted(os.listdir(root))
        except OSError:
            return
        for name in names:
            path = os.path.join(root, name)
            if unexpected and name not in _ROOT_ENTRIES:
                self.unexpected.append(path)
            if _STALE.search(name):
                self.stale.append(path)

    def to_json(self) -> dict[str, Any]:
        return {
            "permission_semantics": "posix",
            "inspected_paths": self.inspected,
            "unsafe": sorted(self.unsafe, key=lambda f: (f["path"], f["reason"])),
            "stale_artifacts": sorted(set(self.stale)),
            "unexpected_files": sorted(set(self.unexpected)),
        }


def file_safety(store_path: str, project_root: str, home: str) -> dict[str, Any]:
    """Modes, owners and links of the runtime paths; never changes them."""
    safety = _Safety()
    store_dir = os.path.dirname(store_path)
    home_root = os.path.join(home, ".nuzo")
    project_nuzo = os.path.join(project_root, ".nuzo")
    semantic = semantic_index_path(store_path)
    safety.known(home_root, DIRECTORY)
    safety.known(os.path.join(home_root, "config.json"), FILE)
    safety.known(os.path.join(home_root, "managed-hosts.json"), FILE)
    safety.known(project_nuzo, DIRECTORY)
    safety.known(os.path.join(project_nuzo, "config.json"), FILE)
    safety.known(store_dir, DIRECTORY)
    for base in (store_path, semantic):
        for suffix in ("", "-wal", "-shm"):
            safety.known(base + suffix, FILE)
    roots = [os.path.join(store_dir, "exports"), os.path.join(store_dir, "logs")]
    for root in dict.fromkeys([*roots, os.path.join(home_root, "models")]):
        safety.tree(root)
    safety.entries(store_dir, unexpected=False)
    for root in dict.fromkeys([home_root, project_nuzo]):
        safety.entries(root, unexpected=True)
    return safety.to_json()


def git_tracking(cwd: str) -> dict[str, Any]:
    """Memory databases and exports tracked by the Git worktree at `cwd`."""
    if os.environ.get("NUZO_DOCTOR_SKIP_GIT") == "1":
        return {"status": "skipped", "reason": "NUZO_DOCTOR_SKIP_GIT=1", "trackedFiles": []}
    try:
        proc = subprocess.run(
            ["git", "ls-files", "-z", "--", *GIT_PATTERNS],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return {"status": "unavailable", "reason": str(error), "trackedFiles": []}
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["not a Git worktree"])[0]
        return {"status": "unavailable", "reason": reason, "trackedFiles": []}
    tracked = [name for name in proc.stdout.split("\0") if name]
    return {"status": "tracked" if tracked else "clean", "trackedFiles": tracked}


def _store_reads(store_path: str, scan: bool) -> tuple[int, dict[str, Any]]:
    secret: dict[str, Any] = {
        "status": "not_requested",
        "scanned_records": 0,
        "flagged_records": 0,
        "findings_by_kind": {},
    }
    conn = open_readonly(store_path)
    try:
        legacy = int(
            conn.execute(
                "SELECT COUNT(*) FROM memories WHERE scope = 'project:auto' AND archived_at IS NULL"
            ).fetchone()[0]
        )
        if scan:
            kinds: dict[str, int] = {}
            scanned = flagged = 0
            for (content,) in conn.execute(
                "SELECT content FROM memories WHERE archived_at IS NULL"
            ):
                scanned += 1
                findings = secret_findings(content)
                flagged += 1 if findings else 0
                for finding in findings:
                    kinds[finding["kind"]] = kinds.get(finding["kind"], 0) + 1
            secret = {
                "status": "completed",
                "scanned_records": scanned,
                "flagged_records": flagged,
                "findings_by_kind": dict(sorted(kinds.items())),
            }
    finally:
        conn.close()
    return legacy, secret


def runtime_sources(
    *,
    store_option: str | None,
    scope_option: str | None,
    project_root: str,
    home: str,
    env: Mapping[str, str],
) -> dict[str, Any]:
    """Where the project root, config, store and scope came from (MEM-9's order), by name."""
    project_config = os.path.exists(os.path.join(project_root, ".nuzo", "config.json"))
    config = (
        "project"
        if project_config
        else "user"
        if os.path.exists(os.path.join(home, ".nuzo", "config.json"))
        else "defaults"
    )
    fallback = "default" if config == "defaults" else config

    def source(option: str | None, variable: str) -> str:
        if option is not None:
            return "option"
        return "environment" if variable in env else fallback

    return {
        "project_root_source": "environment"
        if "NUZO_PROJECT_ROOT" in env
        else "discovered"
        if project_config
        else "cwd",
        "config_source": config,
        "store_source": source(store_option, "NUZO_MEMORY_STORE"),
        "scope_source": source(scope_option, "NUZO_MEMORY_SCOPE"),
        "adjustments": [],
    }


def doctor_report(
    *,
    store_path: str,
    scope: str,
    project_scope: str,
    project_root: str,
    home: str,
    cwd: str,
    scan_secrets: bool = False,
    sources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The report `doctor --json` prints (Nuzo's keys; `status` is `ok` or `warning`)."""
    store_dir = os.path.dirname(store_path)
    exists = os.path.lexists(store_path)
    git = git_tracking(cwd)
    integrity = inspect_store(store_path)
    safety = file_safety(store_path, project_root, home)
    warnings: list[str] = []
    if not exists:
        warnings.append("memory store has not been initialized")
    if not os.path.exists(store_dir):
        warnings.append("memory store directory does not exist")
    if git["status"] == "tracked":
        warnings.append(f"{len(git['trackedFiles'])} local memory file(s) are tracked by Git")
    if git["status"] == "unavailable":
        warnings.append(f"Git tracking check unavailable: {git['reason']}")
    secret: dict[str, Any] = {
        "status": "not_requested",
        "scanned_records": 0,
        "flagged_records": 0,
        "findings_by_kind": {},
    }
    if exists:
        warnings += [f"Memory integrity: {error}" for error in integrity.errors]
        if integrity.canonical_ok and integrity.integrity_check == "ok":
            legacy, secret = _store_reads(store_path, scan_secrets)
            if legacy:
                warnings.append(
                    f"{legacy} active legacy project:auto memory(s) require scope review"
                )
    if safety["unsafe"]:
        warnings.append(
            f"{len(safety['unsafe'])} runtime path permission, ownership, or symlink finding(s)"
        )
    if safety["stale_artifacts"]:
        warnings.append(
            f"{len(safety['stale_artifacts'])} stale runtime artifact(s) require review"
        )
    if safety["unexpected_files"]:
        warnings.append(
            f"{len(safety['unexpected_files'])} unexpected file(s) exist in Nuzo runtime"
            " directories"
        )
    if secret["flagged_records"]:
        warnings.append(
            f"{secret['flagged_records']} active memory record(s) matched high-confidence"
            " secret patterns"
        )
    return {
        "store_path": store_path,
        "store_exists": exists,
        "store_directory": store_dir,
        "store_directory_exists": os.path.exists(store_dir),
        "scope": scope,
        "project_scope": project_scope,
        "authorization": {"mode": "administrator", "source": "local_cli", "allowed_scopes": None},
        "config": sources
        or {
            "project_root_source": "cwd",
            "config_source": "defaults",
            "store_source": "default",
            "scope_source": "default",
            "adjustments": [],
        },
        "network": "disabled",
        "integrity": integrity.to_json(),
        "file_safety": safety,
        "secret_scan": secret,
        "git_tracking": git,
        "warnings": warnings,
        "status": "ok" if not warnings else "warning",
    } | ({} if integrity.semantic_index is None else {"semantic_index": integrity.semantic_index})


def doctor_text(report: dict[str, Any]) -> list[str]:
    """The report as `doctor` prints it, line by line."""
    yes = {True: "yes", False: "no"}
    integrity = report["integrity"]
    safety = report["file_safety"]
    secret = report["secret_scan"]
    git = report["git_tracking"]
    findings = len(safety["unsafe"]) + len(safety["stale_artifacts"])
    findings += len(safety["unexpected_files"])
    lines = [
        f"Store: {report['store_path']}",
        f"Store exists: {yes[report['store_exists']]}",
        f"Store directory: {report['store_directory']}",
        f"Store directory exists: {yes[report['store_directory_exists']]}",
        f"Scope: {report['scope']}",
        f"Project scope: {report['project_scope']}",
        "Authorization: administrator (local CLI)",
        f"Config source: {report['config']['config_source']}",
        f"Store source: {report['config']['store_source']}",
        f"Scope source: {report['config']['scope_source']}",
        f"Network: {report['network']}",
        "Integrity: "
        + ("ok" if integrity["ok"] else "failed" if report["store_exists"] else "missing"),
        f"File safety: clean ({safety['inspected_paths']} path(s) inspected)"
        if not findings
        else f"File safety: warning ({findings} finding(s))",
        "Secret scan: not requested (use --scan-secrets for an explicit active-record scan)"
        if secret["status"] == "not_requested"
        else f"Secret scan: {secret['flagged_records']} flagged of {secret['scanned_records']}"
        " active record(s)",
    ]
    if git["status"] in ("skipped", "unavailable"):
        lines.append(f"Git tracking: {git['status']} ({git['reason']})")
    elif git["status"] == "tracked":
        lines.append(
            f"Git tracking: warning ({len(git['trackedFiles'])} local memory file(s) tracked)"
        )
        lines += [f"Tracked memory file: {name}" for name in git["trackedFiles"]]
    else:
        lines.append("Git tracking: clean")
    for finding in safety["unsafe"]:
        mode = "n/a" if finding["actual_mode"] is None else format(finding["actual_mode"], "03o")
        lines.append(f"Unsafe runtime path: {finding['path']} ({finding['reason']}; mode {mode})")
    lines += [f"Stale runtime artifact: {path}" for path in safety["stale_artifacts"]]
    lines += [f"Unexpected runtime file: {path}" for path in safety["unexpected_files"]]
    if "semantic_index" in report:
        lines.append(semantic_line(report["semantic_index"]))
    lines += [f"Warning: {warning}" for warning in report["warnings"]]
    lines.append(f"Status: {report['status']}")
    return lines
