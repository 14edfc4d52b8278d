"""`aidememo admin export|import|delete-tenant`: the operations of SPEC.md ARC-*, against a
database (`--database`) or an origin/edge over HTTP (`--url` + `--admin-token-file`).

An export file is created 0600, never over an existing file, and appears only complete: the
lines go to a temporary file in the same directory, their manifest checksum is verified, and
the file is then linked into place (`link` fails if the name was taken meanwhile, where
`rename` would overwrite). An import reads the file and hands it over whole (database) or
streams it as the request body (HTTP); the manifest is verified before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.private_files import NEW_FILE_FLAGS, write_all
from aidememo.domain.limits import MAX_ARCHIVE_BYTES

EXPORT_FILE_MODE = 0o600
WRITE_BATCH_BYTES = 256 * 1024  # lines are joined into writes of about this size


class ManifestCheck:
    """Follows an export's bytes as they are written: the SHA-256 of every line before the
    last one, and the last line, which must be the manifest that carries that SHA-256."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.tail = b""  # at most one complete line, then a partial one
        self.size = 0

    def feed(self, data: bytes) -> None:
        self.size += len(data)
        self.tail += data
        last = self.tail.rfind(b"\n")
        if last < 0:
            return
        before = self.tail.rfind(b"\n", 0, last)
        if before < 0:
            return
        self.hash.update(self.tail[: before + 1])
        self.tail = self.tail[before + 1 :]

    def manifest(self) -> dict[str, Any]:
        """The verified manifest, or `CliError` for a truncated or altered export."""
        if not self.tail.endswith(b"\n") or self.tail.count(b"\n") != 1:
            raise CliError("the export is truncated: it does not end with its manifest line")
        try:
            manifest = json.loads(self.tail)
        except ValueError:
            manifest = None
        if not isinstance(manifest, dict) or manifest.get("type") != "manifest":
            raise CliError("the export is truncated: its last line is not the manifest")
        if manifest.get("lines_sha256") != self.hash.hexdigest():
            raise CliError("the export does not match its manifest checksum")
        return manifest


class ExportFile:
    """A new 0600 export file, written through a temporary sibling and linked into place."""

    def __init__(self, path: str) -> None:
        self.path = path
        if os.path.lexists(path):
            raise CliError(f"{path} already exists; refusing to overwrite an export")
        folder = os.path.dirname(os.path.abspath(path))
        base = os.path.basename(path)
        self.temp = os.path.join(folder, f".{base}.{os.getpid()}.{os.urandom(4).hex()}.part")
        try:
            self.fd = os.open(self.temp, NEW_FILE_FLAGS, EXPORT_FILE_MODE)
        except OSError as exc:
            raise CliError(f"cannot create {path}: {exc.strerror or exc}") from None
        try:
            os.fchmod(self.fd, EXPORT_FILE_MODE)  # whatever the umask did
        except OSError:
            self.abort()
            raise
        self.check = ManifestCheck()

    def write(self, data: bytes) -> None:
        self.check.feed(data)
        try:
            write_all(self.fd, data)
        except OSError as exc:
            raise CliError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def commit(self) -> dict[str, Any]:
        """Verify, sync and publish the file; returns its manifest."""
        manifest = self.check.manifest()
        try:
            os.fsync(self.fd)
            os.close(self.fd)
            self.fd = -1
            os.link(self.temp, self.path)
        except FileExistsError:
            raise CliError(f"{self.path} already exists; refusing to overwrite an export") from None
        except OSError as exc:
            raise CliError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        finally:
            self.abort()
        _sync_folder(os.path.dirname(os.path.abspath(self.path)))
        return manifest

    def abort(self) -> None:
        """Remove the temporary file (the published name, if any, stays)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        try:
            os.unlink(self.temp)
        except FileNotFoundError:
            pass


def _sync_folder(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_export(path: str, produce: Callable[[Callable[[bytes], None]], None]) -> dict[str, Any]:
    """Create `path` from the bytes `produce` hands to its writer; the JSON summary."""
    out = ExportFile(path)
    try:
        produce(out.write)
        manifest = out.commit()
    except BaseException:
        out.abort()
        raise
    return {
        "out": os.path.abspath(path),
        "bytes": out.check.size,
        "counts": manifest.get("counts", {}),
        "lines_sha256": manifest.get("lines_sha256"),
    }


def write_lines(lines: Iterable[bytes]) -> Callable[[Callable[[bytes], None]], None]:
    """A `produce` for `write_export` from an iterable of lines."""

    def produce(write: Callable[[bytes], None]) -> None:
        batch: list[bytes] = []
        size = 0
        for chunk in lines:
            batch.append(chunk)
            size += len(chunk)
            if size >= WRITE_BATCH_BYTES:
                write(b"".join(batch))
                batch, size = [], 0
        if batch:
            write(b"".join(batch))

    return produce


def open_import(path: str, *, limit: int | None = None) -> tuple[BinaryIO, int]:
    """`(binary file, size)` of an export to import; `limit` refuses a larger file."""
    try:
        handle = open(path, "rb")  # the caller closes it
    except FileNotFoundError:
        raise CliError(f"export file {path} does not exist") from None
    except OSError as exc:
        raise CliError(f"cannot read export file {path}: {exc.strerror or exc}") from None
    size = os.fstat(handle.fileno()).st_size
    if limit is not None and size > limit:
        handle.close()
        raise CliError(
            f"{path} is {size} bytes; an import request carries at most {limit} bytes "
            f"({MAX_ARCHIVE_BYTES // (1024 * 1024)} MiB): import it with --database"
        )
    return handle, size


def check_confirm(tenant_id: str, confirm: str) -> None:
    """A tenant deletion names the tenant twice (ARC-4); a mismatch is a usage error."""
    if confirm != tenant_id:
        raise CliError(
            f"--confirm must repeat --tenant-id exactly ({tenant_id}); nothing was deleted",
            EXIT_USAGE,
        )
