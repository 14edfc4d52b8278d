"""`aidememo replica pull|status|get|reset` (SPEC.md REPLICA-1..6).

A profile's replica is `$AIDEMEMO_HOME/replicas/PROFILE.sqlite` unless `--path` names another
file (`aidememo.client.replica`). `pull` needs the server; `status` and `get` read only the
file, so they answer while the server is down, and say at which cursor their answer is
current. `pull --watch` then follows the live feed (LIVE-1), applying each batch as it comes
and reconnecting from the replica's cursor whenever the feed is lost.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from aidememo.cli.agent import profiles
from aidememo.cli.agent.connect import agent_command, connected
from aidememo.cli.agent.live_feed import bearer_header, feed_url, refused_upgrade
from aidememo.cli.errors import EXIT_FAILED, EXIT_USAGE, CliError
from aidememo.cli.options import PROG
from aidememo.cli.render import emit, json_line, write_line
from aidememo.cli.stores import data_home
from aidememo.client import MaterializedBatch
from aidememo.client.replica import Replica, ReplicaError, pull

REPLICAS_DIR = "replicas"
RECONNECT_FIRST_S = 0.2
RECONNECT_MAX_S = 5.0
# Feed errors after which reconnecting from the cursor is right (LIVE-4, LIVE-6): overflow and
# a server that could not serve; anything else (membership, token, epoch) ends the watch.
RECONNECT_CODES = (4429, 4503, 1006, 1011, 1012, 1013)


def replica_path(ns: argparse.Namespace, profile: profiles.Profile) -> Path:
    if ns.path:
        return Path(ns.path)
    return data_home() / REPLICAS_DIR / f"{profile.name}.sqlite"


def _open(ns: argparse.Namespace) -> tuple[profiles.Profile, Replica]:
    profile = profiles.get(ns.profile)
    return profile, Replica(replica_path(ns, profile))


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _failed(error: ReplicaError) -> CliError:
    return CliError(error.message, EXIT_FAILED)


@agent_command
def cmd_pull(ns: argparse.Namespace) -> int:
    with connected(ns) as (profile, client):
        with Replica(replica_path(ns, profile)) as replica:
            try:
                done = pull(client, replica)
            except ReplicaError as error:
                raise _failed(error) from None
            counts = f"{_n(done.resources, 'resource')}, {_n(done.changes, 'change')}"
            if done.bootstrapped:
                human = f"replica bootstrapped: seq {done.after_seq}, {counts}"
            else:
                human = f"replica pulled: seq {done.before_seq} -> {done.after_seq}, {counts}"
            emit(ns, {**done.document(), "path": str(replica.path)}, human)
            if not ns.watch:
                return 0
            epoch = client.identity().project_epoch
            return _watch(ns, profile, replica, epoch)


def cmd_status(ns: argparse.Namespace) -> int:
    profile, replica = _open(ns)
    with replica:
        try:
            replica.check(profile.tenant_id, profile.project_id, profile.actor_id)
        except ReplicaError as error:
            raise _failed(error) from None
        found = replica.status()
    if found["after_seq"] is None:
        human = f"no replica for {profile.name} yet: {PROG} replica pull --profile {profile.name}"
    else:
        human = (
            f"replica of {found['tenant_id']}/{found['project_id']} as {found['actor_id']} "
            f"at seq {found['after_seq']}: {_n(found['resources'], 'resource')}"
        )
    return emit(ns, found, human)


def cmd_get(ns: argparse.Namespace) -> int:
    profile, replica = _open(ns)
    with replica:
        try:
            replica.check(profile.tenant_id, profile.project_id, profile.actor_id)
            cursor = replica.cursor()
        except ReplicaError as error:
            raise _failed(error) from None
        found = replica.get(ns.kind, ns.resource_id)
    if found is None:
        raise CliError(
            f"{ns.kind}/{ns.resource_id} is not in the replica (current at seq {cursor}; "
            "a newer one may exist: replica pull) (resource_not_found)"
        )
    head = f"{found.kind}/{found.id} revision {found.revision} (replica at seq {cursor})"
    if found.state == "deleted":
        return emit(ns, found.document(), f"{head}: deleted")
    return emit(ns, found.document(), [head, json.dumps(found.body, ensure_ascii=False, indent=2)])


def cmd_search(ns: argparse.Namespace) -> int:
    """Search of the replica at its cursor (REPLICA-7, SEM-9), with no network."""
    from aidememo.embedding import installed_embedder

    profile, replica = _open(ns)
    with replica:
        try:
            replica.check(profile.tenant_id, profile.project_id, profile.actor_id)
            replica.cursor()
            found = replica.search(ns.query, ns.source, ns.limit or 20, ns.mode, installed_embedder)
        except ReplicaError as error:
            raise _failed(error) from None
    lines = [
        f"{r['score']:.3g}  {r['fact_id']}  {r['content'][:80]}" for r in found["results"]
    ] or ["no matching facts"]
    lines.append(f"{found['mode']} search of the replica at seq {found['index_seq']}")
    return emit(ns, found, lines)


def cmd_reset(ns: argparse.Namespace) -> int:
    if not ns.force:
        raise CliError(
            "replica reset forgets the cached copy and its pin; pass --force to reset it",
            EXIT_USAGE,
        )
    _, replica = _open(ns)
    with replica:
        forgotten = replica.reset()
    document = {"reset": True, "resources": forgotten, "path": str(replica.path)}
    return emit(ns, document, f"replica reset: {_n(forgotten, 'resource')} forgotten")


# -- watch --------------------------------------------------------------------------------------


def _watch(ns: argparse.Namespace, profile: profiles.Profile, replica: Replica, epoch: str) -> int:
    """Apply the live feed's batches until interrupted; reconnect from the cursor (REPLICA-6)."""
    try:
        from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI
        from websockets.sync.client import connect
    except ImportError:
        raise CliError(
            "replica pull --watch needs the websockets package: pip install websockets",
            EXIT_USAGE,
        ) from None
    headers = bearer_header(profile)
    pause = RECONNECT_FIRST_S
    while True:
        cursor = replica.cursor()
        url = feed_url(profile, epoch, cursor)
        try:
            socket = connect(url, additional_headers=headers, open_timeout=30, max_size=None)
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status < 500:
                raise CliError(refused_upgrade(status, exc.response.body)) from None
            _lost(ns, cursor, f"the live feed was refused: HTTP {status}")
        except (OSError, TimeoutError, InvalidURI) as exc:
            _lost(ns, cursor, f"cannot reach the server: {exc}")
        else:
            pause = RECONNECT_FIRST_S
            with socket:
                try:
                    for text in socket:
                        _apply(ns, replica, json.loads(text))
                except ConnectionClosed as exc:
                    code = exc.rcvd.code if exc.rcvd is not None else 1006
                    if code not in RECONNECT_CODES:
                        raise CliError(f"the live feed closed ({code}): {exc}") from None
                    _lost(ns, replica.cursor(), f"the live feed was lost ({code})")
                else:
                    _lost(ns, replica.cursor(), "the server closed the live feed")
        time.sleep(pause)
        pause = min(pause * 2, RECONNECT_MAX_S)


def _apply(ns: argparse.Namespace, replica: Replica, document: dict[str, Any]) -> None:
    if "error" in document:
        error = document["error"]
        if error.get("code") in ("feed_overflow", "storage_failure"):
            return  # the close that follows reconnects from the cursor
        raise CliError(f"the live feed closed: {error.get('message')} ({error.get('code')})")
    if document.get("type") == "lease_expired":
        return
    batch = MaterializedBatch.model_validate(document)
    try:
        changes = replica.apply(batch)
    except ReplicaError as error:
        raise _failed(error) from None
    if not changes:
        return
    after = batch.next_cursor.after_seq
    if ns.json:
        json_line({"after_seq": after, "changes": changes})
    else:
        write_line(f"replica at seq {after}: {_n(changes, 'change')}")


def _lost(ns: argparse.Namespace, cursor: int, why: str) -> None:
    sys.stderr.write(f"{PROG}: {why}; reconnecting from seq {cursor}\n")
    sys.stderr.flush()
