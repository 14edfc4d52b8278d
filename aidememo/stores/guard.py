"""The STORE-2 guard every store runs on a transaction callback's result.

Transactions are synchronous (`aidememo.ports`): a coroutine returned by a callback would run
after its transaction ended, outside every guarantee the transaction gives.
"""

from __future__ import annotations

import inspect
from typing import TypeVar

from aidememo.domain.errors import ErrorCode, fail

T = TypeVar("T")


def not_awaitable(result: T) -> T:
    """`result` unchanged; `storage_failure` (after closing a coroutine, so it never warns)
    when it is awaitable. Raised inside the callback's transaction, it rolls that back."""
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise fail(ErrorCode.STORAGE_FAILURE, "a transaction callback must not be async")
    return result
