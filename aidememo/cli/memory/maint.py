"""The maintenance commands of `aidememo memory`: `integrity`, `integrity repair-fts`, `backup`,
`restore` and `doctor` (SPEC.md MEM-16..MEM-19).

They never open the store as the other commands do (which creates and migrates it): `integrity`
and `doctor` only read, `backup` reads through a read-only connection, `restore` writes a new
store file, and `repair-fts` holds its own guarded write transaction. Output lines, `--json`
shapes and exit statuses are Nuzo 1.2's.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from aidememo.agent_memory import paths
from aidememo.agent_memory.backup import backup_store, restore_store
from aidememo.agent_memory.doctor import doctor_report, doctor_text, runtime_sources
from aidememo.agent_memory.integrity import inspect_store
from aidememo.agent_memory.privacy import privacy_report, privacy_text
from aidememo.agent_memory.render import untrusted_json
from aidememo.agent_memory.repair_fts import default_backup_path, plan_repair, repair

EXIT_FAILED = 1
EXIT_USAGE = 2


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def _store_path(ns: argparse.Namespace) -> str:
    return paths.resolve_runtime(store=ns.store, scope=ns.scope).store_path


def add_maintenance_commands(command: Any) -> None:
    """Register the maintenance commands with `command(name, help)` of the memory group."""
    p = command("integrity", "validate store integrity, schema, FTS and counts without writing")
    p.add_argument("--json", action="store_true")
    sub = p.add_subparsers(dest="integrity_command", metavar="COMMAND")
    r = sub.add_parser(
        "repair-fts",
        help="preview or explicitly repair derived FTS rows from canonical memories",
    )
    r.add_argument("--dry-run", action="store_true", help="preview FTS drift without writing")
    r.add_argument("--apply", action="store_true", help="rebuild FTS after a validated backup")
    r.add_argument("--yes", action="store_true", help="confirm the requested FTS rebuild")
    r.add_argument("--backup-path", help="new validated backup destination used before repair")
    r.add_argument("--json", action="store_true", dest="repair_json")
    r.set_defaults(_repair_parser=r)

    p = command("backup", "create a WAL-safe backup of the memory store")
    p.add_argument("--path", required=True, help="destination backup path")
    p.add_argument("--overwrite", action="store_true", help="replace an existing backup path")
    p.add_argument("--json", action="store_true")

    p = command("restore", "restore the memory store from a validated backup")
    p.add_argument("path", help="source backup path")
    p.add_argument("--yes", action="store_true", help="confirm replacing the memory store")
    p.add_argument("--json", action="store_true")

    p = command("doctor", "check the local memory environment (content-free)")
    p.add_argument("--privacy", action="store_true", help="a path-free privacy posture report")
    p.add_argument("--scan-secrets", action="store_true", help="scan active memories for secrets")
    p.add_argument("--json", action="store_true")


def cmd_integrity(ns: argparse.Namespace, _store: None) -> int:
    if ns.integrity_command == "repair-fts":
        return _repair_fts(ns)
    report = inspect_store(_store_path(ns))
    _out(untrusted_json(report.to_json()) if ns.json else report.text())
    return 0 if report.ok else EXIT_FAILED


def _usage(ns: argparse.Namespace, message: str) -> int:
    parser: argparse.ArgumentParser = ns._repair_parser
    parser.print_usage(sys.stderr)
    sys.stderr.write(f"error: {message}\n")
    return EXIT_USAGE


def _repair_fts(ns: argparse.Namespace) -> int:
    if ns.dry_run and ns.apply:
        return _usage(ns, "option '--dry-run' cannot be used with option '--apply'")
    if ns.yes and not ns.apply:
        return _usage(ns, "--yes requires --apply")
    if ns.backup_path is not None and not ns.apply:
        return _usage(ns, "--backup-path requires --apply")
    as_json = ns.json or ns.repair_json
    source = _store_path(ns)
    if not ns.apply:
        plan = plan_repair(source)
        report = plan["report"]
        if as_json:
            status = (
                "blocked"
                if not plan["repairable"]
                else "repair_required"
                if plan["repairRequired"]
                else "healthy"
            )
            _out(
                untrusted_json(
                    {
                        "mode": "preview",
                        "status": status,
                        "source_path": plan["sourcePath"],
                        "repair_required": plan["repairRequired"],
                        "repairable": plan["repairable"],
                        "applied": False,
                        "backup_path": None,
                        "reindexed_rows": 0,
                        "before": report.to_json(),
                        "backup": None,
                        "after": None,
                    }
                )
            )
        else:
            yes = {True: "yes", False: "no"}
            for line in (
                "FTS repair preview (no changes made)",
                f"Store: {plan['sourcePath']}",
                f"Repair required: {yes[plan['repairRequired']]}",
                f"Repairable: {yes[plan['repairable']]}",
                f"Memories: {report.memory_count}",
                f"Active memories: {report.active_memory_count}",
                f"FTS rows: {report.fts_row_count}",
                f"Missing FTS rows: {report.missing_fts_rows}",
                f"Orphan FTS rows: {report.orphan_fts_rows}",
                f"Duplicate FTS rows: {report.duplicate_fts_rows}",
                f"Mismatched FTS rows: {report.mismatched_fts_rows}",
            ):
                _out(line)
            if plan["repairRequired"] and plan["repairable"]:
                _out("Apply with: aidememo memory integrity repair-fts --apply --yes")
        return EXIT_FAILED if not plan["repairable"] or plan["repairRequired"] else 0
    result = repair(source, ns.backup_path or default_backup_path(source), confirm=ns.yes)
    before, after = result["before"], result["after"]
    if as_json:
        _out(
            untrusted_json(
                {
                    "mode": "apply",
                    "status": "repaired" if result["repaired"] else "not_needed",
                    "source_path": result["sourcePath"],
                    "repair_required": not before.fts_ok,
                    "repairable": before.canonical_ok and before.fts_schema_ok,
                    "applied": result["repaired"],
                    "backup_path": result["backupPath"],
                    "pages": result["pages"],
                    "remaining_pages": result["remainingPages"],
                    "reindexed_rows": after.fts_row_count if result["repaired"] else 0,
                    "before": before.to_json(),
                    "backup": None if result["backup"] is None else result["backup"].to_json(),
                    "after": after.to_json(),
                }
            )
        )
    elif result["repaired"]:
        _out(f"Repaired {after.fts_row_count} FTS row(s) in {result['sourcePath']}")
        _out(f"Validated backup: {result['backupPath']}")
        _out("Integrity: ok")
    else:
        _out(f"FTS index is already healthy: {result['sourcePath']}")
    return 0


def _copied(ns: argparse.Namespace, result: dict[str, Any], done: str, where: str) -> int:
    """A backup's or restore's outcome: its JSON, or how many memories went where and the
    copy's integrity."""
    if ns.json:
        _out(untrusted_json(result))
    else:
        integrity = result["integrity"]
        _out(f"{done} {integrity['memory_count']} memories to {result[where]}")
        _out(f"Integrity: {'ok' if integrity['ok'] else 'failed'}")
    return 0


def cmd_backup(ns: argparse.Namespace, _store: None) -> int:
    result = backup_store(_store_path(ns), os.path.abspath(ns.path), overwrite=ns.overwrite)
    return _copied(ns, result, "Backed up", "backup_path")


def cmd_restore(ns: argparse.Namespace, _store: None) -> int:
    result = restore_store(os.path.abspath(ns.path), _store_path(ns), overwrite=ns.yes)
    return _copied(ns, result, "Restored", "target_path")


def cmd_doctor(ns: argparse.Namespace, _store: None) -> int:
    runtime = paths.resolve_runtime(store=ns.store, scope=ns.scope)
    home = os.path.expanduser("~")
    report = doctor_report(
        store_path=runtime.store_path,
        scope=runtime.scope,
        project_scope=paths.project_scope(runtime.project_root),
        project_root=runtime.project_root,
        home=home,
        cwd=os.getcwd(),
        scan_secrets=ns.scan_secrets,
        sources=runtime_sources(
            store_option=ns.store,
            scope_option=ns.scope,
            project_root=runtime.project_root,
            home=home,
            env=os.environ,
        ),
    )
    if ns.privacy:
        privacy = privacy_report(report, recall_events=runtime.record_recall_events, home=home)
        lines = [untrusted_json(privacy)] if ns.json else privacy_text(privacy)
    else:
        lines = [untrusted_json(report)] if ns.json else doctor_text(report)
    for line in lines:
        _out(line)
    return 0


MAINTENANCE_HANDLERS = {
    "integrity": cmd_integrity,
    "backup": cmd_backup,
    "restore": cmd_restore,
    "doctor": cmd_doctor,
}
