"""Reaching a project's live feed (SPEC.md LIVE-1) from the agent commands that follow it,
`watch` and `replica pull --watch`: its WebSocket address, the member's bearer header and the
message of a refused upgrade."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from aidememo.cli.agent.profiles import Profile
from aidememo.cli.token_files import read_token_file


def feed_url(profile: Profile, epoch: str, after_seq: int) -> str:
    """The live feed of the profile's project after `after_seq` (ws:// for an http:// server)."""
    scheme, rest = profile.url.split("://", 1)
    ws = "wss" if scheme == "https" else "ws"
    query = urlencode({"project_epoch": epoch, "after_seq": str(after_seq)})
    return f"{ws}://{rest}/v1/projects/{profile.project_id}/changes/live?{query}"


def bearer_header(profile: Profile) -> dict[str, str]:
    return {"authorization": f"Bearer {read_token_file(profile.token_file)}"}


def refused_upgrade(status: int, body: bytes | bytearray | None) -> str:
    """The server's error of a refused upgrade, or the HTTP status when the body has none."""
    try:
        error = json.loads(body or b"")["error"]
        return f"{error['message']} ({error['code']})"
    except (ValueError, KeyError, TypeError):
        return f"the live feed was refused: HTTP {status}"
