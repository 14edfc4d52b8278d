"""Secret detection: obvious credentials are refused on write (SPEC.md SEC-*).

`KINDS` is the one list of what counts as a secret. Each kind is a precompiled pattern plus
the lower-case hints one of which every match contains: a text is lower-cased once and a
pattern runs only when one of its hints is in it, so a text without any hint costs one
`str.lower` and a few substring searches. Every pattern runs in time linear in the text: a
token may only start where the character before it could not belong to it (a lookbehind
after the token's first character), so no run of token characters is scanned again from
each of its positions.

This is a safety guard for obvious values, not a data-loss-prevention system: names of
secrets, placeholders (`REDACTED`, `placeholder`, `example`, `changeme`, `****`) and prose
about passwords or tokens pass (SEC-5).

Stdlib only: it runs at the edge (Pyodide) as at the origin.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from aidememo.domain.canonical import JsonValue
from aidememo.domain.errors import AidememoError, ErrorCode, fail

_FLAGS = re.ASCII
# Values that say a secret is elided, not given (followed by a non-word character or the end).
_PLACEHOLDER = r"(?i:redacted|placeholder|example|changeme|\*+)(?![A-Za-z0-9_])"
# The URL schemes whose user part may carry a password (`credential_url`).
_SCHEMES = ("postgres", "postgresql", "mysql", "mariadb", "mongodb", "mongodb+srv", "redis",
            "rediss", "amqp", "amqps", "http", "https", "ftp")  # fmt: skip
# A name may end in `"` or `'` (JSON, YAML) before its `:` or `=`.
_ASSIGN = r"""['"]?\s*[:=]\s*['"]?"""
# A character of an assigned password: anything but space, quotes, slashes, brackets, `,`, `;`.
_PW_CHAR = r"""[^\s'"`/\\<>{}()\[\],;]"""


@dataclass(frozen=True, slots=True)
class SecretKind:
    """One kind of secret: its name, the hints any match contains, its pattern."""

    name: str
    hints: tuple[str, ...]
    pattern: re.Pattern[str]


def _kind(name: str, hints: tuple[str, ...], pattern: str) -> SecretKind:
    return SecretKind(name, hints, re.compile(pattern, _FLAGS))


# Every pattern starts with one character or a class of first characters, and the word
# boundary before a token is a lookbehind after that first character: `re` then finds the
# candidates with its fast first-character search instead of trying the pattern at every
# position (a leading `\b`, lookbehind or global IGNORECASE would disable that). Names that
# any case may spell are `(?i:...)` groups after the first character.
KINDS: tuple[SecretKind, ...] = (
    _kind(
        "private_key",
        ("-----begin ",),
        r"-----BEGIN (?:(?:RSA |EC |OPENSSH |DSA |ENCRYPTED )?PRIVATE KEY|PGP PRIVATE KEY BLOCK)"
        r"-----",
    ),
    _kind(
        "github_token",
        ("github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        r"g(?<![A-Za-z0-9_]g)(?:ithub_pat_|h[pousr]_)[A-Za-z0-9_]{20,}+\b",
    ),
    _kind("npm_token", ("npm_",), r"n(?<![A-Za-z0-9_]n)pm_[A-Za-z0-9]{20,}+\b"),
    _kind(
        "provider_api_key",
        ("sk-", "sk_live_", "aiza"),
        r"[sA](?<![A-Za-z0-9_-][sA])"
        r"(?:(?<=s)k-[A-Za-z0-9_-]{20,}|(?<=s)k_live_[A-Za-z0-9]{20,}+|(?<=A)Iza[A-Za-z0-9_-]{30,})"
        r"\b",
    ),
    _kind("aws_access_key", ("akia", "asia"), r"A(?<![A-Za-z0-9_]A)[KS]IA[A-Z0-9]{16}\b"),
    _kind(
        "aws_secret_access_key",
        ("access",),
        rf"[aAsS](?<![A-Za-z0-9][aAsS])(?i:(?<=a)ws_?s|(?<=s))(?i:ecret_?access_?key){_ASSIGN}"
        r"[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])",
    ),
    _kind(
        "jwt",
        ("eyj",),
        r"e(?<![A-Za-z0-9_-]e)yJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}\b",
    ),
    _kind(
        "bearer_token",
        ("bearer",),
        r"[bB](?<![A-Za-z0-9_][bB])(?i:earer)\s++"
        r"(?!(?i:redacted|placeholder|example)\b)[A-Za-z0-9._~+/-]{20,}=*\b",
    ),
    _kind(
        "credential_url",
        ("://",),
        # Starts at the `://` (a literal, found fast); the scheme is a lookbehind per scheme.
        "://(?:"
        + "|".join(f"(?<=(?<![A-Za-z0-9_])(?i:{re.escape(scheme)})://)" for scheme in _SCHEMES)
        + r")[^:\s/@]*+:(?!(?i:redacted|password|placeholder|changeme|\*+)@)[^@\s/]{4,}+@",
    ),
    _kind(
        "session_cookie",
        ("cookie", "sess"),
        rf"[cCsS](?i:(?<=c)ookie|(?<=s)ess(?:ion)?(?:_?id)?){_ASSIGN}(?!{_PLACEHOLDER})"
        # A ULID is an identifier (of an aidememo session, say), not a cookie.
        r"(?!(?i:[0-7][0-9A-HJKMNP-TV-Z]{25})(?![A-Za-z0-9]))"
        r"[A-Za-z0-9%+/=]{16}",
    ),
    _kind(
        "generic_api_key",
        ("key", "token", "secret", "password"),
        r"[aAtTsSpP](?i:(?<=a)pi[_-]?key|(?<=t)oken|(?<=s)ecret|(?<=p)assword)"
        rf"{_ASSIGN}(?!{_PLACEHOLDER})[A-Za-z0-9._~+/=-]{{16}}",
    ),
    _kind(
        "password",
        ("pass", "pwd"),
        # A name ending in `password`, `passwd` or `passphrase`, or the word `pwd` (alone or
        # after `_`/`-`), assigned a value `generic_api_key` does not already find: 6 or more
        # characters up to a space, quote, slash, bracket, comma or semicolon, holding a letter
        # and a digit or symbol, not a placeholder and not starting like a path or a variable.
        r"[pP](?:(?i:ass(?:word|wd|phrase))|(?<![A-Za-z0-9].)(?i:wd))"
        rf"{_ASSIGN}(?!{_PLACEHOLDER})(?![A-Za-z0-9._~+/=-]{{16}})(?![$%.~-])"
        rf"(?={_PW_CHAR}*?[0-9!@#%^&*+?])(?={_PW_CHAR}*?[A-Za-z]){_PW_CHAR}{{6,}}+",
    ),
    _kind("slack_token", ("xox",), r"x(?<![A-Za-z0-9_-]x)ox[abposr]-[A-Za-z0-9-]{10,}"),
    _kind("gitlab_token", ("glpat-",), r"g(?<![A-Za-z0-9_-]g)lpat-[A-Za-z0-9_-]{20,}"),
)

KIND_NAMES: tuple[str, ...] = tuple(kind.name for kind in KINDS)
_HINTS: tuple[tuple[str, int], ...] = tuple(
    (hint, index) for index, kind in enumerate(KINDS) for hint in kind.hints
)
"""Every kind's hints with the kind's place in `KINDS`, flat: one loop screens a text."""


def _hinted(text: str) -> list[SecretKind]:
    """The kinds, in `KINDS` order, one of whose hints `text` holds: the only ones whose
    pattern can match."""
    lowered = text.lower()
    return [KINDS[index] for index in sorted({index for hint, index in _HINTS if hint in lowered})]


def secret_kinds(text: str) -> list[str]:
    """Every kind of secret found in `text`, in `KINDS` order; empty when none."""
    return [kind.name for kind in _hinted(text) if kind.pattern.search(text)]


def first_secret(text: str) -> str | None:
    """The first kind of secret (in `KINDS` order) found in `text`, or None."""
    return next((kind.name for kind in _hinted(text) if kind.pattern.search(text)), None)


_MAX_POINTER_CHARS = 200


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """A secret of `kind` in the field at JSON Pointer `field` (RFC 6901)."""

    kind: str
    field: str

    def error(self) -> AidememoError:
        """The refusal (SEC-3): names the kind and the field, never the value."""
        where = self.field
        if len(where) > _MAX_POINTER_CHARS:
            where = where[:_MAX_POINTER_CHARS] + "..."
        return fail(
            ErrorCode.SECRET_REJECTED,
            f"{where} holds what looks like a secret ({self.kind}); secrets are not stored: "
            "keep the secret in a secret manager and write where it lives instead",
        )


def pointer_token(key: str) -> str:
    """One reference token of a JSON Pointer (`~` as `~0`, `/` as `~1`)."""
    return key.replace("~", "~0").replace("/", "~1")


def find_in_texts(fields: Iterable[tuple[str, str | None]]) -> SecretFinding | None:
    """The first secret in `(pointer, text)` pairs (a None text is skipped), or None.

    The texts are screened joined by newlines first: a newline stands where each text starts
    and ends exactly as the text's own start and end do for every pattern, so a secret in one
    text is a secret in the join, and a join without one (the usual case) costs one scan
    however many texts there are. Only a join with a hit is screened text by text; a hit
    that only spans two texts finds nothing there.
    """
    present = [(pointer, text) for pointer, text in fields if text is not None]
    if len(present) > 1 and first_secret("\n".join(text for _, text in present)) is None:
        return None
    for pointer, text in present:
        kind = first_secret(text)
        if kind is not None:
            return SecretFinding(kind, pointer)
    return None


def json_texts(value: JsonValue, pointer: str) -> list[tuple[str, str]]:
    """Every key and string of a JSON value as `(pointer, text)`: values in document order,
    the keys of an object (at the object's pointer, so a pointer never carries a screened
    key) before its members, and a string member as `key=value` (SEC-1). Iterative, so no
    nesting depth can exhaust the stack."""
    out: list[tuple[str, str]] = []
    stack: list[tuple[str, JsonValue, str | None]] = [(pointer, value, None)]
    while stack:
        where, item, key = stack.pop()
        if isinstance(item, str):
            out.append((where, item if key is None else f"{key}={item}"))
        elif isinstance(item, list):
            stack.extend((f"{where}/{i}", v, None) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, dict):
            out.extend((where, name) for name in item)
            stack.extend(
                (f"{where}/{pointer_token(name)}", member, name)
                for name, member in reversed(list(item.items()))
            )
    return out


def find_in_json(value: JsonValue, pointer: str) -> SecretFinding | None:
    """The first secret among a JSON value's keys and strings (`json_texts`), or None: every
    key and every string is screened, and a string member also with its key in front, so
    `{"password": "..."}` is read as the assignment it is."""
    return find_in_texts(json_texts(value, pointer))
