"""`memory semantic ...` answers as Nuzo's does without a model or an index (MEM-22).

Nuzo ran with no model provisioned and no network opt-in, so it loaded no model and downloaded
nothing. aidememo differs where MEM-22 says so: `provision --yes` records the model its
`semantic` extra installed (Nuzo needs the network to download one), checked in a home of its
own so the other commands still compare with no model; and where Nuzo builds an index from
nothing (an empty store) aidememo refuses until a model is provisioned.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compat.nuzo_oracle import Cli, aidememo_cli, nuzo_cli
from tests.compat.nuzo_replay import Recording

COMMANDS = [
    ("semantic", "status"),
    ("semantic", "status", "--json"),
    ("semantic", "status", "--model-path", "models/mini"),
    ("semantic", "status", "--json", "--model-path", "models/mini"),
    ("semantic", "provision"),
    ("semantic", "provision", "--json"),
    ("semantic", "provision", "--yes"),
    ("semantic", "provision", "--yes", "--json", "--model-path", "models/mini"),
    ("semantic", "rebuild"),
    ("semantic", "rebuild", "--json", "--model-path", "models/mini"),
    ("semantic", "clear"),
    ("semantic", "clear", "--yes"),
    ("recall", "cache", "--mode", "semantic"),
]


# Nuzo refuses these without the network; aidememo provisions its installed model (MEM-22).
PROVISIONS = {
    ("semantic", "provision", "--yes"),
    ("semantic", "provision", "--yes", "--json", "--model-path", "models/mini"),
}


def _provisions(nuzo: Cli, ours: Cli, args: tuple[str, ...], scope: str | None) -> None:
    theirs = nuzo.run(*args, scope=scope, check=False)
    assert (theirs.returncode, theirs.stderr.split(":")[0]) == (
        1,
        "SEMANTIC_NETWORK_OPT_IN_REQUIRED",
    )
    apart = Cli(ours.name, ours.runner, ours.home.with_name(ours.home.name + "-own"), ours.store)
    mine = apart.run(*args, scope=scope)
    if "--json" in args:
        answer = mine.json()  # provisioned: false when the model was recorded already
        assert (answer["files"], answer["downloaded"]) == (2, False), answer
    else:
        done = ("Semantic model provisioned", "Semantic model already ready")
        assert mine.lines()[0] in done, mine.stdout


def _same(nuzo: Cli, ours: Cli, *args: str, scope: str | None = None) -> None:
    if args in PROVISIONS:
        _provisions(nuzo, ours, args, scope)
        return
    theirs = nuzo.run(*args, scope=scope, check=False)
    mine = ours.run(*args, scope=scope, check=False)
    assert (mine.returncode, mine.stdout, mine.stderr) == (
        theirs.returncode,
        theirs.stdout,
        theirs.stderr,
    ), " ".join(args)


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_mem22_semantic_commands_answer_as_nuzo_on_the_sample_store(
    nuzo: Cli, ours: Cli, args: tuple[str, ...]
) -> None:
    _same(nuzo, ours, *args)


def test_mem22_semantic_counts_every_scope_and_skip_archived(
    recorded: Recording, tmp_path: Path
) -> None:
    store = tmp_path / "store" / "memories.sqlite"
    nuzo = nuzo_cli(recorded, tmp_path / "home", store)
    nuzo.run("init")
    for scope in ("project:x", "project:x", "team:core"):
        nuzo.run("remember", f"note in {scope}", "--kind", "note", scope=scope)
    gone = nuzo.run("remember", "old", "--kind", "note", scope="project:y").stdout.split()[-1]
    nuzo.run("forget", gone, "--archive", "--reason", "old")
    nuzo.run("remember", "due", "--kind", "note", "--expires-at", "2020-01-01T00:00:00.000Z")
    ours = aidememo_cli(tmp_path / "home", store)
    for args in COMMANDS:
        _same(nuzo, ours, *args)
        _same(nuzo, ours, *args, scope="project:x")


def test_mem22_semantic_clear_removes_a_sidecar_as_nuzo(
    recorded: Recording, tmp_path: Path
) -> None:
    for name in ("nuzo", "ours"):
        store = tmp_path / name / "store" / "memories.sqlite"
        cli = nuzo_cli(recorded, tmp_path / "home", store)
        cli.run("init")
        if name == "ours":
            cli = aidememo_cli(tmp_path / "home", store)
        sidecar = store.with_name("memories.semantic.sqlite")
        for suffix in ("", "-wal", "-shm"):
            sidecar.with_name(sidecar.name + suffix).write_bytes(b"x")
        first = cli.run("semantic", "clear", "--yes")
        assert first.stdout == "Semantic index cleared\n"
        assert not [p for p in store.parent.iterdir() if p.name.startswith("memories.semantic")]
        assert cli.run("semantic", "clear", "--yes").stdout == "Semantic index already absent\n"


def test_mem22_semantic_rebuild_of_an_empty_store_is_refused_where_nuzo_builds(
    recorded: Recording, tmp_path: Path
) -> None:
    store = tmp_path / "store" / "memories.sqlite"
    nuzo = nuzo_cli(recorded, tmp_path / "home", store)
    nuzo.run("init")
    ours = aidememo_cli(tmp_path / "home", store)
    mine = ours.run("semantic", "rebuild", check=False)
    assert mine.returncode == 1
    assert mine.stderr.startswith("SEMANTIC_MODEL_MISSING: ")
    assert not store.with_name("memories.semantic.sqlite").exists()
    theirs = nuzo.run("semantic", "rebuild")
    assert theirs.stdout.startswith("Semantic index rebuilt\n")
    # Nuzo's sidecar, made with Nuzo's model: aidememo reads it and reports it incompatible.
    status = ours.run("semantic", "status", "--json").json()
    assert status["model"]["state"] == "missing"
    assert (status["index"]["state"], status["index"]["indexedMemories"]) == ("incompatible", 0)
