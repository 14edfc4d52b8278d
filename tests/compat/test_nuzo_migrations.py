"""Stores of every earlier Nuzo schema version, made by Nuzo's own migration code stopped at
that version (nuzo_legacy_store.mjs), migrate to version 7 in aidememo exactly as Nuzo migrates
them (MEM-94): the same DDL and columns, the same `capture_key` backfill (ECMAScript whitespace
and case rules on raw legacy content), and Nuzo's integrity check passes; a newer version is
refused by both with MEMORY_SCHEMA_UNSUPPORTED.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.compat.nuzo_oracle import (
    aidememo_cli,
    make_legacy_store,
    nuzo_cli,
    rows_of,
    schema_of,
)
from tests.compat.nuzo_replay import Recording

T0 = "2025-03-01T09:00:00.000Z"
# Raw contents an old store may hold: Nuzo trims on write, but rows written by earlier versions
# or other tools need not be trimmed. The whitespace set differs between ECMAScript and Python
# (U+FEFF is ECMAScript whitespace; U+0085 and U+001C are Python's only).
CONTENTS = [
    "  Run   strict capture validation.  ",
    "\ufeffCache\u00a0Warmup\u3000NIGHTLY\ufeff",
    "Line\u0085break and \u001cseparator stay",
    "İstanbul ẞtraße migration",
    "数据库 迁移\t每周五",
    "Plain cache note",
]


def _rows(version: int) -> list[dict[str, Any]]:
    rows = []
    for n, content in enumerate(CONTENTS):
        row: dict[str, Any] = {
            "id": f"mem_legacy-{n}",
            "scope": "project:alpha" if n % 2 else "user:default",
            "kind": "note",
            "content": content,
            "tags": '["cache","legacy"]' if n % 3 == 0 else "[]",
            "source": "nuzo:cli",
            "confidence": 0.5 + n / 20,
            "created_at": T0,
            "updated_at": f"2025-03-0{n + 1}T09:00:00.000Z",
            "last_used_at": None,
            "archived_at": "2025-04-01T00:00:00.000Z" if n == 5 else None,
        }
        if version >= 2:
            row["revision"] = n + 1
        if version >= 3:
            row["provenance"] = '{"kind":"cli"}' if n == 1 else None
        if version >= 4:
            row["confidence_state"] = "observed" if n == 2 else None
        if version >= 5:
            row["review_after"] = "2030-01-01T00:00:00.000Z" if n == 3 else None
            row["expires_at"] = None
        rows.append(row)
    return rows


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
def test_mem94_each_earlier_nuzo_schema_migrates_as_nuzo_migrates_it(
    recorded: Recording, tmp_path: Path, version: int
) -> None:
    legacy = tmp_path / "legacy" / "memories.sqlite"
    legacy.parent.mkdir(mode=0o700)
    make_legacy_store(recorded, legacy, version, _rows(version))
    assert schema_of(legacy)["user_version"] == version
    by_nuzo = tmp_path / "n" / "memories.sqlite"
    by_ours = tmp_path / "a" / "memories.sqlite"
    for target in (by_nuzo, by_ours):
        target.parent.mkdir(mode=0o700)
        shutil.copy2(legacy, target)
        target.chmod(0o600)
    nuzo = nuzo_cli(recorded, tmp_path / "home", by_nuzo)
    ours = aidememo_cli(tmp_path / "home", by_ours)
    listed_n = nuzo.run("list", "--all-scopes", "--include-archived").stdout
    listed_a = ours.run("list", "--all-scopes", "--include-archived").stdout
    assert listed_a == listed_n
    assert schema_of(by_ours) == schema_of(by_nuzo)
    assert schema_of(by_ours)["user_version"] == 7
    everything = "SELECT * FROM memories ORDER BY id"
    assert rows_of(by_ours, everything) == rows_of(by_nuzo, everything)
    assert nuzo.at(by_ours).run("integrity", "--json").json()["ok"] is True
    for query in ("cache", "migration", "validation strict", "数据库"):
        mine = ours.run("recall", query, "--json", "--include-global", scope="project:alpha")
        theirs = nuzo.run("recall", query, "--json", "--include-global", scope="project:alpha")
        assert mine.json() == theirs.json(), query


def test_mem94_a_newer_schema_is_refused_like_nuzo(recorded: Recording, tmp_path: Path) -> None:
    store = tmp_path / "s" / "memories.sqlite"
    nuzo = nuzo_cli(recorded, tmp_path / "home", store)
    nuzo.run("init")
    conn = sqlite3.connect(store)
    conn.execute("PRAGMA user_version = 8")
    conn.close()
    ours = aidememo_cli(tmp_path / "home", store)
    for args in (("list",), ("remember", "x y", "--kind", "note")):
        theirs = nuzo.run(*args, check=False)
        mine = ours.run(*args, check=False)
        assert mine.returncode == theirs.returncode == 1
        assert mine.stderr.split(":")[0] == theirs.stderr.split(":")[0]
        assert theirs.stderr.startswith("MEMORY_SCHEMA_UNSUPPORTED")
    assert schema_of(store)["user_version"] == 8
