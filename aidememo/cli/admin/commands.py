"""The commands behind `aidememo ...`: provisioning, administration and health (`serve` is
origin's: `origin.serve_command`).

Expected failures raise `CliError` (one line, exit 1 or 2); nothing prints a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from itertools import chain
from typing import Any

from aidememo.cli.admin.archive import (
    check_confirm,
    open_import,
    write_export,
    write_lines,
)
from aidememo.cli.admin.remote import AdminClient
from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.options import (
    TOKEN_BYTES,
    TOKEN_FILE_MODE,
)
from aidememo.cli.private_files import NEW_FILE_FLAGS, write_all
from aidememo.cli.stores import (
    DATABASE_FILE,
    data_home,
    default_database,
    describe_database,
    is_postgres,
    open_store,
    psycopg_connector,
)
from aidememo.cli.token_files import read_token_file
from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.errors import AidememoError
from aidememo.domain.limits import (
    MAX_ARCHIVE_BYTES,
)
from aidememo.domain.model import ActorKind, MemberStatus, Role
from aidememo.http import admin_handlers as admin_answers
from aidememo.ports import BodyStore, Store
from aidememo.service.archive import Archive
from aidememo.service.archive_verify import MAX_LINE_BYTES
from aidememo.service.identity import IdentityService, token_digest


def _print_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, sort_keys=False) + "\n")
    sys.stdout.flush()


def _database(ns: argparse.Namespace, *, create: bool = True) -> str:
    """`--database`, or the default file (its data directory prepared only when `create`).

    The admin commands that work on existing data (all but bootstrap, migrate and import)
    pass `create=False` here and to `open_store`, which then refuses a missing file."""
    value: str | None = ns.database
    if value:
        return value
    return default_database() if create else str(data_home() / DATABASE_FILE)


def _with_store(database: str, fn: Callable[[Store], int], *, create: bool = True) -> int:
    store = open_store(database, create=create)
    try:
        return fn(store)
    finally:
        store.close()


def _identity(store: Store) -> IdentityService:
    return IdentityService(store, SystemClock(), RandomIds())


def _refused(what: str, error: AidememoError) -> CliError:
    return CliError(f"{what}: {error.message} ({error.code.value}); nothing was changed")


def _archive(store: Store, ns: argparse.Namespace | None = None) -> Archive:
    """The archive service; with `ns`, its artifact bodies under `--artifact-root` (the
    SQLite default, none for PostgreSQL without the flag), ART-12."""
    bodies: BodyStore | None = None
    if ns is not None and hasattr(ns, "artifact_root"):
        from aidememo.cli.admin.artifact_root import artifact_root, open_bodies
        from origin.serve_command import open_s3_bodies, s3_settings

        s3 = s3_settings(ns)
        if s3 is not None:  # OBJ-2: bodies in an S3 bucket
            bodies = open_s3_bodies(s3)
        else:
            root = artifact_root(_database(ns, create=False), ns.artifact_root, required=False)
            bodies = None if root is None else open_bodies(root)
    return Archive(store, SystemClock(), RandomIds(), bodies)


def _remote(ns: argparse.Namespace) -> AdminClient | None:
    """The admin endpoint of `--url`, or None in `--database` mode."""
    url: str | None = ns.url
    if not url:
        return None
    if not ns.admin_token_file:
        raise CliError(
            "--url needs --admin-token-file (or set AIDEMEMO_ADMIN_TOKEN_FILE)", EXIT_USAGE
        )
    return AdminClient(
        url,
        read_token_file(ns.admin_token_file),
        allow_insecure_http=bool(ns.allow_insecure_http),
    )


# -- commands ---------------------------------------------------------------------------------


def cmd_token_new(ns: argparse.Namespace) -> int:
    """Write 32 random bytes as 64 hex characters and a newline to a new 0600 file."""
    path: str = ns.out
    token = os.urandom(TOKEN_BYTES).hex() + "\n"
    try:
        fd = os.open(path, NEW_FILE_FLAGS, TOKEN_FILE_MODE)
    except FileExistsError:
        raise CliError(f"{path} already exists; refusing to overwrite a token file") from None
    except OSError as exc:
        raise CliError(f"cannot create {path}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, TOKEN_FILE_MODE)  # whatever the umask did
        write_all(fd, token.encode("ascii"))
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        os.unlink(path)
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    os.close(fd)
    _print_json({"token_file": os.path.abspath(path)})
    return 0


def _member_of(ns: argparse.Namespace) -> dict[str, Any]:
    """The member the flags name, as the admin routes take it."""
    return {"tenant_id": ns.tenant_id, "project_id": ns.project_id, "actor_id": ns.actor_id}


def cmd_bootstrap(ns: argparse.Namespace) -> int:
    """Create (or confirm) tenant, project, actor, membership and token in one transaction."""
    digest = token_digest(read_token_file(ns.token_file))
    remote = _remote(ns)
    if remote is not None:
        body: dict[str, Any] = {
            **_member_of(ns),
            "actor_kind": ns.actor_kind,
            "role": ns.role,
            "token_sha256": digest.hex(),  # the digest only: the token never leaves this host
        }
        if ns.project_epoch is not None:
            body["project_epoch"] = ns.project_epoch
        _print_json(remote.post_json("bootstrap refused", "/v1/admin/bootstrap", body))
        return 0

    def run(store: Store) -> int:
        try:
            result = _identity(store).bootstrap(
                tenant_id=ns.tenant_id,
                project_id=ns.project_id,
                actor_id=ns.actor_id,
                kind=ActorKind(ns.actor_kind),
                role=Role(ns.role),
                project_epoch=ns.project_epoch,
                token_sha256=digest,
            )
        except AidememoError as error:
            raise _refused("bootstrap refused", error) from None
        _print_json(admin_answers.bootstrap_json(result))
        return 0

    return _with_store(_database(ns), run)


def cmd_admin_member(ns: argparse.Namespace) -> int:
    """Change one member's role or status."""
    if (ns.role is None) == (ns.status is None):
        raise CliError("give exactly one of --role and --status", EXIT_USAGE)
    remote = _remote(ns)
    if remote is not None:
        body = _member_of(ns)
        body.update({"role": ns.role} if ns.role is not None else {"status": ns.status})
        _print_json(remote.post_json("member change refused", "/v1/admin/members", body))
        return 0

    def run(store: Store) -> int:
        try:
            member = _identity(store).set_membership(
                ns.tenant_id,
                ns.project_id,
                ns.actor_id,
                role=None if ns.role is None else Role(ns.role),
                status=None if ns.status is None else MemberStatus(ns.status),
            )
        except AidememoError as error:
            raise _refused("member change refused", error) from None
        _print_json(admin_answers.membership_json(member))
        return 0

    return _with_store(_database(ns, create=False), run, create=False)


def cmd_admin_token_revoke(ns: argparse.Namespace) -> int:
    """Revoke the token in a token file (final; bootstrap will not reactivate it)."""
    digest = token_digest(read_token_file(ns.token_file))
    remote = _remote(ns)
    if remote is not None:
        body = {"token_sha256": digest.hex()}
        _print_json(remote.post_json("revoke refused", "/v1/admin/tokens/revoke", body))
        return 0

    def run(store: Store) -> int:
        try:
            known = _identity(store).revoke_token(digest)
        except AidememoError as error:
            raise _refused("revoke refused", error) from None
        if not known:
            raise CliError(f"the token in {ns.token_file} is not bound to any actor")
        _print_json({"revoked": True})
        return 0

    return _with_store(_database(ns, create=False), run, create=False)


def cmd_admin_export(ns: argparse.Namespace) -> int:
    """Write the tenant's (or one project's) export to a new 0600 file (ARC-1)."""
    tenant_id: str = ns.tenant_id
    project_id: str | None = ns.project_id
    include_tokens = bool(ns.include_token_digests)
    if os.path.lexists(ns.out):  # before any work; the final link checks again
        raise CliError(f"{ns.out} already exists; refusing to overwrite an export")
    remote = _remote(ns)
    summary: dict[str, Any]
    include_bodies = bool(getattr(ns, "include_bodies", False))
    if remote is not None:
        client = remote
        query = {"project_id": project_id} if project_id is not None else {}
        if include_tokens:
            query["include_token_digests"] = "true"
        if include_bodies:  # ART-12: the server streams them
            query["include_bodies"] = "true"
        path = f"/v1/admin/tenants/{tenant_id}/export"
        summary = write_export(
            ns.out, lambda write: client.download("export refused", path, query, write)
        )
    else:

        def run(store: Store) -> dict[str, Any]:
            try:
                lines = _archive(store, ns if include_bodies else None).export_lines(
                    tenant_id, project_id, include_tokens=include_tokens,
                    include_bodies=include_bodies,
                )  # fmt: skip
                if not include_bodies:  # refusals before the file exists
                    lines = iter(list(lines))
            except AidememoError as error:
                raise CliError(f"export refused: {error.message} ({error.code.value})") from None
            return write_export(ns.out, write_lines(lines))

        store = open_store(_database(ns, create=False), create=False)
        try:
            summary = run(store)
        finally:
            store.close()
    _print_json(
        {
            "tenant_id": tenant_id,
            "project_id": project_id,
            "include_token_digests": include_tokens,
            **summary,
        }
    )
    return 0


def cmd_admin_import(ns: argparse.Namespace) -> int:
    """Import an export into scopes that do not exist yet, all or nothing (ARC-2, ARC-3)."""
    remote = _remote(ns)
    handle, size = open_import(getattr(ns, "in"), limit=MAX_ARCHIVE_BYTES if remote else None)

    def run(store: Store) -> int:
        # The body store is opened only for an export that carries bodies (ART-12).
        first = handle.readline(MAX_LINE_BYTES + 1)
        archive = _archive(store, ns if b'"bodies":true' in first else None)
        try:
            summary = archive.import_lines(chain((first,), handle))  # line by line (ARC-9)
        except AidememoError as error:
            raise _refused("import refused", error) from None
        _print_json(admin_answers.import_json(summary))
        return 0

    with handle:
        if remote is not None:
            _print_json(remote.upload("import refused", "/v1/admin/import", handle, size))
            return 0
        return _with_store(_database(ns), run)


def cmd_admin_delete_tenant(ns: argparse.Namespace) -> int:
    """Remove every row of a tenant, verified by counts (ARC-4)."""
    tenant_id: str = ns.tenant_id
    check_confirm(tenant_id, ns.confirm)
    remote = _remote(ns)
    if remote is not None:
        path = f"/v1/admin/tenants/{tenant_id}"
        _print_json(remote.delete("deletion refused", path, {"confirm": ns.confirm}))
        return 0

    def run(store: Store) -> int:
        try:
            removed = _archive(store).delete_tenant(tenant_id, ns.confirm)
        except AidememoError as error:
            raise _refused("deletion refused", error) from None
        _print_json({"tenant_id": tenant_id, "removed": removed})
        return 0

    return _with_store(_database(ns, create=False), run, create=False)


def cmd_admin_gc(ns: argparse.Namespace) -> int:
    """One bounded artifact GC pass (SPEC.md ART-7); prints its report."""
    from aidememo.cli.admin.artifact_root import artifact_root, open_bodies, pin_identity
    from aidememo.domain.clock import SystemClock
    from aidememo.service.artifact_gc import ArtifactGc
    from origin.serve_command import open_s3_bodies, s3_settings

    database = _database(ns, create=False)
    s3 = s3_settings(ns)
    bodies: BodyStore
    if s3 is not None:
        bodies = open_s3_bodies(s3)
    else:
        root = artifact_root(database, ns.artifact_root)
        assert root is not None  # required: refused without one
        bodies = open_bodies(root)

    def run(store: Store) -> int:
        pin_identity(store, bodies)
        _print_json(ArtifactGc(store, bodies, SystemClock()).run_once().to_json())
        return 0

    return _with_store(database, run, create=False)


def cmd_admin_migrate(ns: argparse.Namespace) -> int:
    """Bring the database's schema to this code's version (PostgreSQL: under the advisory
    lock, in one transaction; SQLite migrates whenever it is opened)."""
    database = _database(ns)
    before: int | None = None
    if is_postgres(database):
        from aidememo.stores.postgres import PostgresStore

        pg = PostgresStore(psycopg_connector(database))
        try:
            before = pg.schema_version()
            after = pg.migrate()
        except AidememoError as error:
            raise CliError(
                f"migration of {describe_database(database)} refused: {error.message}"
            ) from None
        finally:
            pg.close()
    else:
        after = _with_store(database, lambda store: store.schema_version())
    _print_json(
        {
            "database": describe_database(database),
            "schema_version_before": before,
            "schema_version": after,
        }
    )
    return 0


def cmd_health(ns: argparse.Namespace) -> int:
    """Open the store and report what `/health` would."""
    database = _database(ns)

    def run(store: Store) -> int:
        _print_json(
            {
                "status": "ok",
                "mode": store.mode,
                "schema_version": store.schema_version(),
                "database": describe_database(database),
            }
        )
        return 0

    return _with_store(database, run)
