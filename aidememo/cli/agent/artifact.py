"""`aidememo artifact put|get|resolve|abort` (SPEC.md ART-2..ART-6, CLI-2): file bodies under
logical paths, as the profile's member through `aidememo.client` (`Client.artifacts`).

`put PATH FILE` streams the file (`-`: stdin, spooled to a temporary file first, since a body
is hashed before it is sent and must be resendable); `get PATH` writes the bytes to stdout, or
to `--out FILE` (created 0600, never overwritten; `--out -` is stdout too).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from typing import IO, Any

from aidememo.cli.agent.connect import agent_command, connected
from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.render import emit

MAX_BODY = 64 << 20
SPOOL_IN_MEMORY = 1 << 20


def _source(name: str) -> IO[bytes]:
    if name != "-":
        try:
            return open(name, "rb")
        except OSError as exc:
            raise CliError(f"cannot read {name}: {exc.strerror or exc}", EXIT_USAGE) from None
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
    seen = 0
    while chunk := sys.stdin.buffer.read(1 << 16):
        seen += len(chunk)
        if seen > MAX_BODY:
            raise CliError(f"the body on stdin is over {MAX_BODY} bytes", EXIT_USAGE)
        spool.write(chunk)
    spool.seek(0)
    return spool


@agent_command
def cmd_artifact_put(ns: argparse.Namespace) -> int:
    with _source(ns.file) as body, connected(ns) as (_, client):
        ref = client.artifacts.put(ns.path, body, content_type=ns.content_type)
    text = (
        f"published {ref['path']} revision {ref['revision']} ({ref['size_bytes']} bytes, "
        f"sha256 {ref['sha256'][:12]}...)"
    )
    return emit(ns, ref, text)


@agent_command
def cmd_artifact_resolve(ns: argparse.Namespace) -> int:
    with connected(ns) as (_, client):
        meta = client.artifacts.resolve(ns.path)
    text = (
        f"{meta['path']} revision {meta['revision']}: {meta['size_bytes']} bytes "
        f"{meta['content_type']} sha256 {meta['sha256']}"
    )
    return emit(ns, meta, text)


@agent_command
def cmd_artifact_get(ns: argparse.Namespace) -> int:
    """Write one revision's bytes; the report (and `--json`) describes the bytes written: the
    size and SHA-256 are measured while writing, so `--revision N` never reports the current
    revision's figures. `--out -` is stdout, like no `--out`."""
    with connected(ns) as (_, client):
        meta = client.artifacts.resolve(ns.path)
        revision = ns.revision or meta["revision"]
        chunks = client.artifacts.download(meta["artifact_id"], revision)
        if ns.out is None or ns.out == "-":
            out = sys.stdout.buffer
            for chunk in chunks:
                out.write(chunk)
            out.flush()
            return 0
        try:
            fd = os.open(ns.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise CliError(f"cannot create {ns.out}: {exc.strerror or exc}", EXIT_USAGE) from None
        digest, size = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
                digest.update(chunk)
                size += len(chunk)
    written = _revision_record(meta, revision, size, digest.hexdigest())
    text = f"wrote {size} bytes of revision {revision} to {ns.out} (sha256 {written['sha256']})"
    return emit(ns, written, text)


def _revision_record(meta: dict[str, Any], revision: int, size: int, sha: str) -> dict[str, Any]:
    """What `get --out` reports: the path, artifact and revision written, with the measured
    size and digest; the current publication's other fields only when that is the revision."""
    if revision == meta["revision"]:
        return {**meta, "size_bytes": size, "sha256": sha}
    keep = ("path", "artifact_id")
    record = {key: meta[key] for key in keep if key in meta}
    return {**record, "revision": revision, "size_bytes": size, "sha256": sha}


@agent_command
def cmd_artifact_abort(ns: argparse.Namespace) -> int:
    with connected(ns) as (_, client):
        done = client.artifacts.abort(ns.reservation_id)
    return emit(ns, done, f"reservation {done['reservation_id']}: {done['state']}")
