"""What aidememo answers for Nuzo's `memory semantic ...` commands (SPEC.md MEM-22).

aidememo has no embedding model and builds no semantic index (recall is FTS5, MEM-6). These
functions answer each command as Nuzo 1.2 answers it on a machine where the pinned model is not
provisioned and no sidecar index exists, and refuse with `SEMANTIC_PROVIDER_MISSING` wherever a
faithful answer would need the model machinery (a model directory or sidecar index present, a
download, an index to build). None of them opens the network or loads a model.
"""

from __future__ import annotations

import os
from typing import Any

from aidememo.memory.errors import MemoryErrorCode as C
from aidememo.memory.errors import MemoryStoreError
from aidememo.memory.privacy import semantic_index_path

MODEL_ID = "onnx-community/all-MiniLM-L6-v2-ONNX"
MODEL_REVISION = "aff7a1dc4e8a1ea593e6ea21e95c22ef0a25966f"
MODEL_DIR = "all-MiniLM-L6-v2-ONNX-aff7a1dc4e8a-q4"
MANIFEST = "nuzo-semantic-model.json"
MODEL_MISSING = "Pinned local semantic model is not provisioned."
INDEX_MISSING = "Semantic index does not exist."


def model_path(path: str | None) -> str:
    """The model directory: `--model-path` made absolute, else Nuzo's default under `~/.nuzo`."""
    if path is None:
        return os.path.join(os.path.expanduser("~"), ".nuzo", "models", MODEL_DIR)
    return os.path.abspath(path)


def unsupported(what: str, details: dict[str, Any] | None = None) -> MemoryStoreError:
    return MemoryStoreError(
        C.SEMANTIC_PROVIDER_MISSING,
        f"aidememo has no semantic provider; {what} needs Nuzo's semantic machinery.",
        details or {},
    )


def _model_missing(path: str) -> bool:
    return not os.path.lexists(os.path.join(path, MANIFEST))


def _require_no_model(path: str, what: str) -> None:
    if not _model_missing(path):
        raise unsupported(what, {"path": path})


def status(active: int, store_path: str, model: str | None) -> dict[str, Any]:
    """Nuzo's `{model, index}` status with `active` memories in the store: both missing (a
    present model or index is refused)."""
    path = model_path(model)
    _require_no_model(path, "inspecting a provisioned model")
    index = semantic_index_path(store_path)
    if os.path.lexists(index):
        raise unsupported("inspecting a semantic index", {"path": index})
    return {
        "model": {"state": "missing", "path": path, "reason": MODEL_MISSING},
        "index": {
            "state": "missing",
            "path": index,
            "providerFingerprint": None,
            "indexedMemories": 0,
            "activeMemories": active,
            "staleMemories": 0,
            "missingMemories": active,
            "reason": INDEX_MISSING,
        },
    }


def provision(model: str | None, *, yes: bool, allow_network: bool) -> None:
    """Always refuses: confirmation, then network opt-in, then aidememo downloads no model."""
    if not yes:
        raise MemoryStoreError(
            C.SEMANTIC_PROVISION_CONFIRMATION_REQUIRED, "Model provisioning requires --yes."
        )
    path = model_path(model)
    _require_no_model(path, "inspecting a provisioned model")
    if not allow_network:
        raise MemoryStoreError(
            C.SEMANTIC_NETWORK_OPT_IN_REQUIRED,
            "Provisioning the pinned semantic model requires explicit network opt-in.",
            {"model": MODEL_ID, "revision": MODEL_REVISION},
        )
    raise unsupported("downloading the pinned model", {"path": path})


def rebuild(active_memories: int, model: str | None) -> None:
    """Always refuses: `SEMANTIC_MODEL_MISSING` when there is something to embed and no model."""
    path = model_path(model)
    _require_no_model(path, "loading a provisioned model")
    if active_memories == 0:
        raise unsupported("writing an empty semantic index")
    raise MemoryStoreError(C.SEMANTIC_MODEL_MISSING, MODEL_MISSING, {"path": path})


def clear(store_path: str, *, yes: bool) -> bool:
    """Delete the derived sidecar and its `-shm`/`-wal` files; whether the sidecar existed."""
    if not yes:
        raise MemoryStoreError(
            C.SEMANTIC_CLEAR_CONFIRMATION_REQUIRED, "Clearing the semantic sidecar requires --yes."
        )
    index = semantic_index_path(store_path)
    existed = os.path.exists(index)
    for path in (index, index + "-shm", index + "-wal"):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    return existed
