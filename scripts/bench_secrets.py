#!/usr/bin/env python3
"""Time the secret detector (SPEC.md SEC-5) on texts of `--size` bytes, one JSON line each.

Texts: prose without any hint of a secret, prose full of hints (`token`, `password`, `key`,
`session`, ...), random printable characters, base64, and inputs built to make a
backtracking pattern rescan its runs (`eyJ-eyJ-...`, `a-a-...token`, `session-session-...`,
`Bearer ////...`). Each is screened `--repeat` times and the best time is reported, with
the process's CPU time (less disturbed by other processes on a shared machine) and the kinds
found (a benchmark, not a test: nothing is asserted).

    scripts/bench_secrets.py [--size 1048576] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import string
import time

from aidememo.domain.secrets import secret_kinds


def texts(size: int) -> dict[str, str]:
    rnd = random.Random(7)
    plain = "the quick brown fox jumps over a lazy dog while agents share memory".split()
    hinted = [*plain, "token", "password", "secret", "api", "key", "session", "cookie"]

    def words(pool: list[str]) -> str:
        out: list[str] = []
        total = 0
        while total < size:
            word = rnd.choice(pool)
            out.append(word)
            total += len(word) + 1
        return " ".join(out)[:size]

    def repeat(unit: str, tail: str = "") -> str:
        return (unit * (size // len(unit) + 1))[: size - len(tail)] + tail

    b64 = string.ascii_letters + string.digits + "+/=-_."
    return {
        "prose_without_hints": words(plain),
        "prose_with_hints": words(hinted),
        "random_printable": "".join(rnd.choice(string.printable) for _ in range(size)),
        "base64_run": "".join(rnd.choice(b64) for _ in range(size)),
        "eyJ_chain": repeat("eyJ-"),
        "dash_chain_then_token": repeat("a-", "token"),
        "session_chain": repeat("session-"),
        "bearer_slashes": repeat("Bearer " + "/" * 100 + " "),
        "assignments": repeat("token= password: api_key=' "),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1024 * 1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for name, text in texts(args.size).items():
        best = cpu = float("inf")
        found: list[str] = []
        for _ in range(args.repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            found = secret_kinds(text)
            best = min(best, time.perf_counter() - start)
            cpu = min(cpu, time.process_time() - start_cpu)
        line = {"text": name, "bytes": len(text.encode()), "ms": round(best * 1000, 1),
                "cpu_ms": round(cpu * 1000, 1)}  # fmt: skip
        print(json.dumps({**line, "kinds": found}), flush=True)


if __name__ == "__main__":
    main()
