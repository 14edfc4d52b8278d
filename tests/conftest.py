"""Project-wide pytest hooks: opt-in markers.

- `slow` (soak runs) run only with AIDEMEMO_SLOW=1.
- `edge_live` (wrangler dev or a deployed Worker) run only with AIDEMEMO_EDGE_LIVE=1; otherwise
  they are skipped with the reason and make no network call.
"""

from __future__ import annotations

import os

import pytest

_OPT_IN = {
    "slow": ("AIDEMEMO_SLOW", "soak run: set AIDEMEMO_SLOW=1 to run"),
    "edge_live": ("AIDEMEMO_EDGE_LIVE", "live edge test: set AIDEMEMO_EDGE_LIVE=1 to run"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for marker, (variable, reason) in _OPT_IN.items():
        if os.environ.get(variable) == "1":
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)
