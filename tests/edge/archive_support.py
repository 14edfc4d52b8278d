"""What the edge's export/import tests share (test_archive_drill, test_staging,
test_archive_stream): the constants, a deployment with an admin token, and reading exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aidememo.domain.clock import FixedClock
from tests.contract.support import TENANT
from tests.edge.runtime import Runtime

START_MS = 1_700_000_000_000
ADMIN = "archive-admin-token"
NDJSON = "application/x-ndjson"
PAGE_LIMIT = 1024 * 1024  # durable_objects.rpc.PAGE_BYTES
STAGING = "aidememo_staging"  # durable_objects.staging.TABLE


def runtime(folder: Path, clock: FixedClock) -> Runtime:
    """A deployment whose admin token is `ADMIN`."""
    return Runtime(folder, clock, admin_token=ADMIN)


def export_tenant(rt: Runtime, tenant: str = TENANT) -> bytes:
    """The tenant's export with token digests, checked to be a 200 of JSON Lines."""
    path = f"/v1/admin/tenants/{tenant}/export?include_token_digests=true"
    status, headers, body = rt.admin("GET", path)
    assert status == 200, body
    assert headers["content-type"] == NDJSON
    assert isinstance(body, bytes)
    return body


def normal(export: bytes) -> list[dict[str, Any]]:
    """The records without what legitimately differs between two exports of the same data:
    the export time, the project epochs (a new epoch per import), the body store the export's
    catalog names (ART-8: each profile its own) and the manifest."""
    records = [json.loads(line) for line in export.splitlines()]
    assert records[-1]["type"] == "manifest"
    out = []
    for r in records[:-1]:
        r.pop("exported_at_ms", None)
        r.pop("project_epoch", None)
        r.pop("body_store", None)
        out.append(r)
    return out
