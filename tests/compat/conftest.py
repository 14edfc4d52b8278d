"""Fixtures of the compatibility tier: the recorded Nuzo, isolated homes, sample stores.

The tier runs from the committed recording alone (golden/); without it every test fails, it
never skips. Each test gets the recording of its own Nuzo calls (`recorded`), translated onto its
own tmp_path.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.nuzo_oracle import Cli, Sample, aidememo_cli, make_store, nuzo_cli
from tests.compat.nuzo_replay import (
    Recording,
    folders,
    recorded_test_folder,
    recording_for_fixture,
    recording_for_test,
)


@pytest.fixture
def recorded(
    request: pytest.FixtureRequest, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Recording]:
    """The running test's recorded Nuzo calls; every one of them must be asked for."""
    nodeid = request.node.nodeid
    name = recorded_test_folder(nodeid)
    mapping = folders(tmp_path_factory.getbasetemp())
    if name is not None:
        mapping["{TMP}/" + name] = str(tmp_path)
    recording = recording_for_test(nodeid, mapping)
    yield recording
    if not recording.finished():
        pytest.fail(f"{nodeid}: the test did not ask every recorded Nuzo call")


@pytest.fixture(autouse=True)
def _no_machine_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("NUZO_") or name == "AIDEMEMO_HOME":
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def sample_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Sample]:
    """The sample store, made once per session by the (recorded) Nuzo."""
    root = tmp_path_factory.mktemp("nuzo-sample")
    recording = recording_for_fixture(
        "sample_template", folders(tmp_path_factory.getbasetemp(), **{"nuzo-sample0": root})
    )
    cli = nuzo_cli(recording, root / "home", root / "store" / "memories.sqlite")
    sample = make_store(cli)
    assert recording.finished()
    return cli.store, sample


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def sample(sample_template: tuple[Path, Sample], tmp_path: Path) -> Iterator[tuple[Path, Sample]]:
    """A private copy of the sample store (and its -wal/-shm files, if any)."""
    source, ids = sample_template
    target_dir = tmp_path / "store"
    target_dir.mkdir(mode=0o700)
    for suffix in ("", "-wal", "-shm"):
        src = source.with_name(source.name + suffix)
        if src.exists():
            shutil.copy2(src, target_dir / src.name)
    yield target_dir / source.name, ids


@pytest.fixture
def nuzo(recorded: Recording, home: Path, sample: tuple[Path, Sample]) -> Cli:
    return nuzo_cli(recorded, home, sample[0])


@pytest.fixture
def ours(home: Path, sample: tuple[Path, Sample]) -> Cli:
    return aidememo_cli(home, sample[0])
