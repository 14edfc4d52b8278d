"""The reference Nuzo 1.2.0 CLI as a test oracle, and aidememo's `memory` CLI beside it.

`scripts/build_nuzo` (scripts/_nuzo.sh) builds Nuzo from its source tarball into a cache and
`scripts/test` exports AIDEMEMO_NUZO_DIR; without that variable `find_build` looks in the same
cache place itself, so plain `pytest tests/compat` works after one build. Every run gets an
isolated HOME and working directory, so neither CLI reads or writes a real `~/.nuzo`.

`make_store` builds the tier's sample store with the real Nuzo: memories in five scopes and all
five kinds, tags, provenance and review dates, relations, an update, a challenge with
supersession, an archived and a hard-deleted memory, CJK and accented text.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripts._nuzo_baseline import nuzo_build_dir

LEGACY_SCRIPT = Path(__file__).with_name("nuzo_legacy_store.mjs")


@dataclass(frozen=True)
class NuzoBuild:
    """A complete build: the Node 22 binary and the CLI entry point."""

    root: Path
    node: Path
    cli: Path


def find_build() -> NuzoBuild | None:
    """The cached build scripts/build_nuzo made, or None when there is none."""
    root = nuzo_build_dir()
    if root is None:
        return None
    values = dict(
        line.split("=", 1)
        for line in (root / "nuzo.env").read_text(encoding="utf-8").splitlines()
        if "=" in line
    )
    return NuzoBuild(root=root, node=Path(values["NUZO_NODE"]), cli=Path(values["NUZO_CLI"]))


@dataclass
class Run:
    """One finished CLI run."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def lines(self) -> list[str]:
        return self.stdout.splitlines()


class CliError(AssertionError):
    pass


@dataclass
class Cli:
    """A memory CLI (Nuzo's or aidememo's) run against one store in an isolated home."""

    name: str
    prefix: list[str]
    home: Path
    store: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("NUZO_", "AIDEMEMO_")) or k == "AIDEMEMO_NUZO_DIR"
        }
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            AIDEMEMO_HOME=str(self.home / ".aidememo"),
            NUZO_DOCTOR_SKIP_GIT="1",
            TZ="UTC",
            LC_ALL="C.UTF-8",
        )
        env.update(self.extra_env)
        return env

    def run(
        self, *args: str, scope: str | None = None, check: bool = True, stdin: str | None = None
    ) -> Run:
        """`<cli> memory --store STORE [--scope S] ARGS...`; check=True raises on exit != 0."""
        group = ["memory", "--store", str(self.store)]
        if scope is not None:
            group += ["--scope", scope]
        argv = [*self.prefix, *group, *args]
        self.home.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            argv,
            cwd=self.home,
            env=self.env(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        run = Run(argv, proc.returncode, proc.stdout, proc.stderr)
        if check and run.returncode != 0:
            raise CliError(
                f"{self.name} exited {run.returncode}: {' '.join(args)}\n"
                f"stdout: {run.stdout}\nstderr: {run.stderr}"
            )
        return run

    def at(self, store: Path) -> Cli:
        """The same CLI and home against another store."""
        return Cli(self.name, self.prefix, self.home, store, dict(self.extra_env))


def nuzo_cli(build: NuzoBuild, home: Path, store: Path) -> Cli:
    return Cli("nuzo", [str(build.node), str(build.cli)], home, store)


def aidememo_cli(home: Path, store: Path) -> Cli:
    return Cli("aidememo", [sys.executable, "-m", "aidememo"], home, store)


# -- the sample store ------------------------------------------------------------------------


@dataclass
class Sample:
    """The ids of the sample store's memories by role, and its relation ids."""

    ids: dict[str, str]
    relations: dict[str, str]

    SCOPES = ("user:default", "project:alpha", "project:beta", "team:core", "agent:reviewer")


def _remember(cli: Cli, scope: str, content: str, kind: str, *flags: str) -> str:
    out = cli.run("remember", content, "--kind", kind, *flags, scope=scope)
    return out.stdout.strip().splitlines()[-1]


NOTES: list[tuple[str, str, str, str, list[str]]] = [
    # (role, scope, kind, content, tags)
    ("pnpm", "project:alpha", "preference", "Use pnpm for the web repo, not npm.", ["tooling"]),
    (
        "sqlite",
        "project:alpha",
        "project_decision",
        "The cache layer stores sessions in SQLite with WAL and a 5 s busy timeout.",
        ["storage", "sqlite"],
    ),
    (
        "deploy",
        "project:alpha",
        "instruction",
        "Deploy the worker only after the migration check passes on staging.",
        ["deploy", "ci"],
    ),
    (
        "cjk",
        "project:alpha",
        "fact",
        "数据库迁移每周五执行 (database migrations run every Friday)",
        ["db", "schedule"],
    ),
    ("kana", "project:alpha", "note", "日本語のメモ: キャッシュは毎晩クリアする", ["cache"]),
    (
        "accent",
        "project:alpha",
        "note",
        "A configuração padrão usa migração automática do cache.",
        ["cache", "pt"],
    ),
    ("old_port", "project:alpha", "fact", "The staging API listens on port 8080.", ["staging"]),
    ("new_port", "project:alpha", "fact", "The staging API listens on port 9090 now.", ["staging"]),
    ("gone", "project:alpha", "note", "Temporary note about the cache flush script.", ["cache"]),
    ("archived", "project:alpha", "note", "Archived cache plan that is no longer used.", ["cache"]),
    ("beta", "project:beta", "fact", "Beta stores its cache in Redis, not SQLite.", ["cache"]),
    (
        "global_pref",
        "user:default",
        "preference",
        "I prefer concise answers with the cache command first.",
        ["style", "cache"],
    ),
    ("global_fact", "user:default", "fact", "My editor is Helix; migrations open in it.", []),
    (
        "team",
        "team:core",
        "instruction",
        "Team rule: every migration needs a rollback note.",
        ["migration", "review"],
    ),
    ("agent", "agent:reviewer", "note", "Reviewer agent checks cache invalidation first.", []),
]


def make_store(cli: Cli) -> Sample:
    """Fill `cli.store` (new) with the sample memories through `cli` (Nuzo's CLI)."""
    cli.run("init")
    ids: dict[str, str] = {}
    for role, scope, kind, content, tags in NOTES:
        flags: list[str] = []
        if tags:
            flags += ["--tag", *tags]
        if role == "sqlite":
            flags += [
                "--provenance-json",
                json.dumps({"kind": "file", "path": "docs/cache.md", "line": 12, "reason": "doc"}),
                "--review-after",
                "2030-01-01T00:00:00.000Z",
            ]
        if role == "deploy":
            flags += ["--expires-at", "2031-06-30T12:00:00.000Z", "--confidence-state", "observed"]
        ids[role] = _remember(cli, scope, content, kind, *flags)
    relations = {
        "related": _relate(cli, ids["sqlite"], ids["cjk"], "related_to", "both about storage"),
        "conflict": _relate(cli, ids["beta"], ids["sqlite"], "conflicts_with", None),
    }
    cli.run(
        "update",
        ids["pnpm"],
        "--content",
        "Use pnpm for the web repo and the docs site, not npm.",
        "--tag",
        "tooling",
        "pnpm",
        "--expected-revision",
        "1",
    )
    cli.run(
        "challenge",
        ids["old_port"],
        "--outcome",
        "superseded",
        "--reason",
        "the port moved",
        "--superseded-by",
        ids["new_port"],
    )
    cli.run("challenge", ids["kana"], "--outcome", "needs_review", "--reason", "check the schedule")
    cli.run("forget", ids["archived"], "--archive", "--reason", "plan dropped")
    cli.run("forget", ids["gone"], "--delete", "--yes", "--reason", "temporary")
    return Sample(ids=ids, relations=relations)


def _relate(cli: Cli, source: str, target: str, relation: str, reason: str | None) -> str:
    args = ["relate", source, "--target", target, "--relation", relation]
    if reason is not None:
        args += ["--reason", reason]
    out = cli.run(*args)
    return out.stdout.strip().split()[0]


# -- looking inside a store ------------------------------------------------------------------


def schema_of(path: Path) -> dict[str, Any]:
    """The store's schema as comparable data: user_version, sqlite_master, columns, indexes."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        master = sorted(
            (row[0], row[1], " ".join((row[2] or "").split()))
            for row in conn.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
            )
        )
        tables = [row[1] for row in master if row[0] == "table"]
        columns = {
            t: [tuple(r) for r in conn.execute(f"PRAGMA table_info('{t}')")]
            for t in tables
            if not t.startswith("memories_fts")
        }
        return {
            "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
            "master": master,
            "columns": columns,
        }
    finally:
        conn.close()


def rows_of(path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def make_legacy_store(
    build: NuzoBuild, path: Path, version: int, rows: list[dict[str, Any]]
) -> None:
    """A store at schema `version` (1..6) made by Nuzo's own migration code stopped there.

    nuzo_legacy_store.mjs runs the build's `migrate` with the steps after `version` disabled and
    inserts `rows` (memories with the columns that version has, plus their FTS rows)."""
    spec = path.with_suffix(".rows.json")
    spec.write_text(json.dumps(rows), encoding="utf-8")
    proc = subprocess.run(
        [
            str(build.node),
            str(LEGACY_SCRIPT),
            str(build.root / "src"),
            str(path),
            str(version),
            str(spec),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        raise CliError(f"legacy store v{version}: {proc.stdout}\n{proc.stderr}")
