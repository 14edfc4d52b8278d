"""Exports carry the body-store identity of their artifacts, and an import into a catalog
pinned to another body store is refused (SPEC.md ART-8, ARC-2), on every store."""

from __future__ import annotations

import json

import pytest

from aidememo.conformance.artifact_checks import ArtifactFixture
from aidememo.conformance.harness import TENANT, Fixture
from aidememo.domain.clock import RandomIds
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.service.archive import Archive, Manifest, line
from tests.conformance.conftest import Backend


def _with_body_store(lines: list[bytes], identity: str) -> list[bytes]:
    """The same export with another body-store identity in its header, manifest redone."""
    m = Manifest()
    out = []
    for data in lines[:-1]:
        record = json.loads(data)
        if record["type"] == "header":
            record["body_store"] = identity
        out.append(m.add(record["type"], line(record)))
    return [*out, m.line()]


def test_art8_arc2_import_refuses_another_body_store(backend: Backend) -> None:
    fx = Fixture.create(backend.open)
    try:
        fx.store.transaction(lambda tx: tx.bind_body_store_identity("local:v1"))
        ArtifactFixture.create(fx).put("one", b"body")
        archive = Archive(fx.store, fx.clock, RandomIds())
        lines = list(archive.export_lines(TENANT))
        assert json.loads(lines[0])["body_store"] == "local:v1"
        fx.store.transaction(lambda tx: tx.delete_tenant(TENANT))
        with pytest.raises(AidememoError) as refused:
            archive.import_lines(_with_body_store(lines, "r2:v1:elsewhere"))
        assert refused.value.code is ErrorCode.IDENTITY_MISMATCH
        assert not fx.store.read(lambda tx: tx.tenant_exists(TENANT))
        summary = archive.import_lines(lines)  # the same body store: accepted
        assert summary.counts["resource"] == 1
    finally:
        fx.store.close()
