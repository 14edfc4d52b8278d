"""Runs inside Pyodide: what workerd does in Python around a Python Worker's entrypoints.

workerd calls every method of a Python `WorkerEntrypoint` or `DurableObject` (RPC methods and
`fetch`) through its `introspection.wrapper_func`: each JS argument goes through the SDK's
`python_from_rpc`, the result through `python_to_rpc`; `fetch` is called "relaxed" (extra
positional arguments are dropped when the method does not take them). `alarm` is called relaxed
without conversion. This module mirrors those two functions so edge_runner.mjs calls our classes
exactly as the runtime does; it is loaded by the harness, never by the code under test.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from workers import python_from_rpc, python_to_rpc


def relaxed_call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call `fn` with as many positional arguments as it accepts."""
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return fn(*args)
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return fn(*args[: len(positional)])


async def wrapper_func(relaxed: bool, inst: Any, prop: str, *args: Any) -> Any:
    """workerd's `introspection.wrapper_func`: convert in, call, await, convert out."""
    method = getattr(inst, prop)
    py_args = [python_from_rpc(arg) for arg in args]
    result = relaxed_call(method, *py_args) if relaxed else method(*py_args)
    if inspect.isawaitable(result):
        result = await result
    return python_to_rpc(result)


async def call_relaxed(inst: Any, prop: str, *args: Any) -> Any:
    """How workerd calls the `alarm` handler: relaxed, arguments as they are."""
    result = relaxed_call(getattr(inst, prop), *args)
    if inspect.isawaitable(result):
        result = await result
    return result
