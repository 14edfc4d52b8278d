"""A test harness: run a command (`aidememo serve`, or `tests.origin.probe_serve`) with the
transport's `DirectCycle` closed, so every request is received through a uvicorn cycle, as one
whose body came after its head is (SPEC.md HTTP-9: the answers are the same).
`python -m tests.origin.cycle_only MODULE ARGS...`; the product has no such switch."""

from __future__ import annotations

import runpy
import sys

from origin.transport import LimitedHttpProtocol


def main() -> None:
    LimitedHttpProtocol._begin_direct = lambda self: False  # type: ignore[method-assign]
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
