"""The STORE-2 guard every store runs on a transaction callback's result.

Transactions are synchronous (`aidememo.ports`): a coroutine returned by a callback would run
after its transaction ended, outside every guarantee the transaction gives.
"""

from __future__ import annotations

import inspect
from types import GeneratorType
from typing import TypeVar

from aidememo.domain.errors import ErrorCode, fail

T = TypeVar("T")

_PLAIN: set[type] = {type(None), tuple, list, dict, int, str, bytes, bool}
"""Types whose values are never awaitable, learned as results come (`inspect.isawaitable` of
an ordinary object walks the ABC machinery, a share of a small read's cost). Awaitability is
the type's (`__await__`), except for generators, whose code flags decide: never learned."""
_PLAIN_MAX = 256


def not_awaitable(result: T) -> T:
    """`result` unchanged; `storage_failure` (after closing a coroutine, so it never warns)
    when it is awaitable. Raised inside the callback's transaction, it rolls that back."""
    kind = type(result)
    if kind in _PLAIN:
        return result
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise fail(ErrorCode.STORAGE_FAILURE, "a transaction callback must not be async")
    if kind is not GeneratorType and len(_PLAIN) < _PLAIN_MAX and _learnable(kind):
        _PLAIN.add(kind)  # a set add is atomic under the GIL
    return result


def _learnable(kind: type) -> bool:
    """False for Pyodide's proxies of JavaScript objects: what they can do is the JavaScript
    object's, so their Python type may not say it."""
    return not kind.__module__.startswith(("pyodide", "_pyodide"))
