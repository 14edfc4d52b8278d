"""Reading an export line by line (SPEC.md ARC-2, ARC-6): `LineSplitter` and `ExportReader`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.service.archive import Manifest, header_record, line, verified_records
from aidememo.service.archive_verify import ExportReader, LineSplitter


def _export(records: list[dict[str, Any]]) -> bytes:
    m = Manifest()
    lines = [m.add("header", line(header_record("t1", None, 1, False)))]
    lines += [m.add(r["type"], line(r)) for r in records]
    return b"".join(lines) + m.line()


IDENTITY = [
    {"type": "actor", "actor_id": "a1", "kind": "agent"},
    {"type": "project", "project_id": "p1", "project_epoch": "e1", "head_seq": 0},
]
ROW = {"type": "audit", "project_id": "p1", "seq": 1, "command_id": "c", "operation": "x",
       "kind": "fact", "id": "f1", "actor_id": "a1", "committed_at_ms": 1}  # fmt: skip


def _read(data: bytes, chunk: int) -> tuple[str, list[dict[str, Any]], dict[str, int]]:
    splitter, reader = LineSplitter(1 << 30), ExportReader()
    out: list[dict[str, Any]] = []
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    for piece in pieces:
        for data_line in splitter.feed(piece):
            if (checked := reader.feed(data_line)) is not None:
                out.append(checked[0])
    for data_line in splitter.finish():
        if (checked := reader.feed(data_line)) is not None:
            out.append(checked[0])
    return reader.finish(), out, reader.record_counts()


@given(st.integers(min_value=1, max_value=400), st.booleans())
def test_arc6_any_chunking_reads_the_same_records(chunk: int, trailing_newline: bool) -> None:
    data = _export([*IDENTITY, ROW])
    if not trailing_newline:
        data = data.rstrip(b"\n")
    tenant, records, counts = _read(data, chunk)
    assert tenant == "t1"
    assert [r["type"] for r in records] == ["header", "actor", "project", "audit"]
    assert counts == {"actor": 1, "project": 1, "audit": 1}
    assert records == verified_records(data.splitlines(keepends=True))


def _refused(data: bytes) -> str:
    with pytest.raises(AidememoError) as refused:
        _read(data, 64)
    assert refused.value.code is ErrorCode.INVALID_COMMAND
    return refused.value.message


def test_arc6_order_and_types_are_checked_as_the_lines_pass() -> None:
    assert "come before project rows" in _refused(_export([IDENTITY[0], ROW, IDENTITY[1]]))
    assert "unknown record type" in _refused(_export([{"type": "secret"}]))
    assert "only the first line" in _refused(_export([{"type": "header"}]))
    data = _export(IDENTITY)
    assert "first line must be the header" in _refused(data.split(b"\n", 1)[1])
    assert "object with a type" in _refused(b"[1]\n" + data)


def test_arc2_the_manifest_is_verified_at_the_end() -> None:
    data = _export([*IDENTITY, ROW])
    lines = data.splitlines(keepends=True)
    assert "checksum" in _refused(data.replace(b'"a1"', b'"a2"', 1))
    counts = json.loads(lines[-1])
    counts["counts"]["audit"] = 2
    assert "counts" in _refused(b"".join(lines[:-1]) + json.dumps(counts).encode())
    assert "last line must be the manifest" in _refused(b"".join(lines[:-1]))
    assert "header and a manifest" in _refused(lines[0])
    assert "header and a manifest" in _refused(b"")


def test_adm4_the_body_and_each_line_are_capped() -> None:
    splitter = LineSplitter(max_total=100, max_line=10)
    assert splitter.feed(b"0123\n56") == [b"0123\n"]
    with pytest.raises(AidememoError) as long_line:
        splitter.feed(b"789abcdef")  # the open line passes 10 bytes before its newline
    assert long_line.value.code is ErrorCode.INVALID_COMMAND
    total = LineSplitter(max_total=8)
    total.feed(b"1234\n")
    with pytest.raises(AidememoError) as too_large:
        total.feed(b"5678\n")
    assert too_large.value.code is ErrorCode.PAYLOAD_TOO_LARGE
