"""Reading a member's token file: the one check every command that sends a token makes.

Kept apart from the admin commands so an agent command imports nothing else of them.
"""

from __future__ import annotations

from aidememo.cli.errors import CliError
from aidememo.cli.options import PROG
from aidememo.domain.limits import BEARER_MAX_BYTES


def read_token_file(path: str) -> str:
    """The token in `path`, surrounding whitespace stripped; refuses a missing or odd file."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(BEARER_MAX_BYTES + 2).strip()
    except FileNotFoundError:
        raise CliError(
            f"token file {path} does not exist (create one: {PROG} token new --out {path})"
        ) from None
    except UnicodeDecodeError:
        raise CliError(f"token file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise CliError(f"cannot read token file {path}: {exc.strerror or exc}") from None
    if not text:
        raise CliError(f"token file {path} is empty")
    if len(text.encode("utf-8")) > BEARER_MAX_BYTES:
        raise CliError(f"token in {path} is longer than {BEARER_MAX_BYTES} bytes")
    if not all("!" <= ch <= "~" for ch in text):
        raise CliError(f"token in {path} must be printable ASCII without spaces")
    return text
