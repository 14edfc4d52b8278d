"""The reference Nuzo 1.2.0 CLI as a test oracle (replayed from its recorded answers), and
aidememo's `memory` CLI beside it.

Nuzo's side of every comparison is `nuzo_replay.Recording`: the answers the real Nuzo 1.2.0 gave
when the tier last ran against it, with the files it wrote (golden/). Every run gets an isolated
HOME and working directory, so the aidememo side never reads or writes a real `~/.nuzo`.

`make_store` builds the tier's sample store (with the recorded Nuzo, so the store is the one
Nuzo made): memories in five scopes and all five kinds, tags, provenance and review dates,
relations, an update, a challenge with supersession, an archived and a hard-deleted memory, CJK
and accented text.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.compat.nuzo_replay import Recording


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


# How a command runs: (argv after the program, env, cwd) -> (exit code, stdout, stderr).
Runner = Callable[[list[str], dict[str, str], Path], tuple[int, str, str]]


def subprocess_runner(prefix: list[str]) -> Runner:
    """Each command in a new process: `prefix + argv`."""

    def run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
        proc = subprocess.run(
            [*prefix, *argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return proc.returncode, proc.stdout, proc.stderr

    return run


def inprocess_aidememo(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    """aidememo's `main(argv)` in this process, with `env` as os.environ and `cwd` as the working
    directory for the call, stdout and stderr captured (as bytes, then decoded)."""
    from aidememo.cli.main import main

    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    out.flush()
    err.flush()
    stdout = out.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]
    stderr = err.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]
    return int(code), stdout, stderr


@dataclass
class Cli:
    """A memory CLI (Nuzo's or aidememo's) run against one store in an isolated home."""

    name: str
    runner: Runner
    home: Path
    store: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("NUZO_", "AIDEMEMO_")) or k.startswith("AIDEMEMO_TEST_")
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

    def run(self, *args: str, scope: str | None = None, check: bool = True) -> Run:
        """`<cli> memory --store STORE [--scope S] ARGS...`; check=True raises on exit != 0."""
        argv = ["memory", "--store", str(self.store)]
        if scope is not None:
            argv += ["--scope", scope]
        argv += list(args)
        self.home.mkdir(parents=True, exist_ok=True)
        # The working directory is outside the home, so `~/.nuzo/config.json` is only ever the
        # user config (inside the home it would also be the nearest project config).
        cwd = self.home.with_name(self.home.name + "-cwd")
        cwd.mkdir(exist_ok=True)
        code, stdout, stderr = self.runner(argv, self.env(), cwd)
        run = Run(argv, code, stdout, stderr)
        if check and run.returncode != 0:
            raise CliError(
                f"{self.name} exited {run.returncode}: {' '.join(args)}\n"
                f"stdout: {run.stdout}\nstderr: {run.stderr}"
            )
        return run

    def at(self, store: Path) -> Cli:
        """The same CLI and home against another store."""
        return Cli(self.name, self.runner, self.home, store, dict(self.extra_env))


def nuzo_cli(recording: Recording, home: Path, store: Path) -> Cli:
    """Nuzo's CLI, answered from the recording of the running test (or shared fixture)."""
    return Cli("nuzo", recording.cli, home, store)


def aidememo_cli(home: Path, store: Path, *, process: bool = False) -> Cli:
    """aidememo's CLI, in this process (or, process=True, as `python -m aidememo`)."""
    if process:
        return Cli("aidememo", subprocess_runner([sys.executable, "-m", "aidememo"]), home, store)
    return Cli("aidememo", inprocess_aidememo, home, store)


# -- the sample store ------------------------------------------------------------------------


@dataclass
class Sample:
    """The ids of the sample store's memories by role, and its relation ids."""

    ids: dict[str, str]
    relations: dict[str, str]

    SCOPES = ("user:default", "project:alpha", "project:beta", "team:core", "agent:reviewer")


def _remember(cli: Cli, scope: str, content: str, kind: str, *flags: str) -> str:
    # Each memory in a millisecond of its own: lists and exports order equal timestamps by
    # (random) id, and two stores made alike should list alike.
    time.sleep(0.002)
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
    recording: Recording, path: Path, version: int, rows: list[dict[str, Any]]
) -> None:
    """A store at schema `version` (1..6) as Nuzo's own migration code stopped there made it,
    holding `rows` (memories with the columns that version has, plus their FTS rows): the
    recorded store, after checking that these are the rows it was made from."""
    spec = path.with_suffix(".rows.json")
    spec.write_text(json.dumps(rows), encoding="utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    recording.legacy_store(path, version, spec.read_bytes())


@dataclass
class CoreRun:
    """What Nuzo's core answered for a benchmark spec: per query its recall time (ns), ids and
    scores."""

    recall_ns: list[int]
    top_ids: list[list[str]]
    top_scores: list[list[float]]


def nuzo_core_run(
    recording: Recording,
    memories: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    *,
    store: Path | None = None,
) -> CoreRun:
    """Nuzo's core remembering `memories` into a new store, then recalling `queries`, as
    recorded for the benchmark baseline; `store` names where the store it made is kept."""
    spec = json.loads(json.dumps({"memories": memories, "queries": queries, "rounds": 1}))
    spec["store_kept"] = store
    out = recording.core_bench(spec)
    return CoreRun(
        recall_ns=[int(v) for v in out["recall_ns"]],
        top_ids=[list(ids) for ids in out["top_ids"]],
        top_scores=[[float(v) for v in scores] for scores in out["top_scores"]],
    )
