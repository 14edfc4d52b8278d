"""Runs inside Pyodide: what workerd does in Python around a Python Worker's entrypoints.

workerd calls every method of a Python `WorkerEntrypoint` or `DurableObject` (RPC methods and
`fetch`) through its `introspection.wrapper_func`: each JS argument goes through the SDK's
`python_from_rpc`, the result through `python_to_rpc`; `fetch` is called "relaxed" (extra
positional arguments are dropped when the method does not take them, by Pyodide's own
`pyodide.code.relaxed_call`, as workerd does). `alarm` is called relaxed without conversion.
This module mirrors those two functions so edge_runner.mjs calls our classes exactly as the
runtime does; it is loaded by the harness, never by the code under test.
"""

from __future__ import annotations

import inspect
from typing import Any

from pyodide.code import relaxed_call
from workers import python_from_rpc, python_to_rpc


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
