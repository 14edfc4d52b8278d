"""The one exception the command line reports as a single stderr line and an exit status."""

from __future__ import annotations

EXIT_FAILED = 1  # the operation was refused or failed; nothing changed
EXIT_USAGE = 2  # bad flags, a setting this build cannot serve, a missing extra
EXIT_UNREACHABLE = 3  # an agent command got no answer from the server (SPEC.md CLI-2)


class CliError(Exception):
    """An expected failure: printed as one line to stderr, never as a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
