"""SEC-2, SEC-5: what the secret detector finds and what it lets pass.

The blocked and allowed examples below are pinned: every blocked one must be found as exactly
its kind, every allowed one and every line of the false-positive corpus
(`tests/data/secrets_corpus/`, whose README gives each file's provenance) must pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aidememo.domain.errors import HTTP_STATUS, ErrorCode
from aidememo.domain.secrets import (
    KIND_NAMES,
    SecretFinding,
    find_in_json,
    find_in_texts,
    first_secret,
    secret_kinds,
)

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "secrets_corpus"

AWS_EXAMPLE = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example
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
    # Beyond the pinned reference set: the kinds added here, and more forms of the others.
    ("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA"),
    ("aws_secret_access_key", f"aws_secret_access_key = {AWS_EXAMPLE}"),
    ("aws_secret_access_key", f"export AWS_SECRET_ACCESS_KEY={AWS_EXAMPLE}"),
    ("aws_secret_access_key", f'{{"aws_secret_access_key": "{AWS_EXAMPLE}"}}'),
    ("slack_token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
    ("slack_token", "token for the bot: xoxp-1234567890-0987654321-abcdef"),
    ("gitlab_token", "glpat-xxxxXXXXxxxxXXXXxxxx"),
    ("generic_api_key", "password=hunter2hunter2hunter2"),
    ("generic_api_key", 'DB_PASSWORD="c0rrectH0rseBatterySt4ple"'),
    ("generic_api_key", "api_key: 0123456789abcdef0123456789abcdef"),
    ("credential_url", "https://deploy:s3cr3t-t0ken@git.example.com/org/repo.git"),
    ("credential_url", "REDIS_URL=rediss://:p4ssw0rdp4ss@cache.internal:6380/0"),
    ("session_cookie", "Cookie: sessionid=k8s2dj3kd9sl2kd8dk3ls9dk2ls8dk3l"),
    # Assigned passwords shorter than generic_api_key's 16 characters (the storage brief's
    # "passwords"): a letter and a digit or symbol, 6 or more characters.
    ("password", "password=hunter2"),
    ("password", "password: Tr0ub4dor&3xyz"),
    ("password", 'db_password = "s3cr3tP4ssw0rd!"'),
    ("password", "pwd: abc123x"),
    ("password", "export PGPASSWORD=pa55word"),
    ("password", '{"passwd": "x9y8z7w6"}'),
    ("password", "passphrase: correct-horse-9"),
]  # fmt: skip

ALLOWED = [
    "Set OPENAI_API_KEY in the environment.",
    "Use Authorization: Bearer <token> in the example.",
    "The password is REDACTED.",
    "postgresql://demo:password@localhost:5432/app",
    "session_id=placeholder",
    "cookie=****************",
    "Rotate the leaked credential instead of storing it.",
    "Fine-grained GitHub tokens use the github_pat_ prefix.",
    "The xoxb- prefix marks Slack bot tokens; glpat- marks GitLab tokens.",
    "session_id=01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "session_id: sess-2024-11-30-refactor",
    "aws_secret_access_key = <from the vault>",
    "-----BEGIN PUBLIC KEY-----",
    "https://api.example.org:8443/v1/projects@latest",
    "redis://:REDACTED@cache:6379",
    "password=letmein",  # letters only: not an obvious password (SEC-2)
    "password=abcdefghijklmno",
    "pwd: /home/user/project",
    "cwd=abc123",
    "password: ********",
    "password=${DB_PASSWORD}",
    "password: $PGPASS1",
    "password=<secret1>",
    "password: see the team vault entry",
    "password_hint: abc123",
    "The password is hunter2 in the old joke.",
    "pwd: ab1",
]


@pytest.mark.parametrize(("kind", "text"), BLOCKED)
def test_sec2_pinned_blocked_examples_are_found_as_their_kind(kind: str, text: str) -> None:
    assert secret_kinds(text) == [kind]
    assert first_secret(f"before\n{text}\nafter") == kind


def test_sec2_every_kind_has_a_blocked_example() -> None:
    assert {kind for kind, _ in BLOCKED} == set(KIND_NAMES)
    assert len(KIND_NAMES) == 14


@pytest.mark.parametrize("text", ALLOWED)
def test_sec5_pinned_allowed_examples_pass(text: str) -> None:
    assert secret_kinds(text) == []


def _corpus() -> list[Path]:
    files = sorted(CORPUS.glob("*.txt"))
    assert len(files) >= 8, files
    return [*files, ROOT / "README.md", ROOT / "SPEC.md"]


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.name)
def test_sec5_the_false_positive_corpus_passes_whole_and_line_by_line(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert secret_kinds(text) == []
    found = [
        (i, kinds) for i, line in enumerate(text.splitlines(), 1) if (kinds := secret_kinds(line))
    ]
    assert found == []


def test_sec5_the_corpus_has_50_lines_of_each_generated_kind() -> None:
    for name in ("hashes.txt", "ids.txt", "urls.txt", "base64.txt", "prose.txt"):
        lines = (CORPUS / name).read_text(encoding="utf-8").splitlines()
        assert len(lines) >= 50, name


def test_sec1_json_pointers_name_the_member_and_never_a_secret_key() -> None:
    token = "ghp_" + "a1" * 18
    value = {"a/b": {"c~d": [1, "ok", token]}}
    assert find_in_json(value, "/payload") == SecretFinding("github_token", "/payload/a~1b/c~0d/2")
    # A secret in a key is reported at the object that holds it.
    assert find_in_json({"x": {token: 1}}, "/payload") == SecretFinding(
        "github_token", "/payload/x"
    )
    # A string member is read with its key: a password member is an assignment.
    found = find_in_json({"password": "Tr0ub4dorTr0ub4dor"}, "/payload")
    assert found == SecretFinding("generic_api_key", "/payload/password")
    assert find_in_json({"password": "REDACTED", "n": 1, "t": None}, "/payload") is None
    # Document order: the first secret wins.
    both = {"first": ["xoxb-1234567890-abcdefghij"], "second": token}
    assert find_in_json(both, "/payload") == SecretFinding("slack_token", "/payload/first/0")


def test_sec1_deep_nesting_is_walked_without_recursion() -> None:
    value: object = "AKIAIOSFODNN7EXAMPLE"
    for _ in range(50_000):
        value = [value]
    found = find_in_json(value, "/payload")  # type: ignore[arg-type]
    assert found is not None and found.kind == "aws_access_key"
    assert found.field == "/payload" + "/0" * 50_000


def test_sec3_the_refusal_names_kind_and_field_but_not_the_value() -> None:
    token = "glpat-" + "Q" * 20
    found = find_in_texts([("/payload/focus", None), ("/payload/done_when", f"use {token}")])
    assert found == SecretFinding("gitlab_token", "/payload/done_when")
    error = found.error()
    assert error.code is ErrorCode.SECRET_REJECTED and HTTP_STATUS[error.code] == 422
    body = str(error.to_json())
    assert "gitlab_token" in body and "/payload/done_when" in body and token not in body
    long = SecretFinding("jwt", "/payload/" + "k" * 1000).error()
    assert len(long.message) < 400


def test_sec1_texts_are_screened_one_by_one_a_secret_spanning_two_is_none() -> None:
    split = [("/payload/a", "Authorization: Bearer"), ("/payload/b", "abcdefghij" * 3)]
    assert first_secret("\n".join(text for _, text in split)) == "bearer_token"
    assert find_in_texts(split) is None
    assert find_in_json({"a": "Authorization: Bearer", "b": "abcdefghij" * 3}, "") is None
    many = [(f"/payload/{i}", f"line {i}") for i in range(1000)] + [
        ("/payload/x", "AKIA" + "B" * 16)
    ]
    assert find_in_texts(many) == SecretFinding("aws_access_key", "/payload/x")
