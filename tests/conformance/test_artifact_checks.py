"""The artifact catalog's conformance checks (ART-*) on every backend, one test per check."""

from __future__ import annotations

from aidememo.conformance.artifact_checks import run_artifact_check
from tests.conformance.conftest import Backend


def test_art2_reserve_replay_and_exclusive(backend: Backend) -> None:
    run_artifact_check("reserve_replay_and_exclusive", backend.open)


def test_art4_publish_replace_and_replay(backend: Backend) -> None:
    run_artifact_check("publish_replace_and_replay", backend.open)


def test_art4_publish_rehashes_the_stored_body(backend: Backend) -> None:
    run_artifact_check("publish_rehashes_the_stored_body", backend.open)


def test_art3_digest_and_size_mismatch(backend: Backend) -> None:
    run_artifact_check("digest_and_size_mismatch", backend.open)


def test_art5_abort_preserves_previous(backend: Backend) -> None:
    run_artifact_check("abort_preserves_previous", backend.open)


def test_art7_expiry_reaped_before_gc(backend: Backend) -> None:
    run_artifact_check("expiry_reaped_before_gc", backend.open)


def test_art7_expired_reservation_reaped_by_next_reserve(backend: Backend) -> None:
    run_artifact_check("expired_reservation_reaped_by_next_reserve", backend.open)


def test_art7_expiry_during_publication_keeps_the_grace(backend: Backend) -> None:
    run_artifact_check("expiry_during_publication_keeps_the_grace", backend.open)


def test_art7_failing_delete_backs_off(backend: Backend) -> None:
    run_artifact_check("failing_delete_backs_off", backend.open)


def test_art6_tenant_scope_isolation(backend: Backend) -> None:
    run_artifact_check("tenant_scope_isolation", backend.open)


def test_arc4_art7_tenant_deletion_queues_generations(backend: Backend) -> None:
    run_artifact_check("tenant_deletion_queues_generations", backend.open)


def test_art8_identity_binds_once(backend: Backend) -> None:
    run_artifact_check("identity_binds_once", backend.open)


def test_art3_receipts_pruned_after_retention(backend: Backend) -> None:
    run_artifact_check("receipts_pruned_after_retention", backend.open)
