"""A repair-fts process killed (SIGKILL) at each of its steps (MEM-17): the canonical rows are
unchanged and the FTS index is either the old one or the rebuilt one, never a mix; the store
then passes integrity (after the rebuilt index) or can still be repaired (after the old one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aidememo.agent_memory.doctor import doctor_report
from aidememo.agent_memory.integrity import inspect_store
from aidememo.agent_memory.repair_fts import STEPS, repair
from tests.memory.maint_support import canonical, drift_all, fts_rows, make_store, rebuilt_fts

BASE = (sys.executable, "-m", "aidememo", "memory", "--store")
APPLY = ("integrity", "repair-fts", "--apply", "--yes", "--backup-path")


@pytest.mark.parametrize("step", STEPS)
def test_mem17_sigkill_at_each_step_leaves_canonical_rows_and_old_or_new_fts(
    store_path: Path, step: str
) -> None:
    drift_all(store_path, make_store(store_path))
    before, old_fts, new_fts = canonical(store_path), fts_rows(store_path), rebuilt_fts(store_path)
    backup = store_path.with_name("b.sqlite")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_TEST_")}
    env["AIDEMEMO_TEST_CRASH_AT"] = step
    proc = subprocess.run(
        [*BASE, str(store_path), *APPLY, str(backup)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # Only the hook kills the process, so dying by SIGKILL proves the step was reached.
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert canonical(store_path) == before
    after = fts_rows(store_path)
    assert after in (old_fts, new_fts)
    assert (after == new_fts) == (step == "committed")
    report = inspect_store(str(store_path))
    assert report.canonical_ok and report.fts_ok == (step == "committed")
    if backup.exists() and step in ("validated", "source_rebuilt", "source_checked", "committed"):
        assert inspect_store(str(backup)).ok and canonical(backup) == before
    leftovers = [p.name for p in store_path.parent.iterdir() if ".tmp-" in p.name]
    if leftovers:
        # The doctor lists what the interrupted run left behind (MEM-19).
        stale = doctor_report(
            store_path=str(store_path),
            scope="project:demo",
            project_scope="project:demo",
            project_root=str(store_path.parent),
            home=str(store_path.parent),
            cwd=str(store_path.parent),
        )["file_safety"]["stale_artifacts"]
        assert {Path(p).name for p in stale} >= set(leftovers)
    if step != "committed":
        # The interrupted repair can be run again to a new backup path.
        again = repair(str(store_path), str(store_path.with_name("again.sqlite")), confirm=True)
        assert again["repaired"] is True
        assert canonical(store_path) == before and fts_rows(store_path) == new_fts
