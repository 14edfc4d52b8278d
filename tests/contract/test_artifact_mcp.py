"""The artifact MCP tools (ART-11) on every backend: at the edge the project object reaches
R2 through its own binding (`durable_objects.mcp_bodies`)."""

from __future__ import annotations

import base64

from tests.contract.support import READER, WRITER, Api
from tests.contract.test_mcp import call, ok

PATH = "sessions/s1/artifacts/notes.md"


def test_art11_artifact_write_read_resolve_and_replay(api: Api) -> None:
    body = base64.b64encode(b"# notes\n").decode()
    args = {"path": PATH, "content_base64": body, "content_type": "text/markdown"}
    first = ok(api, "artifact_write", args)
    again = ok(api, "artifact_write", args)
    assert again == first and first["revision"] == 1
    meta = ok(api, "artifact_resolve", {"path": PATH}, as_=READER)
    assert meta["sha256"] == first["sha256"]
    read = ok(api, "artifact_read", {"path": PATH}, as_=READER)
    assert base64.b64decode(read["content_base64"]) == b"# notes\n"
    second = ok(api, "artifact_write", {**args, "content_base64": "dHdv"})
    assert second["revision"] == 2  # a new body replaces the path (its token looked up)
    old = ok(api, "artifact_read", {"path": PATH, "revision": 1})
    assert base64.b64decode(old["content_base64"]) == b"# notes\n"


def test_art11_readers_cannot_write_and_bad_base64_is_refused(api: Api) -> None:
    out = call(api, "artifact_write", {"path": PATH, "content_base64": "AA=="}, as_=READER)
    assert out["isError"]
    bad = call(api, "artifact_write", {"path": PATH, "content_base64": "not base64!"}, as_=WRITER)
    assert bad["isError"] and bad["structuredContent"]["error"]["code"] == "invalid_command"
