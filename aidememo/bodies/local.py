"""Artifact bodies as local files under one root (`serve --artifact-root`, SPEC.md ART-8).

Layout: `<root>/objects/<first two key characters>/<key>` and `<root>/tmp/`. Keys are the
catalog's random generations (`[A-Za-z0-9_]`, checked here again), never a logical path, so
nothing is ever written outside the root. Directories are 0700 and files 0600; a symlink
anywhere under the root (or the root itself) is refused before any body is written, and every
file is opened with `O_NOFOLLOW`. A body is written to a fresh temporary file, synced, then
linked into place with `link(2)`, which fails when the key exists: a conditional create, so a
stored body never changes.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from aidememo.domain.artifacts import LOCAL_BODY_STORE_IDENTITY
from aidememo.domain.errors import ErrorCode, fail

CHUNK = 64 << 10
_KEY = re.compile(r"[A-Za-z0-9_]{3,96}")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _refuse_link(path: Path) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "the artifact root holds a symlink")


class LocalBodies:
    """`BodyStore` over a directory."""

    identity = LOCAL_BODY_STORE_IDENTITY

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        _refuse_link(self.root)
        self.root.parent.mkdir(parents=True, exist_ok=True)
        for path in (self.root, self.root / "objects", self.root / "tmp"):
            path.mkdir(mode=0o700, exist_ok=True)
            _refuse_link(path)
            os.chmod(path, 0o700)

    def _path(self, key: str) -> Path:
        if _KEY.fullmatch(key) is None:
            raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "not a body key")
        shard = self.root / "objects" / key[-2:]
        _refuse_link(self.root)
        _refuse_link(self.root / "objects")
        _refuse_link(shard)
        return shard / key

    def create(self, key: str, chunks: Iterator[bytes], size: int) -> tuple[int, str]:
        final = self._path(key)
        final.parent.mkdir(mode=0o700, exist_ok=True)
        _refuse_link(final.parent)
        tmp = self.root / "tmp" / f"{key}.{os.urandom(8).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        digest = hashlib.sha256()
        written = 0
        try:
            try:
                for chunk in chunks:
                    written += len(chunk)
                    if written > size:
                        break
                    digest.update(chunk)
                    write_all(fd, chunk)
                os.fsync(fd)
            finally:
                os.close(fd)
            if written != size:
                raise fail(ErrorCode.ARTIFACT_BODY_MISMATCH, f"the body is not {size} bytes long")
            try:
                os.link(tmp, final)
            except FileExistsError:
                return self._observe(final)
            _sync_dir(final.parent)
            return size, digest.hexdigest()
        finally:
            tmp.unlink(missing_ok=True)

    def _observe(self, path: Path) -> tuple[int, str]:
        digest = hashlib.sha256()
        size = 0
        for chunk in self._chunks(path, 0, None):
            size += len(chunk)
            digest.update(chunk)
        return size, digest.hexdigest()

    def head(self, key: str) -> int | None:
        try:
            st = os.lstat(self._path(key))
        except FileNotFoundError:
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def read(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        path = self._path(key)
        if self.head(key) is None:
            raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "no body under this key")
        return self._chunks(path, start, end)

    def _chunks(self, path: Path, start: int, end: int | None) -> Iterator[bytes]:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
        try:
            os.lseek(fd, start, os.SEEK_SET)
            left = None if end is None else max(end - start, 0)
            while left is None or left > 0:
                chunk = os.read(fd, CHUNK if left is None else min(CHUNK, left))
                if not chunk:
                    return
                if left is not None:
                    left -= len(chunk)
                yield chunk
        finally:
            os.close(fd)

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        _sync_dir(path.parent)


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd` (`os.write` may write only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
