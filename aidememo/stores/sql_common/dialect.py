"""A SQL dialect: the shared statements in its placeholder style, and its value conversions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aidememo.stores.sql_common.statements import SharedSql


class Dialect(SharedSql):
    """The shared statements rendered with `placeholder`, plus what the rows need to bind
    and read values the way this dialect's driver does:

    - `flag(value)`: a boolean as a parameter (PostgreSQL `boolean`, SQLite 0 or 1);
    - `blob(value)`: a BLOB or BYTEA column's value as `bytes` (None stays None);
    - `no_limit`: the LIMIT parameter that means no limit (SQLite -1, PostgreSQL NULL).
    """

    def __init__(
        self,
        name: str,
        placeholder: str,
        *,
        flag: Callable[[bool], bool | int],
        blob: Callable[[Any], bytes | None],
        no_limit: int | None,
    ) -> None:
        super().__init__(placeholder)
        self.name = name
        self.flag = flag
        self.blob = blob
        self.no_limit = no_limit
