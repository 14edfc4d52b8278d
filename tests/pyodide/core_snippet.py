"""Runs inside Pyodide (via runner.mjs): import the edge core and run the conformance suite.

Assigns RESULT, a JSON-serialisable dict read by test_pyodide.py. Pyodide 314.0.7 ships a working
`sqlite3`, so this snippet blocks `sqlite3`/`_sqlite3` before importing anything: only the module
named in SQLITE3_ALLOWED may fail for that reason, which proves the rest of the core never needs it.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
import traceback
from types import ModuleType
from typing import Any

CORE = (
    "aidememo.domain",
    "aidememo.service",
    "aidememo.stores",
    "aidememo.http",
    "aidememo.ports",
    "aidememo.conformance",
    "aidememo.mcp",
)
BLOCKED = frozenset({"sqlite3", "_sqlite3"})
SQLITE3_ALLOWED = frozenset({"aidememo.stores.sqlite.sqlite3_executor"})


class _BlockSqlite3:
    """A meta path finder that makes `sqlite3` unimportable."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)


sqlite3_shipped = importlib.util.find_spec("sqlite3") is not None
for loaded in [m for m in sys.modules if m.partition(".")[0] in BLOCKED]:
    del sys.modules[loaded]
sys.meta_path.insert(0, _BlockSqlite3())
try:
    import sqlite3  # noqa: F401

    sqlite3_importable = True
except ImportError:
    sqlite3_importable = False

imported: list[str] = []
needs_sqlite3: list[str] = []
failed: dict[str, str] = {}


def _import(name: str) -> ModuleType | None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name in BLOCKED:
            needs_sqlite3.append(name)
        else:
            failed[name] = traceback.format_exc()
        return None
    except Exception:
        failed[name] = traceback.format_exc()
        return None
    imported.append(name)
    return module


def _walk(name: str) -> None:
    module = _import(name)
    path = getattr(module, "__path__", None)
    if path is None:
        return
    for info in pkgutil.iter_modules(path, name + "."):
        _walk(info.name)


for root in CORE:
    _walk(root)

conformance: list[dict[str, Any]] = []
conformance_error = ""
try:
    from aidememo.conformance import run_all
    from aidememo.stores.in_memory import InMemoryStore

    conformance = run_all(InMemoryStore)
except Exception:
    conformance_error = traceback.format_exc()

# The secret detector (SPEC.md SEC-2) on samples of every kind and on placeholders: the
# CPython side compares these kinds with its own, so both runtimes refuse the same texts.
secret_samples = [
    "-----BEGIN " + "PRIVATE KEY-----",
    "gh" + "p_" + "1234567890" * 4,
    "npm_" + "a1b2c3d4e5" * 3,
    "sk-" + "proj-" + "abcdefghij" * 3,
    "AKIA" + "IOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY=" + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "eyJ" + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.signaturevalue123",
    "Authorization: Bearer " + "abcdefghij" * 3,
    "postgresql://demo:" + "supersensitive@localhost/app",
    "session_id=" + "abcdefghij" * 3,
    "pass" + "word=" + "hunter2" * 3,
    "xo" + "xb-" + "1234567890-abcdefghij",
    "gl" + "pat-" + "Xy7" * 7,
    "postgresql://demo:password@localhost:5432/app",
    "session_id=01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "Fine-grained GitHub tokens use the github_pat_ prefix.",
    "\u8a8d\u8a3c token: " + "\uac12" * 20,
]
secret_results: list[list[Any]] = []
try:
    from aidememo.domain.secrets import secret_kinds

    secret_results = [[text, secret_kinds(text)] for text in secret_samples]
except Exception:
    failed["aidememo.domain.secrets (run)"] = traceback.format_exc()

# The stable command ids (SPEC.md ID-4) of the committed vectors, which the test hands in as
# the module `aidememo_test_vectors`: CPython and Pyodide must derive the same ids.
command_ids: list[str] = []
stable_ids: list[str] = []
command_ids_error = ""
try:
    import json

    import aidememo_test_vectors  # type: ignore[import-not-found]

    from aidememo.domain import command_ids as _derive

    _vectors = json.loads(aidememo_test_vectors.COMMAND_ID_VECTORS)
    command_ids = [getattr(_derive, v["function"])(**v["args"]) for v in _vectors["vectors"]]
    stable_ids = [_derive.stable_id(v["prefix"], *v["parts"]) for v in _vectors["stable_id"]]
except Exception:
    command_ids_error = traceback.format_exc()

# The stdlib SigV4 presigner (SPEC.md GRANT-1) on a fixed table: the test compares with CPython.
presigned: list[str] = []
try:
    from aidememo.bodies.sigv4 import Credentials, S3Location, presign_url, sign_request

    _creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "tok+en")
    _locs = [
        S3Location("https://acct.r2.cloudflarestorage.com", "auto", "aidememo-bodies", style)
        for style in ("path", "virtual")
    ]
    _signed = {"Content-Length": "5", "Content-Type": "text/plain", "If-None-Match": "*"}
    for _loc in _locs:
        for _key in ("gen/ab/Xy_09", "sp ace/é/🙂", "q!'()*;=@&+$,?#"):
            presigned.append(
                presign_url(
                    _creds, _loc, "PUT", _key, now_s=1_796_146_205, expires_s=900, headers=_signed
                )
            )
            presigned.append(
                sign_request(_creds, _loc, "HEAD", _key, now_s=1_796_146_205)[1]["Authorization"]
            )
except Exception:
    failed["aidememo.bodies.sigv4 (run)"] = traceback.format_exc()

RESULT = {
    "presigned": presigned,
    "version_info": list(sys.version_info[:3]),
    "platform": sys.platform,
    "sqlite3_shipped": sqlite3_shipped,
    "sqlite3_importable": sqlite3_importable,
    "imported": imported,
    "needs_sqlite3": needs_sqlite3,
    "failed": failed,
    "conformance": conformance,
    "conformance_error": conformance_error,
    "secrets": secret_results,
    "command_ids": command_ids,
    "stable_ids": stable_ids,
    "command_ids_error": command_ids_error,
}
