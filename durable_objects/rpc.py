"""The RPC envelope between the Worker and the Durable Objects (pure, stdlib + core).

Workers RPC carries structured-clonable values only; the Python SDK converts a `dict` into a
plain JS object and back into a `dict` (a `JsDict`), a `list` into an array, and refuses
`tuple`, `bytearray` and awaitables (the Pyodide tier, `tests/pyodide/`, runs the real SDK's
conversion). So every payload here is built from `dict`, `list`, `str`, `int`, `bool` and
`None`; bodies travel as `str`, never decoded (ID-3: JSON numbers keep 64 bits).

The contract request of a project object (`handle`), the hottest hop, crosses as one text
each way (`request_text`, `response_text`): a string goes through the SDK's `python_to_rpc`
and workerd's structured clone as it is, where a nested dict is walked, checked and converted
key by key on both sides of the hop. Each text is a JSON line of the small parts (method,
route, parameters, caller; status and headers) followed by the body as it is, so a body is
never escaped into a JSON string and parsed out of one again.

An exception thrown by an RPC method reaches the caller without its stack trace and, through
Pyodide, as a `JsException` whose type is lost. Domain errors therefore never cross as
exceptions: methods wrapped in `answer` return `{"ok": value}` or `{"error": {"code",
"message"}}`, and the Worker's `unwrap` raises the same `AidememoError` again. Anything else
that escapes an object is a bug or an outage, which the Worker answers with the retryable 503.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.http.body import EMPTY, Body
from aidememo.http.pipeline import Admission
from aidememo.http.routes import route_named
from aidememo.http.types import Request, Response
from aidememo.service.access import Caller

# Pages between Worker and objects (export and import) hold at most this many bytes of lines,
# or a single line when one line is longer.
PAGE_BYTES = 1024 * 1024


def plain(value: Any) -> Any:
    """An RPC value as plain Python: JS proxies through `to_py()`, mappings to `dict`.

    Under the SDK an object argument arrives as a `JsDict` (a `dict`) or, where the runtime
    does not convert, as a `JsProxy`; both become `dict`/`list`/scalars here.
    """
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    to_py = getattr(value, "to_py", None)
    if callable(to_py):
        return plain(to_py())
    return value


def answer(fn: Callable[[], Any]) -> dict[str, Any]:
    """Run `fn`; its value as `{"ok": ...}`, a domain error as `{"error": ...}`."""
    try:
        return {"ok": fn()}
    except AidememoError as error:
        return {"error": {"code": error.code.value, "message": error.message}}


def unwrap(result: Any) -> Any:
    """The value of an `answer`, or its domain error raised again."""
    result = plain(result)
    if not isinstance(result, dict) or ("ok" not in result and "error" not in result):
        raise fail(ErrorCode.STORAGE_FAILURE, "malformed answer from a durable object")
    if "error" in result:
        error = result["error"]
        raise fail(ErrorCode(error["code"]), str(error["message"]))
    return result["ok"]


def caller_payload(caller: Caller) -> dict[str, str]:
    """The authenticated identity as the Worker hands it to a project object."""
    return {"tenant_id": caller.tenant_id, "actor_id": caller.actor_id}


def _mapping(value: Any) -> Any:
    """A top-level RPC object as something subscriptable, without a deep copy when the SDK
    already gave a `dict` (its `JsDict`)."""
    return value if isinstance(value, dict) else plain(value)


def caller_from(payload: Any) -> Caller:
    """The identity the Worker authenticated (never read from client headers)."""
    data = _mapping(payload)
    return Caller(str(data["tenant_id"]), str(data["actor_id"]))


# Headers that stay at the Worker: credentials were checked there, and the project object
# must never see (or trust) them.
_DROPPED_HEADERS = frozenset({"authorization", "cookie"})


# The identity the Worker authenticated, on the one request it forwards with `stub.fetch`
# (the live feed's WebSocket upgrade, which RPC cannot carry). Only the Worker reaches a
# Durable Object, and it deletes whatever a client sent under these names.
TENANT_HEADER = "x-aidememo-tenant"
ACTOR_HEADER = "x-aidememo-actor"
TOKEN_HEADER = "x-aidememo-token-sha256"
_IDENTITY_PREFIX = "x-aidememo-"


def forwarded_headers(
    headers: dict[str, str], caller: Caller, token_sha256: bytes | None = None
) -> dict[str, str]:
    """The headers of a request forwarded to a project object: the client's, without its
    credentials and without any `x-aidememo-*` header it sent, plus the authenticated
    identity and the digest of the token it authenticated with (never trusted from the
    client; the object closes the feed when that token is revoked, LIVE-5)."""
    out = {
        k: v
        for k, v in headers.items()
        if k not in _DROPPED_HEADERS and not k.startswith(_IDENTITY_PREFIX)
    }
    out[TENANT_HEADER] = caller.tenant_id
    out[ACTOR_HEADER] = caller.actor_id
    if token_sha256 is not None:
        out[TOKEN_HEADER] = token_sha256.hex()
    return out


def forwarded_caller(headers: dict[str, str]) -> Caller:
    """The identity `forwarded_headers` set; `authentication_failed` without it."""
    tenant, actor = headers.get(TENANT_HEADER), headers.get(ACTOR_HEADER)
    if not tenant or not actor:
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "no authenticated identity")
    return Caller(tenant, actor)


def forwarded_token(headers: dict[str, str]) -> bytes | None:
    """The token digest `forwarded_headers` set, or None."""
    raw = headers.get(TOKEN_HEADER)
    try:
        digest = bytes.fromhex(raw) if raw else None
    except ValueError:
        digest = None
    return digest if digest is not None and len(digest) == 32 else None


def request_payload(request: Request, admission: Admission) -> dict[str, Any]:
    """A request the Worker admitted, as an RPC dict: method, path, query, request id, the
    route it resolved (by `Route.name`) with its parameters, so the object neither routes
    nor checks the request again, the content type (the one header the handlers read), and
    the body the Worker read, as text: the object decodes it in full (a JSON body never
    crosses decoded, so its numbers keep 64-bit precision, ID-3); a body that is not UTF-8
    goes as base64 text, for the object's decoder to refuse exactly as the origin does."""
    payload: dict[str, Any] = {
        "method": request.method,
        "path": request.path,
        "query": request.query,
        "request_id": request.request_id,
        "route": admission.route.name,
        "params": admission.params,
    }
    content_type = request.headers.get("content-type")
    if content_type is not None:
        payload["content_type"] = content_type
    wanted = admission.route.forwarded_headers  # the MCP endpoint's (MCP-4, MCP-7); never a
    if wanted:  # credential: the only client headers besides the content type that go on
        payload["headers"] = {k: v for k, v in request.headers.items() if k in wanted}
    body = admission.body if admission.route.body is not None else None
    if body:
        try:
            payload["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            payload["body_base64"] = base64.b64encode(body).decode("ascii")
    return payload


def request_text(request: Request, admission: Admission, caller: Caller) -> str:
    """`request_payload` and the caller for `ProjectCoordinator.handle`: one JSON line of
    everything but the text body, then the body."""
    payload = request_payload(request, admission)
    body = str(payload.pop("body", ""))
    head = {"request": payload, "caller": caller_payload(caller)}
    return json.dumps(head, ensure_ascii=False, separators=(",", ":")) + "\n" + body


def request_and_caller(text: str) -> tuple[Any, Any]:
    """The request payload and the caller payload of a `request_text`."""
    head, _, body = text.partition("\n")
    data = json.loads(head)
    if body:
        data["request"]["body"] = body
    return data["request"], data["caller"]


def request_from(payload: Any, caller: Caller) -> tuple[Request, Admission]:
    """The core `Request` back from `request_payload`, and the Worker's admission of it for
    `caller`, the identity it authenticated."""
    data = _mapping(payload)
    text = data.get("body")
    if text is None and "body_base64" in data:
        body = base64.b64decode(data["body_base64"])
    else:
        body = _text(text or "").encode("utf-8")
    content_type = data.get("content_type")
    headers = {_text(k): _text(v) for k, v in _mapping(data.get("headers") or {}).items()}
    if content_type is not None:
        headers["content-type"] = _text(content_type)
    request = Request(
        _text(data["method"]),
        _text(data["path"]),
        _text(data.get("query", "")),
        headers,
        Body.of(body) if body else EMPTY,
        _text(data.get("request_id", "")),
    )
    params = _mapping(data.get("params") or {})
    if not all(type(k) is str and type(v) is str for k, v in params.items()):
        params = {str(k): str(v) for k, v in params.items()}
    return request, Admission(route_named(_text(data["route"])), params, caller)


def _text(value: Any) -> str:
    return value if type(value) is str else str(value)


def response_payload(response: Response) -> dict[str, Any]:
    """A core `Response` as an RPC dict (bodies are JSON or JSON Lines, so UTF-8 text)."""
    return {
        "status": response.status,
        "headers": [[k, v] for k, v in response.headers],
        "body": response.body.decode("utf-8"),
    }


def response_text(response: Response) -> str:
    """A core `Response` as the answer of a `request_text` call: the status and the headers
    as JSON on one line, then the body (JSON or JSON Lines, so UTF-8 text)."""
    head = json.dumps(
        [response.status, [[k, v] for k, v in response.headers]],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return head + "\n" + response.body.decode("utf-8")


def response_parts(payload: Any) -> tuple[str, int, dict[str, str]]:
    """`(body text, status, headers)` of a `response_payload` or its `response_text`, what
    the Worker hands straight to the runtime's `Response` (text bodies go out as UTF-8
    without a copy through bytes)."""
    if isinstance(payload, str):
        head, _, body = payload.partition("\n")
        status, pairs = json.loads(head)
        return body, int(status), {str(k): str(v) for k, v in pairs}
    data = _mapping(payload)
    raw = data["headers"]
    headers = {_text(k): _text(v) for k, v in (raw if isinstance(raw, list) else plain(raw))}
    return _text(data["body"]), int(data["status"]), headers


def iter_packed(
    lines: Iterable[tuple[str, bytes]], limit: int = PAGE_BYTES
) -> Iterator[tuple[list[list[Any]], bytes]]:
    """Typed lines packed into pages of at most `limit` bytes (or a single longer line),
    yielded one at a time as `(runs, data)`: `data` is the page's lines joined, and each run
    `[type, count, size]` covers `size` bytes of it, `count` consecutive lines of one type.
    The generator keeps nothing of a page once it is yielded."""
    runs: list[list[Any]] = []
    chunk: list[bytes] = []
    size = 0

    def flush() -> tuple[list[list[Any]], bytes]:
        data = b"".join(chunk)
        chunk.clear()
        return runs, data

    for kind, data in lines:
        if chunk and size + len(data) > limit:
            yield flush()
            runs, size = [], 0
        if runs and runs[-1][0] == kind:
            runs[-1][1] += 1
            runs[-1][2] += len(data)
        else:
            runs.append([kind, 1, len(data)])
        chunk.append(data)
        size += len(data)
    if chunk:
        yield flush()


def unpack_page(runs: list[list[Any]], data: bytes) -> list[list[Any]]:
    """A packed page as the runs `[type, count, text]` that travel over RPC."""
    page: list[list[Any]] = []
    at = 0
    for kind, count, size in runs:
        page.append([kind, count, data[at : at + size].decode("utf-8")])
        at += size
    return page


def iter_pages(lines: Iterable[tuple[str, bytes]], limit: int = PAGE_BYTES) -> Iterator[list[Any]]:
    """Typed lines packed into pages of at most `limit` bytes, one at a time.

    A page is a list of runs `[type, count, text]`: `count` consecutive lines of one type,
    concatenated. A receiver can hash and count a run without splitting it.
    """
    for runs, data in iter_packed(lines, limit):
        yield unpack_page(runs, data)


def pack_pages(lines: Iterable[tuple[str, bytes]], limit: int = PAGE_BYTES) -> list[list[Any]]:
    """Every page of `iter_pages`, as a list."""
    return list(iter_pages(lines, limit))
