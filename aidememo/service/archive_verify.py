"""Reading an export as a stream: lines out of byte chunks, each record checked as it passes.

An import body can be 256 MiB (ADM-4) and the edge Worker has 128 MB, so nothing here holds
more than one line: `LineSplitter` cuts chunks of any size into lines, and `ExportReader`
hashes, counts and checks each record the moment the next line arrives (the last line is the
manifest, and which line is last is known only at the end). `ExportReader.finish` then
verifies the manifest (ARC-2). The order rule (ARC-6) is what lets a reader act on records
before the end: the header first, the identity records (`actor`, `project`, `membership`,
`token`) next, then the projects' rows.

The origin reads its import the same way (`archive_stage.StagedImport`), so both fronts refuse
exactly the same files.
"""

from __future__ import annotations

import hashlib
from typing import Any

from aidememo.domain.canonical import decode_json
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id

FORMAT = "aidememo-export"
FORMAT_VERSION = 1
IDENTITY_TYPES = frozenset({"actor", "project", "membership", "token"})
ROW_TYPES = frozenset({"resource", "change", "receipt", "audit"})
BODY_TYPES = frozenset({"artifact_body"})  # after every row (ART-12)
# The longest line accepted: a resource body is at most 1 MiB of JSON, and escaping in the
# change line that carries it can grow it; anything longer is not an export of ours.
MAX_LINE_BYTES = 8 * 1024 * 1024


def check_header(header: dict[str, Any]) -> str:
    """The tenant id of an export's header, if the format and version are known."""
    if header.get("format") != FORMAT or header.get("version") != FORMAT_VERSION:
        raise fail(ErrorCode.INVALID_COMMAND, "not an aidememo export of a known version")
    return validate_id(header.get("tenant_id"), "tenant_id")


class LineSplitter:
    """Whole lines out of byte chunks cut anywhere, with a cap on the body and on each line."""

    def __init__(self, max_total: int, max_line: int = MAX_LINE_BYTES) -> None:
        self.max_total = max_total
        self.max_line = max_line
        self.total = 0
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines this chunk completes (each ends with a newline)."""
        self.total += len(chunk)
        if self.total > self.max_total:
            raise fail(
                ErrorCode.PAYLOAD_TOO_LARGE, f"request body is larger than {self.max_total} bytes"
            )
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._partial:
                self._partial += chunk[start : end + 1]
                lines.append(bytes(self._partial))
                self._partial.clear()
            else:
                lines.append(chunk[start : end + 1])
            start = end + 1
        self._partial += chunk[start:]
        for data in (*lines, self._partial):
            if len(data) > self.max_line:
                raise fail(
                    ErrorCode.INVALID_COMMAND, f"an export line exceeds {self.max_line} bytes"
                )
        return lines

    def finish(self) -> list[bytes]:
        """The last line when the body does not end with a newline."""
        rest = bytes(self._partial)
        self._partial.clear()
        return [rest] if rest.strip() else []


class ExportReader:
    """Checks an export one line at a time; `finish` verifies the manifest (ARC-2, ARC-6).

    `feed(line)` returns the line before it (now known not to be the last one, the manifest)
    as `(record, line)`, the record decoded and checked: an object with a known `type`, the
    header first, no identity record after a project row. It returns `None` for the first
    line.
    """

    def __init__(self) -> None:
        self.tenant_id: str | None = None
        self.counts: dict[str, int] = {}
        self._held: bytes | None = None
        self._total = hashlib.sha256()
        self._rows_started = False
        self._bodies_started = False
        self._line = 0  # lines decoded so far, for the messages

    def feed(self, data: bytes) -> tuple[dict[str, Any], bytes] | None:
        """Accept the next line of the export."""
        previous, self._held = self._held, data
        if previous is None:
            return None
        previous = previous if previous.endswith(b"\n") else previous + b"\n"
        return self._record(previous), previous

    def _record(self, data: bytes) -> dict[str, Any]:
        self._total.update(data)
        self._line += 1
        record = decode_json(data, f"line {self._line}")
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise fail(ErrorCode.INVALID_COMMAND, "every line must be an object with a type")
        kind: str = record["type"]
        if self.tenant_id is None:
            if kind != "header":
                raise fail(ErrorCode.INVALID_COMMAND, "the first line must be the header")
            self.tenant_id = check_header(record)
        elif kind == "header":
            raise fail(ErrorCode.INVALID_COMMAND, "only the first line is a header")
        elif kind in ROW_TYPES:
            if self._bodies_started:
                raise fail(ErrorCode.INVALID_COMMAND, "artifact bodies come after every row")
            self._rows_started = True
        elif kind in BODY_TYPES:
            self._rows_started = self._bodies_started = True
        elif kind not in IDENTITY_TYPES:
            raise fail(ErrorCode.INVALID_COMMAND, f"unknown record type {kind!r}")
        elif self._rows_started:
            raise fail(
                ErrorCode.INVALID_COMMAND,
                "identity records (actor, project, membership, token) come before project rows",
            )
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return record

    def finish(self) -> str:
        """Verify the manifest (the line held last) against everything before it; returns the
        tenant id of the header."""
        if self._held is None or self.tenant_id is None:
            raise fail(ErrorCode.INVALID_COMMAND, "an export has a header and a manifest at least")
        manifest = decode_json(self._held, f"line {self._line + 1} (the manifest)")
        if not isinstance(manifest, dict) or manifest.get("type") != "manifest":
            raise fail(ErrorCode.INVALID_COMMAND, "the last line must be the manifest")
        if self._total.hexdigest() != manifest.get("lines_sha256"):
            raise fail(ErrorCode.INVALID_COMMAND, "the export does not match its manifest checksum")
        if self.counts != manifest.get("counts"):
            raise fail(ErrorCode.INVALID_COMMAND, "the export's counts do not match its manifest")
        return self.tenant_id

    def record_counts(self) -> dict[str, int]:
        """How many records of each type, the header left out (an import's summary)."""
        return {k: v for k, v in self.counts.items() if k != "header"}
