"""Bodies straight to and from the object store through grants (SPEC.md GRANT-8): the rules
the artifact calls (`aidememo.client.async_artifacts`) follow.

When a reservation's `transfer` is `{mode: "grant"}` (S3 bodies at the origin, R2 grants at
the edge) `put` asks for an upload grant and PUTs the body to its URL with exactly the grant's
headers (they are signed), and downloads read a download grant's URL when the server issues
them. Those requests go to the store, not the service, and carry no bearer token. A grant is a
bearer capability: it is never logged, and a refusal's message names only the status. A PUT
whose first attempt got no answer is sent again (with the body rewound); a 412 then means the
first one stored the body, and publication (which trusts only the store's own observation,
ART-4) decides.
"""

from __future__ import annotations

from typing import Any

from aidememo.client.errors import AidememoClientError, AidememoUnreachable


def headers(grant: dict[str, Any], size: int | None = None) -> dict[str, str]:
    """The grant's headers, exactly (with the body's length when they leave it out)."""
    found = {str(k).lower(): str(v) for k, v in dict(grant["headers"]).items()}
    if size is not None:
        found.setdefault("content-length", str(size))
    return found


def refused(status: int, what: str) -> AidememoClientError:
    code = "artifact_body_mismatch" if status in (400, 403, 412) else "artifact_store_unavailable"
    if what == "download" and status in (403, 404, 412):
        code = "artifact_not_found"
    return AidememoClientError(code, f"the object store refused the {what} (HTTP {status})", status)


def again(error: AidememoUnreachable, attempts: int) -> int:
    """The attempts left after a PUT that got no answer, or its error when none are."""
    if not error.retryable or attempts <= 0:
        raise error
    return attempts - 1


def stored(status: int, first: bool) -> bool:
    """Whether the PUT's answer says the body is stored; a refusal raised."""
    if status == 412 and not first:
        return True  # the attempt that got no answer stored it; publication verifies
    if status >= 300:
        raise refused(status, "upload")
    return True
