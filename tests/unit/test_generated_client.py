"""`Client` is generated from `AsyncClient` (scripts/gen_sync_client.py): the synchronous files
in the repository are exactly what the generator writes from the asynchronous sources, so the
two clients cannot drift apart (SPEC.md CLIENT-1..CLIENT-4 hold for both by construction)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> object:
    spec = importlib.util.spec_from_file_location(
        "gen_sync_client", ROOT / "scripts" / "gen_sync_client.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_client1_the_synchronous_client_is_generated_from_the_asynchronous_one() -> None:
    gen = _generator()
    client = ROOT / "aidememo" / "client"
    for source, (target, docstring) in gen.FILES.items():  # type: ignore[attr-defined]
        expected = gen.render((client / source).read_text(), docstring)  # type: ignore[attr-defined]
        assert (client / target).read_text() == expected, (
            f"aidememo/client/{target} is not current: run scripts/gen_sync_client.py"
        )
