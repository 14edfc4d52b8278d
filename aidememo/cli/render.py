"""What the agent commands print: short human-readable lines by default, JSON with `--json`.

JSON output is the server's answer as the client parsed it (`model_dump(mode="json")`), one
document per line, so scripts read exactly what the contract documents. Human output is plain
text: a sentence for a write, aligned columns for a list, nothing that needs a terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from aidememo.client.records import Record


def write_line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def json_line(document: Any) -> None:
    if isinstance(document, Record):
        document = document.model_dump(mode="json")
    write_line(json.dumps(document, ensure_ascii=False, sort_keys=False))


def emit(ns: argparse.Namespace, document: Any, human: str | Sequence[str]) -> int:
    """Print `document` as JSON under `--json`, else the human text; exit status 0."""
    if ns.json:
        json_line(document)
    else:
        for line in [human] if isinstance(human, str) else human:
            write_line(line)
    return 0


def table(header: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> list[str]:
    """Left-aligned columns under a header; `empty` when there are no rows."""
    if not rows:
        return [empty]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return lines


def clip(text: str | None, width: int = 60) -> str:
    """One line of at most `width` characters."""
    if not text:
        return "-"
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def when(ms: int | None) -> str:
    """A millisecond timestamp as UTC ISO time, or `-`."""
    if ms is None:
        return "-"
    from datetime import UTC, datetime  # only for the commands that print times

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def recovered_note(recovered: bool) -> str:
    return (
        " (recovered: it had already been applied; the same ids were replayed)" if recovered else ""
    )
