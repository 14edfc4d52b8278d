#!/usr/bin/env python3
"""Write `openapi.json` at the repository root from `aidememo.http.openapi`.

Usage: scripts/gen_openapi.py [--check]
  --check  write nothing; exit 1 when the committed file differs from the generated one.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aidememo.http.openapi import document_text  # noqa: E402
from aidememo.http.routes import ROUTES  # noqa: E402

TARGET = ROOT / "openapi.json"


def main(argv: list[str]) -> int:
    text = document_text(ROUTES)
    if "--check" in argv:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print("openapi.json is out of date: run scripts/gen_openapi.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
