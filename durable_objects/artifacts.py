"""A project object's side of the artifact body routes at the edge (SPEC.md ART-10).

Body bytes never cross the Worker-to-object RPC: the Worker streams them to and from R2 (the
`ARTIFACTS` binding, `worker.artifacts`) and asks the project object, by RPC
`artifact_phase(phase, args, caller)`, for the catalog steps around each transfer. Each phase
is one synchronous call of `aidememo.service.artifacts.Artifacts` on the object's store, so the
catalog's rules are the origin's exactly; the observation the Worker reports (size and SHA-256
of the stored object, read back from R2) is trusted, since only the Worker reaches an object.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aidememo.domain.artifacts import Reservation
from aidememo.domain.errors import ErrorCode, fail
from aidememo.service.access import Caller
from aidememo.service.artifacts import Artifacts


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
    if phase == "download_meta":
        pub = artifacts.download_meta(caller, p, str(args["artifact_id"]), args.get("revision"))
        return asdict(pub)
    raise fail(ErrorCode.INVALID_COMMAND, f"no artifact phase {phase!r}")
