"""The reference Nuzo 1.2.0 as recorded answers: the compatibility tier's oracle, replayed.

`golden/` holds every call the tier made to the reference Nuzo while it last ran against the
real program (see golden/README.md): the command, its environment and working directory, the
exit code, stdout and stderr, the MCP messages, and every file the call created, changed or
deleted. A `Recording` serves one test's calls in the order the test makes them:

- it checks that the test asks exactly what was recorded (argv, the environment the tier set,
  the working directory, MCP requests, the legacy-store rows, the benchmark spec), so a changed
  test cannot silently replay another test's answer;
- it maps the recording's machine paths (`{TMP}` placeholders), path-derived project scopes and
  the random ids of memories, relations and events aidememo created (whose values differ on every
  run) onto this run's, in both directions;
- it applies the call's file effects to this run's folders, so the store Nuzo wrote, the export
  it made or the sidecar it cleared is there byte for byte for the aidememo side to read.

Nothing here builds or runs Nuzo. A missing corpus fails the tier (it never skips).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).with_name("golden")
ID_RE = re.compile(
    r"(?<![0-9A-Za-z])(?:mem|rel|evt)_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}"
    r"-[0-9a-f]{12}(?![0-9a-f])"
)
SCOPE_RE = re.compile(r"project:[0-9a-f]{16}(?![0-9a-f])")
TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})")
TIME_COLUMNS = (
    "created_at",
    "updated_at",
    "last_used_at",
    "archived_at",
    "review_after",
    "expires_at",
)
# Session- and module-scoped fixtures whose calls were recorded under the first test using them.
SHARED_FIXTURES = ("sample_template", "review_store")
# Tests renamed since the recording: this name -> the node id their calls were recorded under.
RECORDED_AS = {
    "tests/compat/test_nuzo_text.py::"
    "test_mem92_aidememo_writing_a_nuzo_store_from_two_processes_at_once_loses_nothing": (
        "tests/compat/test_nuzo_text.py::"
        "test_mem92_nuzo_and_aidememo_writing_one_store_at_once_lose_nothing"
    ),
    "tests/compat/test_nuzo_open.py::"
    "test_mem90_the_in_process_runner_prints_what_the_aidememo_process_prints": (
        "tests/compat/test_nuzo_open.py::"
        "test_mem90_the_batch_runner_prints_what_the_nuzo_process_prints"
    ),
}


class ReplayMismatch(AssertionError):
    """The test asked the recorded Nuzo something it was not asked when the corpus was made."""


@dataclass(frozen=True)
class Corpus:
    calls_by_test: dict[str, list[dict[str, Any]]]
    calls_by_fixture: dict[str, list[dict[str, Any]]]


@cache
def corpus() -> Corpus:
    manifest = GOLDEN / "manifest.jsonl.gz"
    if not manifest.is_file():
        raise FileNotFoundError(f"the recorded Nuzo corpus is missing: {manifest}")
    by_test: dict[str, list[dict[str, Any]]] = {}
    by_fixture: dict[str, list[dict[str, Any]]] = {}
    with gzip.open(manifest, "rt", encoding="utf-8") as lines:
        for line in lines:
            call = json.loads(line)
            if call.get("fixture") in SHARED_FIXTURES:
                by_fixture.setdefault(call["fixture"], []).append(call)
            else:
                by_test.setdefault(call["test"], []).append(call)
    return Corpus(by_test, by_fixture)


def content(sha256: str) -> bytes:
    """A captured file's bytes, checked against the digest that names it."""
    data = gzip.decompress((GOLDEN / "files" / f"{sha256}.gz").read_bytes())
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"golden file {sha256} does not match its digest")
    return data


def path_scope(root: str) -> str:
    """Nuzo's automatic project scope of a project root."""
    real = os.path.realpath(root)
    return "project:" + hashlib.sha256(real.encode("utf-8")).hexdigest()[:16]


@dataclass
class Translation:
    """Recorded <-> this run: folder placeholders, path scopes and random ids."""

    folders: dict[str, str]  # recorded placeholder prefix -> this run's folder
    ids: dict[str, str] = field(default_factory=dict)  # recorded id -> ours
    scopes: dict[str, str] = field(default_factory=dict)  # recorded path scope -> ours
    times: dict[str, str] = field(default_factory=dict)  # recorded clock time -> ours
    recorded_ids: set[str] = field(default_factory=set)  # every id the recording has shown

    def _ours_ids(self) -> dict[str, str]:
        return {v: k for k, v in self.ids.items()}

    def to_ours(self, text: str) -> str:
        for placeholder, folder in sorted(self.folders.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(placeholder, folder)
        text = ID_RE.sub(lambda m: self.ids.get(m.group(0), m.group(0)), text)
        text = TIME_RE.sub(lambda m: self.times.get(m.group(0), m.group(0)), text)
        return SCOPE_RE.sub(lambda m: self.scopes.get(m.group(0), m.group(0)), text)

    def to_recorded(self, text: str) -> str:
        for placeholder, folder in sorted(self.folders.items(), key=lambda kv: -len(kv[1])):
            text = text.replace(folder, placeholder)
        back = self._ours_ids()
        text = ID_RE.sub(lambda m: back.get(m.group(0), m.group(0)), text)
        times = {v: k for k, v in self.times.items()}
        text = TIME_RE.sub(lambda m: times.get(m.group(0), m.group(0)), text)
        scopes = {v: k for k, v in self.scopes.items()}
        return SCOPE_RE.sub(lambda m: scopes.get(m.group(0), m.group(0)), text)

    def learn_scopes(self, call: dict[str, Any]) -> None:
        for recorded, folder in call.get("random", {}).get("path_scopes", {}).items():
            self.scopes[recorded] = path_scope(self.to_ours(folder))

    def unify(self, ours: str, recorded: str, where: str) -> None:
        """Equal strings once ids are paired; pairs ids the recording and this run hold at the
        same place (an id aidememo made in this run against the one it made then)."""
        mine = self.to_recorded(ours)
        if mine == recorded:
            return
        if ID_RE.sub("", mine) != ID_RE.sub("", recorded):
            raise ReplayMismatch(f"{where}: asked {mine!r}, recorded {recorded!r}")
        back = self._ours_ids()
        for a, b in zip(ID_RE.findall(mine), ID_RE.findall(recorded), strict=True):
            if a == b:
                continue
            our_id = back.get(a, a)
            if b in self.ids and self.ids[b] != our_id:
                raise ReplayMismatch(f"{where}: {our_id} was paired with another id before")
            self.ids[b] = our_id

    def unify_json(self, ours: Any, recorded: Any, where: str) -> None:
        self.unify(json.dumps(ours, sort_keys=True), json.dumps(recorded, sort_keys=True), where)

    def value_to_ours(self, value: Any) -> Any:
        return json.loads(self.to_ours(json.dumps(value)))

    def align(self, answer: Any, store: Path) -> None:
        """Pairs the ids and clock times of rows this run wrote (whose values differ from the
        recording's) with the recorded ones, by what the rows hold: a memory by its content and
        scope, a relation by its ends and kind, an event by its memory and type."""
        if not store.is_file():
            return
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            for item in _dicts(answer):
                self._align_one(conn, item)
        except sqlite3.DatabaseError:
            return
        finally:
            conn.close()

    def _align_one(self, conn: sqlite3.Connection, item: dict[str, Any]) -> None:
        rid = item.get("id")
        if not isinstance(rid, str) or not ID_RE.fullmatch(rid):
            return
        table = {"mem": "memories", "rel": "memory_relations", "evt": "memory_events"}[rid[:3]]
        shared = conn.execute(f"SELECT * FROM {table} WHERE id = ?", (self.ids.get(rid, rid),))
        row = shared.fetchone()
        if row is not None:  # a row both sides hold: Nuzo made it, or it is paired already
            self._align_times(item, row)
            return
        taken = set(self.ids.values())
        if table == "memories" and {"content", "scope"} <= item.keys():
            sql = "SELECT * FROM memories WHERE content = ? AND scope = ?"
            rows = conn.execute(sql, (item["content"], item["scope"])).fetchall()
        elif table == "memory_relations" and "relation" in item:
            # An end this run made may be unpaired yet: match on the ends that are known.
            ends = ("source_memory_id", "target_memory_id")
            known = {e: self._ours_or_shared(conn, item[e]) if e in item else None for e in ends}
            where = " AND ".join(f"{e} = ?" for e in ends if known[e] is not None)
            sql = f"SELECT * FROM memory_relations WHERE relation = ? AND {where or '1'}"
            args = [item["relation"], *(known[e] for e in ends if known[e] is not None)]
            rows = conn.execute(sql, args).fetchall()
            rows = [r for r in rows if r["id"] not in taken and r["id"] not in self.recorded_ids]
            if rows:
                for e in ends:
                    if known[e] is None and e in item and item[e] not in self.ids:
                        self.ids[item[e]] = rows[0][e]
        elif table == "memory_events" and "event_type" in item:
            memory = item.get("memory_id")
            sql = (
                "SELECT * FROM memory_events WHERE memory_id IS ? AND event_type = ?"
                " ORDER BY created_at, id"
            )
            rows = conn.execute(sql, (self.ids.get(memory, memory), item["event_type"])).fetchall()
        else:
            return
        rows = [r for r in rows if r["id"] not in taken and r["id"] not in self.recorded_ids]
        if not rows:
            return
        row = rows[0]
        self.ids[rid] = row["id"]
        self._align_times(item, row)

    def _ours_or_shared(self, conn: sqlite3.Connection, recorded: str) -> str | None:
        """This run's id for a recorded memory id, when known (paired, or a row both hold)."""
        if recorded in self.ids:
            return self.ids[recorded]
        row = conn.execute("SELECT 1 FROM memories WHERE id = ?", (recorded,)).fetchone()
        return recorded if row is not None else None

    def align_lines(self, text: str, store: Path) -> None:
        """`list`-style lines (`ID<TAB>rev=N<TAB>scope=S<TAB>...<TAB>CONTENT`) and `relations`
        lines (`ID<TAB>KIND->MEMORY<TAB>...`): a memory this run made is paired by its content and
        scope, a relation by its kind and shown end."""
        items: list[dict[str, str]] = []
        for line in text.splitlines():
            fields = line.split("\t")
            edge = re.fullmatch(r"(\w+)(->|<-)(\S+)", fields[1]) if len(fields) > 1 else None
            if ID_RE.fullmatch(fields[0]) and fields[0].startswith("rel_") and edge:
                end = "target_memory_id" if edge.group(2) == "->" else "source_memory_id"
                items.append({"id": fields[0], "relation": edge.group(1), end: edge.group(3)})
                continue
            scope = next((f[6:] for f in fields if f.startswith("scope=")), None)
            if len(fields) >= 3 and ID_RE.fullmatch(fields[0]) and scope is not None:
                items.append({"id": fields[0], "scope": scope, "content": fields[-1]})
        if items:
            self.align(items, store)

    def _align_times(self, item: dict[str, Any], row: sqlite3.Row) -> None:
        for column in TIME_COLUMNS:
            camel = re.sub(r"_(\w)", lambda m: m.group(1).upper(), column)
            recorded = item.get(column, item.get(camel))
            mine = row[column] if column in row.keys() else None
            if isinstance(recorded, str) and isinstance(mine, str) and TIME_RE.fullmatch(recorded):
                self.times.setdefault(recorded, mine)


class Recording:
    """One test's (or one shared fixture's) recorded Nuzo calls, served in order."""

    def __init__(self, name: str, calls: list[dict[str, Any]], folders: dict[str, str]) -> None:
        self.name = name
        self._calls = calls
        self._at = 0  # the next call to serve
        self.t = Translation(folders)
        self._mcp_store: Path | None = None

    # -- the calls --------------------------------------------------------------------------

    def _peek(self, kind: str, what: str) -> dict[str, Any]:
        """The next recorded call, which must be of `kind`; not yet served."""
        if self._at == len(self._calls):
            raise ReplayMismatch(f"{self.name}: no recorded Nuzo call left for {what}")
        call = self._calls[self._at]
        if call["kind"] != kind:
            raise ReplayMismatch(
                f"{self.name}: {what}, but the recording has a {call['kind']} call"
            )
        return call

    def _next(self, kind: str, what: str) -> dict[str, Any]:
        call = self._peek(kind, what)
        self._at += 1
        self.t.learn_scopes(call)
        self.t.recorded_ids.update(ID_RE.findall(json.dumps(call)))
        return call

    def finished(self) -> bool:
        return self._at == len(self._calls)

    def set_aside(self, reason: str) -> None:
        """The rest of the recording cannot be replayed (`reason`); the test covers its intent
        another way and says so."""
        assert reason
        self._at = len(self._calls)

    def cli(self, argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
        """`nuzo ARGV` as recorded: checks the question, applies the file effects, answers."""
        call = self._next("cli", " ".join(argv))
        where = f"{self.name} call {call['n']}"
        if len(argv) != len(call["argv"]):
            raise ReplayMismatch(f"{where}: asked {argv!r}, recorded {call['argv']!r}")
        for mine, recorded in zip(argv, call["argv"], strict=True):
            self.t.unify(mine, recorded, where)
        self.t.unify(str(cwd), call["cwd"], where + " cwd")
        for key, value in call["env"].items():
            self.t.unify(env.get(key, "<unset>"), value, f"{where} env {key}")
        for key in env:
            if key.startswith("NUZO_") and key not in call["env"]:
                raise ReplayMismatch(f"{where}: {key} set, but not in the recording")
        if "--store" in argv:
            store = Path(argv[argv.index("--store") + 1])
            answer = _json_or_none(call["stdout"])
            if answer is not None:
                self.t.align(answer, store)
            else:
                self.t.align_lines(call["stdout"], store)
        self._apply(call)
        return call["code"], self.t.to_ours(call["stdout"]), self.t.to_ours(call["stderr"])

    def mcp(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """One JSON-RPC message to Nuzo's MCP server; its recorded reply (None for a
        notification)."""
        call = self._next("mcp", json.dumps(request))
        self.t.unify_json(request, call["request"], f"{self.name} mcp step {call['step']}")
        response = call["response"]
        if response is not None and self._mcp_store is not None:
            for part in response.get("result", {}).get("content", []):
                answer = _json_or_none(part.get("text", ""))
                if answer is not None:
                    self.t.align(answer, self._mcp_store)
        self._apply(call)
        return None if response is None else dict(self.t.value_to_ours(response))

    def mcp_server(self, env: dict[str, str], cwd: Path) -> None:
        """The start of a recorded MCP server session: the environment the tier gave it."""
        call = self._peek("mcp", "an MCP server start")  # its step 0 is the initialize
        server = call.get("server")
        if server is None or call["step"] != 0:
            raise ReplayMismatch(f"{self.name}: an MCP server start, recorded step {call['step']}")
        for key, value in server["env"].items():
            self.t.unify(env.get(key, "<unset>"), value, f"{self.name} mcp server env {key}")
        self.t.unify(str(cwd), server["cwd"], f"{self.name} mcp server cwd")
        self._mcp_store = Path(env["NUZO_MEMORY_STORE"])

    def legacy_store(self, store: Path, version: int, rows_json: bytes) -> None:
        """A store at schema `version` made by Nuzo's own migration code, as recorded."""
        call = self._next("legacy_store", f"a legacy store at v{version}")
        if int(call["argv"][3]) != version:
            raise ReplayMismatch(f"{self.name}: v{version}, recorded v{call['argv'][3]}")
        self.t.unify(str(store), call["argv"][2], f"{self.name} legacy store path")
        recorded_rows = [i["sha256"] for i in call["inputs"]]
        if hashlib.sha256(rows_json).hexdigest() not in recorded_rows:
            raise ReplayMismatch(f"{self.name}: the legacy rows differ from the recorded ones")
        if call["code"] != 0:
            raise ReplayMismatch(f"{self.name}: the recorded legacy store failed")
        self._apply(call)

    def core_bench(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Nuzo's core run over `spec` (memories, queries, rounds, store) as recorded: its
        out.json, with the stores it kept."""
        call = self._next("core_bench", "a core benchmark run")
        recorded_spec: dict[str, Any] | None = None
        out: dict[str, Any] | None = None
        for item in call["inputs"]:
            data = json.loads(content(item["sha256"]))
            if isinstance(data, dict) and "memories" in data:
                recorded_spec = data
        for entry in call["files"]:
            if entry["path"].endswith("out.json") and entry.get("sha256"):
                out = json.loads(content(entry["sha256"]))
        if recorded_spec is None or out is None:
            raise ReplayMismatch(f"{self.name}: the core run's spec or output is not recorded")
        for key in ("memories", "queries", "rounds"):
            if recorded_spec[key] != spec[key]:
                raise ReplayMismatch(f"{self.name}: the core run's {key} differ from the recording")
        store = spec.get("store_kept")
        if store is not None:
            self.t.unify(str(store), recorded_spec["store"], f"{self.name} core run store")
        self._apply(call, skip=lambda p: p.endswith(("out.json", "spec.json")))
        return dict(self.t.value_to_ours(out))

    # -- files ------------------------------------------------------------------------------

    def _apply(self, call: dict[str, Any], skip: Any = None) -> None:
        written: set[Path] = set()
        for entry in call.get("files", []):
            if skip is not None and skip(entry["path"]):
                continue
            if not entry["path"].startswith("{TMP}"):
                continue
            path = Path(self.t.to_ours(entry["path"]))
            mode = int(entry["mode"], 8) if entry.get("mode") else None
            change, kind = entry["change"], entry["type"]
            if change == "deleted":
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()
                elif path.exists() or path.is_symlink():
                    path.unlink()
                continue
            if kind == "dir":
                path.mkdir(parents=True, exist_ok=True)
            elif kind == "file" and change in ("created", "modified"):
                data = content(entry["sha256"])
                if entry.get("embedded_paths"):
                    data = self.t.to_ours(data.decode("utf-8")).encode("utf-8")
                elif entry.get("embedded_path_scopes"):
                    # A store holding its project's path scope: the same length either way, so
                    # the bytes are swapped in place (one scope value per store, so no index
                    # order changes).
                    for recorded, mine in self.t.scopes.items():
                        data = data.replace(recorded.encode(), mine.encode())
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.is_symlink():
                    path.unlink()
                path.write_bytes(data)
                written.add(path)
            if mode is not None and path.exists() and not path.is_symlink():
                path.chmod(mode)
        # A database Nuzo rewrote stands with the journal files it left, and no others: a
        # journal of this run's own writes must not be replayed onto the recorded bytes.
        for path in written:
            if path.suffix == ".sqlite" or _is_sqlite(path):
                for suffix in ("-wal", "-shm", "-journal"):
                    side = path.with_name(path.name + suffix)
                    if side not in written and side.exists():
                        side.unlink()


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _dicts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _dicts(item)


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def folders(base: Path, **named: Path) -> dict[str, str]:
    """Recorded folder placeholders (`{TMP}`, `{TMP}/<name>`) -> this run's folders."""
    mapping = {"{TMP}": str(base)}
    for name, path in named.items():
        mapping["{TMP}/" + name] = str(path)
    return mapping


def recording_for_test(nodeid: str, folders: dict[str, str]) -> Recording:
    calls = corpus().calls_by_test.get(RECORDED_AS.get(nodeid, nodeid))
    if calls is None:
        raise ReplayMismatch(f"no recorded Nuzo calls for {nodeid}")
    return Recording(nodeid, calls, folders)


def recording_for_fixture(name: str, folders: dict[str, str]) -> Recording:
    return Recording(name, corpus().calls_by_fixture[name], folders)


def recorded_test_folder(nodeid: str) -> str | None:
    """The `{TMP}/<name>` folder the test's tmp_path was when it was recorded."""
    counts: dict[str, int] = {}
    for call in corpus().calls_by_test.get(RECORDED_AS.get(nodeid, nodeid), []):
        for match in re.finditer(r"\{TMP\}/([^/\"'\s]+)", json.dumps(call)):
            name = match.group(1)
            if not name.startswith(("nuzo-sample", "nuzo-review")):
                counts[name] = counts.get(name, 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else None


def sqlite_rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()
