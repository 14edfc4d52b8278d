"""JavaScript-compatible text rules (MEM-3), secret refusal (MEM-4), rendering (MEM-11)."""

from __future__ import annotations

import pytest

from aidememo.agent_memory import AgentMemory, AgentMemoryError, MemoryErrorCode
from aidememo.agent_memory.jstext import js_json, normalize_date, to_precision, utf16_len
from aidememo.agent_memory.policy import secret_findings
from aidememo.agent_memory.render import inline, markdown_block, untrusted_json
from aidememo.agent_memory.schema import capture_key

BLOCKED = [
    ("private_key", "-----BEGIN PRIVATE KEY-----\nfake-private-key-material"),
    ("github_token", "ghp_123456789012345678901234567890123456"),
    ("github_token", "github_pat_11AA22BB33CC44DD55EE66FF77GG88HH99II00JJ"),
    ("npm_token", "npm_1234567890abcdefghijklmnopqrstuvwxyz"),
    ("provider_api_key", "sk-proj-abcdefghijklmnopqrstuvwxyz123456"),
    ("provider_api_key", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz123456"),
    ("provider_api_key", "AIzaSyA12345678901234567890123456789012"),
    ("aws_access_key", "AKIAIOSFODNN7EXAMPLE"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.signaturevalue123"),
    ("bearer_token", "Authorization: Bearer abcdefghijklmnopqrstuvwxyz123456"),
    ("credential_url", "postgresql://demo:supersensitive@localhost:5432/app"),
    ("session_cookie", "session_id=abcdefghijklmnopqrstuvwxyz123456"),
    ("generic_api_key", "api_key=abcdefghijklmnop1234"),
]
ALLOWED = [
    "Set OPENAI_API_KEY in the environment.",
    "Use Authorization: Bearer <token> in the example.",
    "The password is REDACTED.",
    "postgresql://demo:password@localhost:5432/app",
    "session_id=placeholder",
    "cookie=****************",
    "Rotate the leaked credential instead of storing it.",
    "Fine-grained GitHub tokens use the github_pat_ prefix.",
]


@pytest.mark.parametrize(("kind", "text"), BLOCKED)
def test_mem4_the_core_detector_blocks_each_of_nuzos_kinds(
    store: AgentMemory, kind: str, text: str
) -> None:
    assert [f["kind"] for f in secret_findings(text)] == [kind]
    with pytest.raises(AgentMemoryError) as caught:
        store.remember(text, kind="fact")
    assert caught.value.code == MemoryErrorCode.MEMORY_SECRET_DETECTED


@pytest.mark.parametrize("text", ALLOWED)
def test_mem4_safe_documentation_text_is_stored(store: AgentMemory, text: str) -> None:
    assert secret_findings(text) == []
    store.remember(text, kind="note")


def test_mem14_session_values_are_read_up_to_punctuation_unlike_nuzo() -> None:
    assert secret_findings("session_id=abc.def.ghi.jkl.mno.pqr") == []
    assert secret_findings("session=01HZX3K5M7N8P9Q0R1S2T3V4W5") == []
    assert [f["kind"] for f in secret_findings("xoxb-1234567890-abcdefghij")] == ["slack_token"]


def test_mem3_capture_keys_use_javascript_whitespace() -> None:
    assert capture_key("  Run   strict capture validation.  ") == "run strict capture validation."
    assert capture_key("\ufeffA\u3000B\u00a0C\ufeff") == "a b c"
    assert capture_key("A\x1cB\x85C") == "a\x1cb\x85c"


def test_mem3_lengths_count_utf16_units(store: AgentMemory) -> None:
    assert utf16_len("a\U0001f600") == 3
    store.remember("\U0001f600" * 4000, kind="note")
    with pytest.raises(AgentMemoryError) as caught:
        store.remember("\U0001f600" * 4001, kind="note")
    assert caught.value.code == MemoryErrorCode.MEMORY_CONTENT_TOO_LONG


def test_mem3_numbers_dates_and_json_print_as_javascript() -> None:
    assert js_json({"a": 1.0, "b": 0.5, "c": 1e-5, "d": [None, True]}) == (
        '{"a":1,"b":0.5,"c":0.00001,"d":[null,true]}'
    )
    assert [to_precision(v, 4) for v in (1010.5, 12345.0, 0.000123, 1020.0)] == [
        "1011",
        "1.235e+4",
        "0.0001230",
        "1020",
    ]
    assert normalize_date("2026-01-02") == "2026-01-02T00:00:00.000Z"
    assert normalize_date("2026-01-02T03:04:05+02:00") == "2026-01-02T01:04:05.000Z"
    assert normalize_date("next tuesday") is None


def test_mem11_stored_text_is_rendered_inert() -> None:
    assert inline("a\tb\nc\\d\u202e") == "a\\tb\\nc\\\\d\\u202e"
    assert untrusted_json({"t": "x\u2028y\x85"}, None) == '{"t":"x\\u2028y\\u0085"}'
    assert markdown_block("code ```` fence") == "`````text\ncode ```` fence\n`````"


@pytest.mark.parametrize(
    "text",
    ["password=hunter2", "password: Tr0ub4dor&3xyz", 'db_password = "s3cr3tP4ssw0rd!"',
     "pwd: abc123x"],
)  # fmt: skip
def test_mem14_short_assigned_passwords_are_refused_unlike_nuzo(
    store: AgentMemory, text: str
) -> None:
    """The storage brief refuses passwords: an assigned one with a letter and a digit or symbol
    is refused below generic_api_key's 16 characters too (SEC-2 `password`); letters only,
    like Nuzo's 15-character case, are still stored."""
    with pytest.raises(AgentMemoryError) as caught:
        store.remember(text, kind="note")
    assert caught.value.code == MemoryErrorCode.MEMORY_SECRET_DETECTED
    assert caught.value.details["findings"][0]["kind"] == "password"
    store.remember("password=abcdefghijklmno", kind="note")
