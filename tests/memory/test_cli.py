"""`aidememo memory ...`: Nuzo's commands, output and exit statuses (MEM-12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from aidememo.cli.main import main


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aidememo", "memory", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_mem12_remember_recall_list_show_and_exit_statuses(tmp_path: Path, capsys: object) -> None:
    store = str(tmp_path / "s.sqlite")
    base = ["--store", store, "--scope", "project:demo"]
    made = run(
        *base,
        "remember",
        "Use uv for Python installs.",
        "--kind",
        "instruction",
        "--tag",
        "python",
        "tooling",
    )
    assert made.returncode == 0, made.stderr
    memory_id = made.stdout.strip()
    assert memory_id.startswith("mem_")
    recalled = run(*base, "recall", "uv python")
    assert recalled.stdout == f"{memory_id}\t1020\tUse uv for Python installs.\n"
    as_json = json.loads(run(*base, "recall", "uv", "--json").stdout)
    assert as_json["results"][0]["memory"]["scope"] == "project:demo"
    assert as_json["results"][0]["memory"]["confidenceState"] == "user_confirmed"
    assert as_json["diagnostics"] == {
        "requestedMode": "fts",
        "effectiveMode": "fts",
        "semanticFallbackCode": None,
    }
    listed = run(*base, "list").stdout
    assert (
        listed
        == f"{memory_id}\trev=1\tscope=project:demo\tinstruction\tUse uv for Python installs.\n"
    )
    shown = json.loads(run(*base, "show", memory_id, "--json").stdout)
    assert list(shown) == ["memory", "relations", "events"]
    assert shown["memory"]["confidence"] == 1 and shown["events"][0]["actor"] == "nuzo:cli"

    refused = run(*base, "remember", "x", "--kind", "opinion")
    assert (refused.returncode, refused.stderr) == (
        1,
        "MEMORY_KIND_UNSUPPORTED: Memory kind is not supported.\n",
    )
    stale = run(*base, "update", memory_id, "--content", "y", "--expected-revision", "7")
    assert stale.returncode == 1 and stale.stderr.startswith("MEMORY_REVISION_CONFLICT: ")
    usage = run(*base, "recall", "x", "--limit", "0")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
    both = run(*base, "forget", memory_id, "--archive", "--delete")
    assert both.stderr.startswith("MEMORY_FORGET_MODE_CONFLICT")
    assert run(*base, "forget", memory_id).stdout == "Archived\n"
    assert main(["memory", "--store", store, "list", "--include-archived"]) == 0


def test_mem12_forget_many_export_import_and_challenge_lines(tmp_path: Path) -> None:
    store, other = str(tmp_path / "s.sqlite"), str(tmp_path / "o.sqlite")
    base = ["--store", store, "--scope", "project:demo"]
    ids = [
        run(
            *base, "remember", f"Cache note {i}.", "--kind", "note", "--tag", "cache"
        ).stdout.strip()
        for i in range(2)
    ]
    preview = run(*base, "forget-many", "--tag", "cache").stdout.splitlines()
    assert preview[0] == "Preview\tmatched=2\taffected=0\tmode=archive"
    assert sorted(preview[1:]) == sorted(ids)
    out = tmp_path / "export.json"
    assert run(*base, "export", "--path", str(out)).stdout == f"Exported 2 memories to {out}\n"
    assert out.stat().st_mode & 0o777 == 0o600
    imported = run("--store", other, "import", str(out))
    assert imported.stdout == "Imported 2 memories\n"
    again = run("--store", other, "import", str(out), "--dry-run")
    assert again.stdout == "Would import 0 memories, skipped 2\n"
    challenged = run(*base, "challenge", ids[0], "--outcome", "stale", "--reason", "old")
    fields = challenged.stdout.strip().split("\t")
    assert fields[:4] == ["Challenged", ids[0], "outcome=stale", "rev=2"]
    assert fields[4] == "confidence_state=deprecated" and fields[5].startswith("review_after=20")
    markdown = run(*base, "export", "--format", "markdown").stdout
    assert markdown.startswith("# Nuzo Memory Export\n") and "```text\nCache note" in markdown


def test_mem12_init_writes_config_and_store_and_project_init_is_local(tmp_path: Path) -> None:
    home, project = tmp_path / "init-home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {**os.environ, "HOME": str(home)}
    env = {k: v for k, v in env.items() if not k.startswith("NUZO_")}
    user = subprocess.run(
        [sys.executable, "-m", "aidememo", "memory", "init"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=project,
    )
    assert user.returncode == 0, user.stderr
    store = home / ".nuzo" / "memory" / "memories.sqlite"
    assert user.stdout.splitlines() == [
        "Nuzo initialized",
        f"Store: {store}",
        "Scope: user:default",
        "Network: disabled",
    ]
    config = json.loads((home / ".nuzo" / "config.json").read_text())
    assert config["storage"] == {"driver": "sqlite", "path": str(store)}
    assert (home / ".nuzo" / "config.json").stat().st_mode & 0o777 == 0o600
    local = subprocess.run(
        [sys.executable, "-m", "aidememo", "memory", "init", "--project"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=project,
    )
    assert local.returncode == 0, local.stderr
    assert (project / ".nuzo" / "memory" / "memories.sqlite").exists()
    config = json.loads((project / ".nuzo" / "config.json").read_text())
    assert config["storage"]["path"] == ".nuzo/memory/memories.sqlite"
    assert config["default_scope"].startswith("project:")
    made = subprocess.run(
        [sys.executable, "-m", "aidememo", "memory", "remember", "Local note.", "--kind", "note"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=project,
    )
    assert made.returncode == 0, made.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "aidememo", "memory", "list"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=project,
    )
    assert f"scope={config['default_scope']}" in listed.stdout
