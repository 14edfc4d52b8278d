"""A project object's side of the artifact body routes at the edge (SPEC.md ART-10).

Body bytes never cross the Worker-to-object RPC: the Worker streams them to and from R2 (the
`ARTIFACTS` binding, `worker.artifacts`) and asks the project object, by RPC
`artifact_phase(phase, args, caller)`, for the catalog steps around each transfer. Each phase
is one synchronous call of `aidememo.service.artifacts.Artifacts` on the object's store, so the
catalog's rules are the origin's exactly; the observation the Worker reports (size and SHA-256
of the stored object, read back from R2) is trusted, since only the Worker reaches an object.
The object's alarm runs the artifact GC (`gc_pass`), deleting through the same binding, and
is set to the earliest reservation expiry or due intent (`artifact_due`).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from aidememo.bodies import r2_grants
from aidememo.domain.artifacts import GcIntent, Reservation
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.ports import Clock, Store
from aidememo.service.access import Caller
from aidememo.service.artifact_gc import ArtifactGc
from aidememo.service.artifact_grants import download_window, upload_grant
from aidememo.service.artifacts import Artifacts
from durable_objects import r2_s3

log = logging.getLogger("aidememo.edge")

# The credential-free identity of the edge's body store: the Worker's `ARTIFACTS` binding.
R2_IDENTITY = "r2:v1:ARTIFACTS"


def pin_identity(store: Store) -> None:
    """Pin the catalog to the R2 binding on first use; refuse one pinned elsewhere (ART-8)."""
    store.transaction(lambda tx: tx.bind_body_store_identity(R2_IDENTITY))
    bound = store.read(lambda tx: tx.body_store_identity())
    if bound != R2_IDENTITY:
        raise fail(
            ErrorCode.ARTIFACT_STORE_UNAVAILABLE,
            f"this catalog's bodies are in body store {bound!r}, not the edge's R2 binding",
        )


def run_phase(artifacts: Artifacts, phase: str, args: dict[str, Any], caller: Caller) -> Any:
    """One catalog step of a body route; a plain value for the RPC answer."""
    p = str(args["project_id"])
    if phase == "upload_begin":
        length = args.get("length")
        r = artifacts.upload_begin(
            caller, p, str(args["reservation_id"]), None if length is None else int(length)
        )
        return asdict(r)
    if phase == "upload_end":
        r = Reservation(**args["reservation"])
        return artifacts.upload_end(
            caller, r, int(args["size"]), str(args["stored_sha"]), str(args["sent_sha"])
        )
    if phase == "publish_begin":
        begun = artifacts.publish_begin(
            caller, p, str(args["reservation_id"]), args.get("command_id")
        )
        if isinstance(begun, Reservation):
            return {"reservation": asdict(begun)}
        answer, replayed = begun
        return {"answer": answer, "replayed": replayed}
    if phase == "publish_end":
        r = Reservation(**args["reservation"])
        answer, replayed = artifacts.publish_end(
            caller, r, str(args["command_id"]), int(args["size"]), str(args["sha"])
        )
        return {"answer": answer, "replayed": replayed}
    if phase == "body_missing":
        r = Reservation(**args["reservation"])
        raise fail(ErrorCode.ARTIFACT_BODY_MISMATCH, f"no body for {r.reservation_id} yet")
    if phase == "import_body":  # an imported body, queued before it is written (ART-12)
        intent = GcIntent(
            body_key=validate_id(args.get("generation"), "generation"),
            tenant_id="",
            project_id="",
            artifact_id="",
            reason="imported",
            not_before_ms=int(args["not_before_ms"]),
            created_at_ms=int(args["now_ms"]),
        )
        artifacts.store.transaction(lambda tx: tx.put_gc_intent(intent))
        return {"queued": intent.body_key}
    if phase == "upload_grant":  # signing is pure computation: no request leaves here
        return upload_grant(artifacts, caller, p, str(args["reservation_id"]))
    if phase == "download_window":  # a download grant's revision and lifetime (GRANT-4)
        pub, expires_s = download_window(
            artifacts, caller, p, str(args["artifact_id"]), args.get("revision")
        )
        return {
            "publication": asdict(pub),
            "expires_s": expires_s,
            "now_ms": artifacts.clock.now_ms(),
        }
    if phase == "download_meta":
        pub = artifacts.download_meta(caller, p, str(args["artifact_id"]), args.get("revision"))
        return asdict(pub)
    raise fail(ErrorCode.INVALID_COMMAND, f"no artifact phase {phase!r}")


def artifact_due(store: Store | None) -> int | None:
    """When the object's alarm should next run the artifact GC, or None (ART-7)."""
    if store is None:
        return None
    try:
        due: int | None = store.read(lambda tx: tx.artifact_due_ms())
    except AidememoError as error:
        log.warning("reading the artifact GC deadline failed: %s", error.message)
        return None
    return due


async def gc_pass(store: Store | None, env: Any, clock: Clock) -> None:
    """One bounded artifact GC pass from the alarm, deleting through the `ARTIFACTS` binding;
    a failure is logged and the next alarm tries again (the intents keep their backoff)."""
    bucket = getattr(env, "ARTIFACTS", None)
    try:
        grants = r2_grants.from_env(env)
    except AidememoError as error:
        log.warning("artifact GC pass skipped: %s", error.message)
        return
    if store is None or (bucket is None and grants is None):
        return

    async def delete(key: str) -> None:
        if grants is not None:  # the bodies are reached through R2's S3 API (GRANT-5)
            await r2_s3.delete(grants, key)
        elif bucket is not None:
            await bucket.delete(key)

    try:
        report = await ArtifactGc(store, None, clock).run_once_async(delete)
    except AidememoError as error:
        log.warning("artifact GC pass failed: %s", error.message)
        return
    if report.leased or report.expired_reservations:
        log.info("artifact GC: %s", report.to_json())
