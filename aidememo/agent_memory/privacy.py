"""`doctor --privacy`: the doctor report reduced to counts and finding codes (SPEC.md MEM-19).

No path, memory content or configuration value appears: storage state and sources, network and
recall-audit settings, file-safety and Git counts, whether a semantic sidecar or model directory
exists, the secret scan's counts by kind, and one finding (code, count, guidance) per concern, in
the order and words Nuzo 1.2 reports them.
"""

from __future__ import annotations

import os
from typing import Any

from aidememo.agent_memory.sidecar import sidecar_path

_GUIDANCE = {
    "store_missing": "Initialize the selected store before trusting it with memory.",
    "git_check_unavailable": "Run doctor inside the intended Git worktree.",
    "tracked_memory_files": "Remove runtime memory artifacts from Git tracking and keep the"
    " ignore rules enabled.",
    "unsafe_runtime_paths": "Review ownership, permissions, and symlinks with the standard doctor"
    " report.",
    "stale_runtime_artifacts": "Review stale temporary or backup artifacts before removing them"
    " explicitly.",
    "unexpected_runtime_files": "Inspect unexpected runtime entries with the standard doctor"
    " report.",
    "recall_audit_enabled": "Treat recall audit metadata as sensitive and disable recording"
    " unless it is needed.",
    "semantic_index_present": "Keep the derived semantic sidecar inside the same trust boundary"
    " as the memory store.",
    "secret_patterns_detected": "Inspect and sanitize flagged records locally, then rotate real"
    " credentials outside Nuzo.",
}


semantic_index_path = sidecar_path  # the semantic sidecar beside a store


def privacy_report(report: dict[str, Any], *, recall_events: bool, home: str) -> dict[str, Any]:
    """The privacy profile of a `doctor_report`."""
    safety, git, secret = report["file_safety"], report["git_tracking"], report["secret_scan"]
    index = os.path.lexists(semantic_index_path(report["store_path"]))
    counts = {
        "store_missing": 0 if report["store_exists"] else 1,
        "git_check_unavailable": 1 if git["status"] == "unavailable" else 0,
        "tracked_memory_files": len(git["trackedFiles"]) if git["status"] == "tracked" else 0,
        "unsafe_runtime_paths": len(safety["unsafe"]),
        "stale_runtime_artifacts": len(safety["stale_artifacts"]),
        "unexpected_runtime_files": len(safety["unexpected_files"]),
        "recall_audit_enabled": 1 if recall_events else 0,
        "semantic_index_present": 1 if index else 0,
        "secret_patterns_detected": secret["flagged_records"],
    }
    findings = [
        {"code": code, "count": count, "guidance": _GUIDANCE[code]}
        for code, count in counts.items()
        if count > 0
    ]
    return {
        "profile": "privacy",
        "read_only": True,
        "storage": {
            "initialized": report["store_exists"],
            "store_source": report["config"]["store_source"],
            "scope": report["scope"],
            "authorization_mode": report["authorization"]["mode"],
        },
        "network": {"enabled": False},
        "recall_audit": {"enabled": recall_events},
        "filesystem": {
            "permission_semantics": safety["permission_semantics"],
            "inspected_paths": safety["inspected_paths"],
            "unsafe_findings": len(safety["unsafe"]),
            "stale_artifacts": len(safety["stale_artifacts"]),
            "unexpected_files": len(safety["unexpected_files"]),
        },
        "git": {"status": git["status"], "tracked_memory_files": len(git["trackedFiles"])},
        "semantics": {
            "index_present": index,
            "model_directory_present": os.path.lexists(os.path.join(home, ".nuzo", "models")),
        },
        "secret_scan": dict(secret),
        "findings": findings,
        "status": "ok" if not findings else "warning",
    }


def privacy_text(privacy: dict[str, Any]) -> list[str]:
    """The privacy profile as `doctor --privacy` prints it, line by line."""
    present = {True: "present", False: "not present"}
    on = {True: "enabled", False: "disabled"}
    fs, secret = privacy["filesystem"], privacy["secret_scan"]
    lines = [
        "Nuzo privacy report (read-only)",
        "Storage: " + ("initialized" if privacy["storage"]["initialized"] else "not initialized"),
        f"Store source: {privacy['storage']['store_source']}",
        f"Scope: {privacy['storage']['scope']}",
        f"Authorization: {privacy['storage']['authorization_mode']} (local CLI)",
        f"Network: {on[privacy['network']['enabled']]}",
        f"Recall event recording: {on[privacy['recall_audit']['enabled']]}",
        f"Filesystem permission semantics: {fs['permission_semantics']}",
        f"Unsafe runtime path findings: {fs['unsafe_findings']}",
        f"Stale runtime artifacts: {fs['stale_artifacts']}",
        f"Unexpected runtime files: {fs['unexpected_files']}",
        f"Git tracking: {privacy['git']['status']}"
        f" ({privacy['git']['tracked_memory_files']} tracked memory file(s))",
        f"Semantic index: {present[privacy['semantics']['index_present']]}",
        f"Local model directory: {present[privacy['semantics']['model_directory_present']]}",
        "Secret scan: not requested (use --scan-secrets for an explicit active-record scan)"
        if secret["status"] == "not_requested"
        else f"Secret scan: {secret['flagged_records']} flagged of {secret['scanned_records']}"
        " active record(s)",
    ]
    lines += [f"Finding: {f['code']} ({f['count']}) - {f['guidance']}" for f in privacy["findings"]]
    lines.append(f"Status: {privacy['status']}")
    return lines
