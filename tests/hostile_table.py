"""One table of hostile requests, each with the answer every backend must give.

A row is a method, a path, headers, a body, who sends it and the expected status and error
code, under the SPEC.md rules it checks (`rules`, the group a contract test runs). Runners:
tests/contract/test_hostile_requests.py on every contract backend (one test per group) and
the Pyodide tier's edge driver through the real Workers SDK (`as_wire` serialises the table
for it). Every runner checks after each row that nothing was written (the project's head did
not move) and that the backend answers a normal request.

Names a row cannot know are placeholders the runner fills (`render`): `{P}` is the project's
path prefix, and `{project}`, `{epoch}`, `{receiver}`, `{session}` (a session the runner
created) appear in paths, queries and bodies. Who sends a row: `writer`, `reader` (a reader
of the project), `outsider` (a writer of another project), `admin` (the admin token) or
`None` (no token). Sample secrets are assembled at import time, so this file holds none.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode

# A header value of None removes the header (a body is otherwise sent as application/json).
HeaderItems = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class Hostile:
    rules: str  # the SPEC.md rules, space-separated: the group a contract test runs
    method: str
    path: str
    status: int
    code: str
    body: bytes | None = None
    headers: HeaderItems = ()
    query: str = ""
    actor: str | None = "writer"
    says: tuple[str, ...] = ()  # what the error message contains
    hides: str = ""  # what the answer never holds (a refused secret)

    @property
    def id(self) -> str:
        size = len(self.body) if self.body is not None else 0
        head = (self.body or b"")[:20]
        return f"{self.method} {self.path}?{self.query[:30]} {head!r}/{size} as {self.actor}"

    def render(self, names: Mapping[str, str]) -> tuple[str, str, dict[str, str | None], bytes]:
        """(path, query, headers, body) with the placeholders filled from `names`."""

        def fill(text: str) -> str:
            for key, value in names.items():
                text = text.replace("{" + key + "}", value)
            return text

        prefix = f"/v1/projects/{names['project']}"
        path = fill(self.path.replace("{P}", prefix))
        body = self.body
        if body is not None:
            for key, value in names.items():
                body = body.replace(b"{" + key.encode() + b"}", value.encode())
        headers: dict[str, str | None] = {}
        if body is not None:
            headers["content-type"] = "application/json"
        headers.update(self.headers)
        return path, fill(self.query), headers, body or b""


def as_wire(rows: Iterable[Hostile]) -> list[dict[str, Any]]:
    """The rows as JSON for a runner in another process (bodies in base64)."""
    out = []
    for row in rows:
        wire = asdict(row)
        wire.update(id=row.id, headers=[list(h) for h in row.headers], says=list(row.says))
        wire["body"] = None if row.body is None else base64.b64encode(row.body).decode()
        out.append(wire)
    return out


def _q(mapping: Mapping[str, str]) -> str:
    return urlencode(mapping)


def command(**overrides: object) -> bytes:
    """A raw `resource.put` of a custom.note, with fields replaced or added."""
    body: dict[str, object] = {
        "command_id": "cmd_check",
        "project_id": "{project}",
        "expected_revision": None,
        "operation": "resource.put",
        "resource": {"kind": "custom.note", "id": "note_check"},
        "change": "upsert",
        "payload": {"a": 1},
    }
    body.update(overrides)
    return json.dumps(body).encode()


def raw_command(payload: bytes, command_id: bytes = b'"cmd_hostile"') -> bytes:
    """A raw command whose payload (and command id) are bytes as sent."""
    return (
        b'{"command_id":' + command_id + b',"project_id":"{project}",'
        b'"expected_revision":null,"operation":"resource.put",'
        b'"resource":{"kind":"custom.note","id":"note_hostile"},"change":"upsert",'
        b'"payload":' + payload + b"}"
    )


def fact_body(content: bytes) -> bytes:
    """A fact create whose content is bytes as sent."""
    return (
        b'{"command_id":"cmd_fact_hostile","payload":{"fact_id":"f_hostile",'
        b'"session_id":"{session}","content":' + content + b"}}"
    )


def _j(value: object) -> bytes:
    return json.dumps(value).encode()


P = "{P}"
FEED = "project_epoch={epoch}&after_seq=0"
BAD_TOKEN = "f" * 64
DEEP_ARRAYS = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECTS = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
TWO_MIB = b"x" * (2 * 1024 * 1024)
OVER_1_MIB = b"{" + b" " * (1024 * 1024) + b"}"
TEXT = (("content-type", "text/plain"),)
BAD = "invalid_command"
ROWS: list[Hostile] = []


def add(rules: str, method: str, path: str, status: int, code: str, **kw: Any) -> None:
    ROWS.append(Hostile(rules, method, path, status, code, **kw))


# -- HTTP-1: route 404, method 405, size 413, media type 415, all before authentication --------
for method, path, kw in (
    ("GET", "/v1/nothing", {}),
    ("POST", f"{P}/nothing", {"body": TWO_MIB, "headers": TEXT}),
    ("GET", f"{P}/resources/fact", {}),
    ("GET", "/", {}),
):
    add("HTTP-1", method, path, 404, "route_not_found", actor=None, **kw)
for method, path, body in (
    ("DELETE", f"{P}/sessions", None),
    ("PUT", "/v1/commands", b"x" * 10),
    ("GET", "/v1/commands", None),
    ("POST", "/health", None),
):
    add("HTTP-1", method, path, 405, "method_not_allowed", actor=None, body=body)
add(
    "HTTP-1",
    "POST",
    "/v1/commands",
    413,
    "payload_too_large",
    actor=None,
    body=OVER_1_MIB,
    headers=TEXT,
)
add("HTTP-1", "POST", f"{P}/facts", 413, "payload_too_large", actor=None, body=OVER_1_MIB)
add(
    "HTTP-1",
    "POST",
    "/v1/commands",
    415,
    "unsupported_media_type",
    actor=None,
    body=b"{}",
    headers=TEXT,
)
add(
    "HTTP-1",
    "POST",
    f"{P}/sessions",
    415,
    "unsupported_media_type",
    body=b"{}",
    headers=(("content-type", "application/x-www-form-urlencoded"),),
)
# a body fault comes before authorization: an outsider's malformed write is 400, not 403
add("HTTP-1", "POST", f"{P}/sessions", 400, BAD, actor="outsider", body=_j({"command_id": "c"}))
add(
    "HTTP-1",
    "GET",
    f"{P}/changes",
    400,
    "invalid_change_batch",
    actor="outsider",
    query=FEED + "&limit=0",
)

# -- AUTH-2: a missing, malformed or unknown bearer is 401 before any body or query check ------
for authorization in (
    None, "", "Bearer", "Bearer ", "Basic abc", f"Bearer {BAD_TOKEN}", "Bearer a b", "token",
    "Bearer " + "a" * 4097, "Bearer a\tb",
):  # fmt: skip
    auth = () if authorization is None else (("authorization", authorization),)
    for method, path, query, body in (
        ("POST", "/v1/commands", "", b"{not json"),
        ("GET", f"{P}/changes", "limit=0&bogus=1", None),
        ("GET", f"{P}/resources/%20/%20", "", None),
    ):
        add(
            "AUTH-2",
            method,
            path,
            401,
            "authentication_failed",
            actor=None,
            query=query,
            body=body,
            headers=auth,
        )

# -- CJ-3: malformed JSON is 400 before authorization (a reader on the write route) ----------
for raw in (
    b"", b"{not json", b"[]", b"null", b'"text"', b'{"command_id":"a","command_id":"b"}',
    b'{"a":NaN}', b'{"a":Infinity}', b'{"a":-Infinity}', b'{"a":1e999}', b"[" * 65 + b"]" * 65,
    b'{"a":9223372036854775808}', b'{"a":-9223372036854775809}', b"\xff\xfe{}",
    b'{"a":1} trailing', b"\x00",
):  # fmt: skip
    add("CJ-3", "POST", "/v1/commands", 400, BAD, actor="reader", body=raw)
    add("CJ-3", "POST", f"{P}/facts", 400, BAD, actor="outsider", body=raw)
add(
    "CJ-3",
    "POST",
    "/v1/commands",
    400,
    BAD,
    body=command(command_id="cmd_big", payload={"a": 2**63}),
)

# -- CJ-3, CJ-4: what the one decoder refuses, with the reason in its message ----------------
_DEEPER = "deeper than 64"
for path, body, says in (
    ("/v1/commands", DEEP_ARRAYS, _DEEPER),
    ("/v1/commands", DEEP_OBJECTS, _DEEPER),
    ("/v1/commands", b"[" * 500_000, _DEEPER),
    ("/v1/commands", raw_command(b'{"x":' * 64 + b"1" + b"}" * 64), _DEEPER),
    ("/v1/commands", raw_command(b'{"a":' + b"[" * 63 + b"]" * 63 + b"}"), _DEEPER),
    ("/v1/commands", raw_command(b'{"content":"a\\ud800b"}'), "string at /payload/content"),
    ("/v1/commands", raw_command(b'{"content":"\\udfff"}'), "string at /payload/content"),
    ("/v1/commands", raw_command(b'{"content":"\xed\xa0\x80"}'), "string at /payload/content"),
    ("/v1/commands", raw_command(b'{"k\\ud800":1}'), "object key at /payload"),
    ("/v1/commands", raw_command(b'{"k\xed\xb3\xbf":1}'), "object key at /payload"),
    ("/v1/commands", raw_command(b'{"a":{"b\\udc00":1}}'), "object key at /payload/a"),
    ("/v1/commands", raw_command(b'{"list":["ok","\\ud83d"]}'), "string at /payload/list/1"),
    ("/v1/commands", raw_command(b"{}", b'"cmd_\\ud800"'), "string at /command_id"),
    ("/v1/commands", raw_command(b'{"t":"caf\xe9"}'), "not UTF-8: byte 0xE9 at offset"),
    ("/v1/commands", b"\xef\xbb\xbf" + raw_command(b"{}"), "byte order mark"),
    (f"{P}/facts", DEEP_ARRAYS, _DEEPER),
    (f"{P}/facts", DEEP_OBJECTS, _DEEPER),
    (f"{P}/facts", b'{"a":' * 100_000, _DEEPER),
    (f"{P}/facts", fact_body(b'"redis \\ud800 down"'), "string at /payload/content"),
    (f"{P}/facts", fact_body(b'"redis \xed\xbf\xbf down"'), "string at /payload/content"),
    (f"{P}/facts", fact_body(b'"caf\xc3"'), "not UTF-8: byte 0xC3 at offset"),
    (f"{P}/facts", b'{"command_id":"caf\xe9"}', "not UTF-8: byte 0xE9 at offset 18"),
    (f"{P}/sessions", b'{"command_id":"c","payload":{"session_id":"s","topic":"\\udbff"}}',
     "string at /payload/topic"),
    (f"{P}/handoffs", b'{"command_id":"c","payload":{"handoff_id":"h","session_id":"s",'
     b'"to_actor":"{receiver}","focus":"\\ud800\\u0041"}}', "string at /payload/focus"),
):  # fmt: skip
    add("CJ-3 CJ-4", "POST", path, 400, BAD, body=body, says=(says,))
# The admin routes go through the same decoder.
for body, says in (
    (DEEP_ARRAYS, _DEEPER),
    (b'{"tenant_id":"t\\ud800","project_id":"p","actor_id":"a"}', "string at /tenant_id"),
    (b'{"tenant_id":"t","proj\xed\xa0\x80":1}', "object key at the top level"),
    (b'{"tenant_id":"\xff"}', "not UTF-8: byte 0xFF at offset 14"),
):
    add(
        "CJ-3 CJ-4", "POST", "/v1/admin/bootstrap", 400, BAD, actor="admin", body=body, says=(says,)
    )

# -- CJ-4, HTTP-3: query strings through the same decoder, bounds stated -------------------
for path, query, code, says in (
    (f"{P}/search", "q=%ff", BAD, "query parameter q is not UTF-8: byte 0xFF"),
    (f"{P}/search", "q=ab%C3", BAD, "query parameter q is not UTF-8"),
    (f"{P}/search", "q=%ED%A0%80", BAD, "q holds a lone surrogate U+D800"),
    (f"{P}/search", "q=%ff%fe", BAD, "not UTF-8"),
    (f"{P}/search", "q=x&%ff=1", BAD, "a query parameter name is not UTF-8"),
    (f"{P}/search", "q=x&limit=0", BAD, "limit must be an integer 1-100"),
    (f"{P}/search", "q=x&limit=101", BAD, "limit must be an integer 1-100"),
    (f"{P}/search", "q=x&limit=-1", BAD, "limit must be an integer 1-100"),
    (f"{P}/handoffs", "box=inbox&limit=0", BAD, "must be an integer 1-100"),
    (f"{P}/handoffs", "box=inbox&limit=101", BAD, "must be an integer 1-100"),
    (f"{P}/changes", "limit=0", "invalid_change_batch", "limit must be an integer 1-10000"),
    (f"{P}/changes", "limit=10001", "invalid_change_batch", "must be an integer 1-10000"),
):
    add("CJ-4 HTTP-3", "GET", path, 400, code, actor="reader", query=query, says=(says,))

# -- HTTP-7: a charset other than UTF-8 is 415, with or without a token -------------------
for content_type in (
    "application/json; charset=latin-1",
    "application/json; charset=ISO-8859-1",
    "application/json; charset=utf-16",
    'application/json;charset="windows-1252"',
):
    for actor in (None, "writer"):
        add(
            "HTTP-7",
            "POST",
            "/v1/commands",
            415,
            "unsupported_media_type",
            actor=actor,
            body=raw_command(b'{"t":"caf\xe9"}'),
            headers=(("content-type", content_type),),
            says=("UTF-8",),
        )

# -- CMD-2: identity and unknown fields in a body; a session body's shape ------------------
for extra in ("tenant_id", "actor_id", "extra"):
    for path, body in (
        ("/v1/commands", command(**{extra: "x"})),
        (f"{P}/sessions", _j({"command_id": "c1", "payload": {"session_id": "s1", "topic": "t"},
                              extra: "x"})),
        (f"{P}/sessions", _j({"command_id": "c1", "payload": {"session_id": "s1", "topic": "t",
                                                              extra: "x"}})),
        (f"{P}/handoffs/h1/accept", _j({"command_id": "c2", "expected_revision": 1,
                                        "payload": {"claim_id": "c"}, extra: "x"})),
    ):  # fmt: skip
        add("CMD-2", "POST", path, 400, BAD, actor="reader", body=body)
_SESSION = {"session_id": "s", "topic": "t"}
for payload, code in (
    ({"session_id": "s", "topic": 5}, BAD),
    ({"session_id": "s"}, BAD),
    ({"session_id": "s", "topic": ""}, BAD),
    ({"session_id": "s", "topic": "  "}, BAD),
    ({"session_id": "s", "topic": "a\u0001"}, BAD),
    ({"session_id": "s", "topic": "x" * 513}, BAD),
    ([], BAD),
    (None, BAD),
    ({"session_id": "s/1", "topic": "t"}, "invalid_identifier"),
    ({"session_id": "s" * 129, "topic": "t"}, "invalid_identifier"),
    ({**_SESSION, "source_id": "a b"}, "invalid_identifier"),
):
    shape: dict[str, object] = {"command_id": "c"}
    if payload is not None:
        shape["payload"] = payload
    add("CMD-2", "POST", f"{P}/sessions", 400, code, actor="reader", body=_j(shape))
for command_id in (7, "c d"):
    shape = {"command_id": command_id, "payload": _SESSION}  # an id of the wrong type or shape
    add("CMD-2", "POST", f"{P}/sessions", 400, "invalid_identifier", actor="reader", body=_j(shape))

# -- CMD-1, CMD-4, ID-2: the raw command's shape -----------------------------------------------
for fields in (
    {"operation": "fact.add"}, {"resource": {"kind": "fact", "id": "f1"}}, {"change": "delete"},
    {"payload": None}, {"payload": [1]},
    {"operation": "resource.delete", "change": "delete", "payload": {"a": 1}},
    {"expected_revision": 0}, {"expected_revision": -1}, {"expected_revision": True},
    {"expected_revision": "1"}, {"resource": {"kind": "custom.note"}},
    {"resource": {"kind": "custom.note", "id": "n", "x": 1}},
    {"resource": {"kind": "Custom.Note", "id": "n"}},
):  # fmt: skip
    add(
        "CMD-1 CMD-4 ID-2", "POST", "/v1/commands", 400, BAD, actor="reader", body=command(**fields)
    )
for fields in (
    {"command_id": "bad id"},
    {"project_id": "bad/project"},
    {"resource": {"kind": "custom.note", "id": ""}},
):
    add(
        "CMD-1 CMD-4 ID-2",
        "POST",
        "/v1/commands",
        400,
        "invalid_identifier",
        actor="reader",
        body=command(**fields),
    )

# -- ID-1: a malformed identifier in a path ----------------------------------------------------
_ACCEPT = _j({"command_id": "c2", "expected_revision": 1, "payload": {"claim_id": "c"}})
for method, path, body in (
    ("GET", "/v1/projects/bad%20project/identity", None),
    ("GET", "/v1/projects/a b/identity", None),
    ("GET", f"/v1/projects/{'p' * 129}/snapshot", None),
    ("GET", f"{P}/resources/custom.note/bad!id", None),
    ("GET", f"{P}/handoffs/bad!id", None),
    ("POST", f"{P}/handoffs/bad!id/accept", _ACCEPT),
):
    add("ID-1", method, path, 400, "invalid_identifier", actor="reader", body=body)
add("ID-1", "GET", f"{P}/resources/Custom.Note/n1", 400, BAD)  # a kind is a name

# -- ID-3: text limits in UTF-8 bytes --------------------------------------------------------
for content in ("x" * 65_537, "服" * 21_846, ""):
    payload = {"fact_id": "f_lim", "session_id": "{session}", "content": content}
    add("ID-3", "POST", f"{P}/facts", 400, BAD, body=_j({"command_id": "c_l", "payload": payload}))
_FOCUS = {"handoff_id": "h_focus", "session_id": "{session}", "to_actor": "{receiver}"}
add(
    "ID-3",
    "POST",
    f"{P}/handoffs",
    400,
    BAD,
    body=_j({"command_id": "c_f", "payload": {**_FOCUS, "focus": "가" * 1366}}),
)
add(
    "ID-3",
    "POST",
    f"{P}/sessions",
    400,
    BAD,
    body=_j({"command_id": "c_t", "payload": {"session_id": "s_t", "topic": "가" * 171}}),
)

# -- FEED-5: a change page's limit -----------------------------------------------------------
for limit in ("0", "10001", "-1", "x", "1.5", ""):
    for path in (f"{P}/changes", f"{P}/changes/materialized"):
        add("FEED-5", "GET", path, 400, "invalid_change_batch", query=f"{FEED}&limit={limit}")

# -- HTTP-3: unknown, repeated and missing parameters; booleans; numbers ---------------------
for path, query in (
    (f"{P}/snapshot", "x=1"),
    (f"{P}/identity", "verbose=true"),
    (f"{P}/changes", FEED + "&extra=1"),
    (f"{P}/changes", FEED + "&after_seq=0"),
    (f"{P}/changes", "project_epoch={epoch}"),
    (f"{P}/changes", "after_seq=0"),
    (f"{P}/handoffs", ""),
    (f"{P}/handoffs", "box=sideways"),
    (f"{P}/search", ""),
    (f"{P}/search", "q="),
    (f"{P}/search", "q=" + "x" * 4097),
    (f"{P}/search", "q=a&mode=vector"),  # semantic and hybrid are modes (SEM-1)
    (f"{P}/search", "q=a&mode=LEXICAL"),
    (f"{P}/search", "q=a&limit=x"),
    (f"{P}/handoffs", "box=inbox&limit=x"),
    (f"{P}/handoffs", "box=inbox&before_seq=0"),
    (f"{P}/search", "q=a&at_least_seq=-1"),
    ("/health", "x=1"),
    *(
        (f"{P}/handoffs", f"box=inbox&include_completed={v}")
        for v in ("yes", "1", "True", "FALSE", "")
    ),
):
    add("HTTP-3", "GET", path, 400, BAD, query=query)

# -- MBX-1: actor_id or tenant_id in a query ---------------------------------------------------
for path, query in (
    (f"{P}/handoffs", "box=inbox&actor_id={receiver}"),
    (f"{P}/handoffs", "box=outbox&tenant_id=t"),
    (f"{P}/search", "q=a&actor_id={receiver}"),
):
    add("MBX-1", "GET", path, 400, BAD, query=query)

# -- HTTP-2: odd requests get a pinned 4xx, never a 5xx ----------------------------------------
for method, path, query, body, status, code in (
    ("GET", "//", "", None, 404, "route_not_found"),
    ("GET", f"{P}/resources/custom.note/%ff", "", None, 400, "invalid_identifier"),
    ("GET", f"{P}/search", _q({"q": '"unbalanced AND OR NEAR( * ^'}), None, 200, ""),
    ("GET", f"{P}/search", _q({"q": "\u0000"}), None, 200, ""),
    ("GET", f"{P}/handoffs", "box=inbox&before_seq=99999999999999999999", None, 400, BAD),
    ("GET", f"{P}/changes", "project_epoch={epoch}&after_seq=99999999999999999999", None, 400,
     BAD),
    ("POST", f"{P}/handoffs/h/return", "", b'{"command_id":"c","expected_revision":1}', 400, BAD),
):  # fmt: skip
    add("HTTP-2", method, path, status, code, query=query, body=body)

# -- AUTH-3, AUTH-4: a non-member is 403 on every route, a reader on every write ---------------
_S = {"command_id": "c", "payload": {"session_id": "s", "topic": "t"}}
add("AUTH-3", "POST", f"{P}/sessions", 403, "project_unauthorized", actor="outsider", body=_j(_S))
add("AUTH-3", "POST", "/v1/commands", 403, "project_unauthorized", actor="outsider", body=command())
for path, query in (
    (f"{P}/identity", ""),
    (f"{P}/snapshot", ""),
    (f"{P}/resources/custom.note/n1", ""),
    (f"{P}/changes", FEED),
    (f"{P}/changes/materialized", FEED),
    (f"{P}/handoffs", "box=inbox"),
    (f"{P}/handoffs/h1", ""),
    (f"{P}/search", "q=a"),
    ("/v1/projects/no_such_project/identity", ""),
):
    add("AUTH-3", "GET", path, 403, "project_unauthorized", actor="outsider", query=query)
add("AUTH-3", "GET", "/v1/projects/no_such_project/identity", 403, "project_unauthorized")
_T = {"command_id": "c", "expected_revision": 1, "payload": {"claim_id": "k"}}
for path, write in (
    ("/v1/commands", json.loads(command())),
    (f"{P}/sessions", _S),
    (f"{P}/facts", {"command_id": "c", "payload": {"fact_id": "f", "session_id": "{session}",
                                                   "content": "x"}}),
    (f"{P}/handoff-contexts", {"command_id": "c", "payload": {
        "context_id": "x", "handoff_id": "h", "session_id": "{session}",
        "to_actor": "{receiver}", "content": "c"}}),
    (f"{P}/handoffs", {"command_id": "c", "payload": {
        "handoff_id": "h", "session_id": "{session}", "to_actor": "{receiver}"}}),
    (f"{P}/handoffs/h/accept", _T),
    (f"{P}/handoffs/h/heartbeat", _T),
    (f"{P}/handoffs/h/return", {**_T, "payload": {
        "claim_id": "k", "result_fact_id": "f", "outcome": "failed"}}),
):  # fmt: skip
    add("AUTH-4", "POST", path, 403, "project_unauthorized", actor="reader", body=_j(write))

# -- SEC-1, SEC-3: a secret in any screened field is 422 naming kind and field -----------------
GITHUB = "gh" + "p_" + "Zq9" * 12
AWS_SECRET = "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfi" + "CYEXAMPLEKEY"
SLACK = "xo" + "xb-" + "123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
GITLAB = "gl" + "pat-" + "Xy7" * 7
PASSWORD = "pass" + "word=" + "Tr0ub4dor" * 2
PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow"
_ROUTE = {"to_actor": "{receiver}", "session_id": "{session}"}
for route, payload, kind, pointer, secret in (
    ("sessions", {"session_id": "s_sec", "topic": f"deploy {GITHUB}"},
     "github_token", "/payload/topic", GITHUB),
    ("facts", {"fact_id": "f_sec", "session_id": "{session}", "content": f"key\n{PEM}"},
     "private_key", "/payload/content", PEM),
    ("facts", {"fact_id": "f_aws", "session_id": "{session}", "content": f"x {AWS_SECRET}"},
     "aws_secret_access_key", "/payload/content", AWS_SECRET),
    ("handoff-contexts", {"context_id": "c_sec", "handoff_id": "h_sec", **_ROUTE,
                          "content": f"use {SLACK}"},
     "slack_token", "/payload/content", SLACK),
    ("handoffs", {"handoff_id": "h_sec", **_ROUTE, "focus": f"try {GITLAB}"},
     "gitlab_token", "/payload/focus", GITLAB),
    ("handoffs", {"handoff_id": "h_sec", **_ROUTE, "focus": "rotate keys",
                  "done_when": f"{PASSWORD} works"},
     "generic_api_key", "/payload/done_when", PASSWORD),
):  # fmt: skip
    add(
        "SEC-1 SEC-3",
        "POST",
        f"{P}/{route}",
        422,
        "secret_rejected",
        hides=secret,
        body=_j({"command_id": f"cmd_{kind}", "payload": payload}),
        says=(kind, pointer),
    )
for note, kind, pointer, secret in (
    ({"notes": [{"text": "ok"}, {"text": f"see {GITHUB}"}]},
     "github_token", "/payload/notes/1/text", GITHUB),
    ({"meta": {f"k {SLACK}": 1}}, "slack_token", "/payload/meta", SLACK),
    ({"a/b": {"pass" + "word": "Tr0ub4dor" * 2}},
     "generic_api_key", "/payload/a~1b/password", "Tr0ub4dor" * 2),
):  # fmt: skip
    add(
        "SEC-1 SEC-3",
        "POST",
        "/v1/commands",
        422,
        "secret_rejected",
        hides=secret,
        body=command(command_id="cmd_sec_note", payload=note),
        says=(kind, pointer),
    )
# Membership comes first: a reader's or an outsider's secret is 403, an anonymous one 401.
_LEAK = {
    "command_id": "cmd_r",
    "payload": {"fact_id": "f_r", "session_id": "{session}", "content": f"see {GITHUB}"},
}
for actor in ("reader", "outsider"):
    add(
        "SEC-3",
        "POST",
        f"{P}/facts",
        403,
        "project_unauthorized",
        actor=actor,
        body=_j(_LEAK),
        hides=GITHUB,
    )
    add(
        "SEC-3",
        "POST",
        "/v1/commands",
        403,
        "project_unauthorized",
        actor=actor,
        body=command(payload={"text": GITHUB}),
        hides=GITHUB,
    )
add("SEC-3", "POST", f"{P}/facts", 401, "authentication_failed", actor=None, body=_j(_LEAK))


def groups() -> list[str]:
    """The rule groups of the table, in first-seen order."""
    return list(dict.fromkeys(row.rules for row in ROWS))


def rows(rules: str) -> list[Hostile]:
    """The rows of one group."""
    found = [row for row in ROWS if row.rules == rules]
    assert found, f"no hostile rows under {rules!r}"
    return found
