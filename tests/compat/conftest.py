"""Fixtures of the compatibility tier: the reference Nuzo build, isolated homes, sample stores.

Without a Nuzo build (scripts/build_nuzo, run by scripts/test) these tests skip, except under
`CI=true`, where they fail: CI must never pass without the tier.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.nuzo_oracle import (
    Cli,
    NuzoBuild,
    Sample,
    aidememo_cli,
    close_batches,
    find_build,
    make_store,
    nuzo_cli,
)


@pytest.fixture(scope="session")
def nuzo_build() -> Iterator[NuzoBuild]:
    build = find_build()
    if build is None:
        reason = "no Nuzo build (scripts/build_nuzo; needs the Nuzo source tarball)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + "; CI must not skip the compatibility tier")
        pytest.skip(reason)
    yield build
    close_batches()


@pytest.fixture(autouse=True)
def _no_machine_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("NUZO_") or name == "AIDEMEMO_HOME":
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def sample_template(
    nuzo_build: NuzoBuild, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Sample]:
    """The sample store, made once per session by the real Nuzo."""
    root = tmp_path_factory.mktemp("nuzo-sample")
    cli = nuzo_cli(nuzo_build, root / "home", root / "store" / "memories.sqlite")
    sample = make_store(cli)
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
def nuzo(nuzo_build: NuzoBuild, home: Path, sample: tuple[Path, Sample]) -> Cli:
    return nuzo_cli(nuzo_build, home, sample[0])


@pytest.fixture
def ours(home: Path, sample: tuple[Path, Sample]) -> Cli:
    return aidememo_cli(home, sample[0])
