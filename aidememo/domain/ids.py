"""Identifier and name grammar (SPEC.md ID-1, ID-2).

Ids are 1-128 bytes of `[A-Za-z0-9-_.:@]`; operation and kind names are 1-96 bytes of
`[a-z0-9._-]`. Both are ASCII, so byte and character length agree.
"""

from __future__ import annotations

import re

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import ID_MAX_BYTES, NAME_MAX_BYTES

_ID_RE = re.compile(rf"[A-Za-z0-9\-_.:@]{{1,{ID_MAX_BYTES}}}")
_NAME_RE = re.compile(rf"[a-z0-9._\-]{{1,{NAME_MAX_BYTES}}}")


def is_valid_id(value: object) -> bool:
    """True when `value` is a string in the identifier grammar."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def validate_id(value: object, field: str) -> str:
    """Return `value` if it is a valid identifier, else raise `invalid_identifier`."""
    if isinstance(value, str) and _ID_RE.fullmatch(value) is not None:
        return value
    raise fail(
        ErrorCode.INVALID_IDENTIFIER,
        f"{field} must be 1-{ID_MAX_BYTES} bytes of [A-Za-z0-9-_.:@]",
    )


def validate_name(value: object, field: str) -> str:
    """Return `value` if it is a valid operation or kind name, else raise `invalid_command`."""
    if isinstance(value, str) and _NAME_RE.fullmatch(value) is not None:
        return value
    raise fail(
        ErrorCode.INVALID_COMMAND, f"{field} must be 1-{NAME_MAX_BYTES} bytes of [a-z0-9._-]"
    )
