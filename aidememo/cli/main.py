"""`aidememo`: argument parsing and the provisioning commands.

Every flag may also come from an `AIDEMEMO_*` environment variable (named in each flag's help);
a flag given on the command line wins. `AIDEMEMO_DATABASE_URL` keeps a PostgreSQL password out
of `ps`. Expected failures print one line to stderr and exit 1 (refused, nothing changed) or 2
(usage, or something this build cannot do); they never print a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aidememo import __version__
from aidememo.cli.archive import (
    check_confirm,
    open_import,
    write_export,
    write_lines,
)
from aidememo.cli.errors import EXIT_FAILED, EXIT_USAGE, CliError
from aidememo.cli.remote import AdminClient
from aidememo.cli.stores import (
    default_database,
    describe_database,
    is_postgres,
    open_store,
    psycopg_connector,
)
from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.errors import AidememoError
from aidememo.domain.limits import (
    BEARER_MAX_BYTES,
    HANDOFF_LEASE_MS_DEFAULT,
    HANDOFF_LEASE_MS_MAX,
    MAX_ARCHIVE_BYTES,
)
from aidememo.domain.model import ActorKind, MemberStatus, Role
from aidememo.ports import Store
from aidememo.service.archive import Archive
from aidememo.service.identity import IdentityService, token_digest

PROG = "aidememo"
TOKEN_BYTES = 32
TOKEN_FILE_MODE = 0o600
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 3030
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


# -- flags with environment fallbacks ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Opt:
    flag: str
    dest: str
    env: str
    required: bool
    default: Any
    convert: Callable[[str], Any]
    choices: tuple[str, ...] | None
    group: str | None  # flags of one exclusive group: the environment fills at most one


def _flag_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"expected one of {sorted(_TRUE | _FALSE)}, got {text!r}")


def _int_in(low: int, high: int) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    convert.__name__ = "integer"
    return convert


class _Command:
    """A subcommand's parser plus the environment fallbacks of its flags."""

    def __init__(self, parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]):
        self.parser = parser
        self.opts: list[_Opt] = []
        parser.set_defaults(_run=run, _opts=self.opts)

    def add(
        self,
        flag: str,
        *,
        env: str | None = None,
        required: bool = False,
        default: Any = None,
        convert: Callable[[str], Any] = str,
        choices: Sequence[str] | None = None,
        help: str,
        group: argparse._MutuallyExclusiveGroup | None = None,
        group_name: str | None = None,
        switch: bool = False,
    ) -> None:
        dest = flag.lstrip("-").replace("-", "_")
        env_name = env or "AIDEMEMO_" + dest.upper()
        text = f"{help} [env {env_name}]"
        if default is not None and not switch:
            text += f" (default {default})"
        target: Any = group if group is not None else self.parser
        if switch:
            target.add_argument(flag, dest=dest, action="store_true", default=None, help=text)
            convert = _flag_bool
        else:
            target.add_argument(
                flag,
                dest=dest,
                type=convert,
                choices=list(choices) if choices else None,
                default=None,
                help=text,
                metavar=(
                    "{" + ",".join(choices) + "}"
                    if choices
                    else flag.lstrip("-").upper().replace("-", "_")
                ),
            )
        self.opts.append(
            _Opt(
                flag,
                dest,
                env_name,
                required,
                default,
                convert,
                tuple(choices) if choices else None,
                group_name,
            )
        )


def _apply_environment(ns: argparse.Namespace) -> None:
    """Fill flags not given on the command line from the environment, then defaults."""
    opts: list[_Opt] = ns._opts
    given_groups = {o.group for o in opts if o.group and getattr(ns, o.dest) is not None}
    for opt in opts:
        if getattr(ns, opt.dest) is not None:
            continue
        raw = os.environ.get(opt.env, "")
        value: Any = None
        if raw and not (opt.group and opt.group in given_groups):
            try:
                value = opt.convert(raw)
            except (ValueError, argparse.ArgumentTypeError) as exc:
                raise CliError(f"{opt.env}: {exc}", EXIT_USAGE) from None
            if opt.choices is not None and value not in opt.choices:
                raise CliError(
                    f"{opt.env}: expected one of {', '.join(opt.choices)}, got {raw!r}",
                    EXIT_USAGE,
                )
            if opt.group:
                given_groups.add(opt.group)
        if value is None:
            if opt.required:
                raise CliError(f"{opt.flag} is required (or set {opt.env})", EXIT_USAGE)
            value = opt.default
        setattr(ns, opt.dest, value)


# -- small helpers ----------------------------------------------------------------------------


def _print_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, sort_keys=False) + "\n")
    sys.stdout.flush()


def read_token_file(path: str) -> str:
    """The token in `path`, surrounding whitespace stripped; refuses a missing or odd file."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(BEARER_MAX_BYTES + 2).strip()
    except FileNotFoundError:
        raise CliError(
            f"token file {path} does not exist (create one: {PROG} token new --out {path})"
        ) from None
    except UnicodeDecodeError:
        raise CliError(f"token file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise CliError(f"cannot read token file {path}: {exc.strerror or exc}") from None
    if not text:
        raise CliError(f"token file {path} is empty")
    if len(text.encode("utf-8")) > BEARER_MAX_BYTES:
        raise CliError(f"token in {path} is longer than {BEARER_MAX_BYTES} bytes")
    if not all("!" <= ch <= "~" for ch in text):
        raise CliError(f"token in {path} must be printable ASCII without spaces")
    return text


def _database(ns: argparse.Namespace) -> str:
    value: str | None = ns.database
    return value if value else default_database()


def _with_store(database: str, fn: Callable[[Store], int]) -> int:
    store = open_store(database)
    try:
        return fn(store)
    finally:
        store.close()


def _identity(store: Store) -> IdentityService:
    return IdentityService(store, SystemClock(), RandomIds())


def _refused(what: str, error: AidememoError) -> CliError:
    return CliError(f"{what}: {error.message} ({error.code.value}); nothing was changed")


def _archive(store: Store) -> Archive:
    return Archive(store, SystemClock(), RandomIds())


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
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, TOKEN_FILE_MODE)
    except FileExistsError:
        raise CliError(f"{path} already exists; refusing to overwrite a token file") from None
    except OSError as exc:
        raise CliError(f"cannot create {path}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, TOKEN_FILE_MODE)  # whatever the umask did
        os.write(fd, token.encode("ascii"))
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        os.unlink(path)
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    os.close(fd)
    _print_json({"token_file": os.path.abspath(path)})
    return 0


def cmd_bootstrap(ns: argparse.Namespace) -> int:
    """Create (or confirm) tenant, project, actor, membership and token in one transaction."""
    digest = token_digest(read_token_file(ns.token_file))
    remote = _remote(ns)
    if remote is not None:
        body: dict[str, Any] = {
            "tenant_id": ns.tenant_id,
            "project_id": ns.project_id,
            "actor_id": ns.actor_id,
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
        _print_json(
            {
                "tenant_id": result.project.tenant_id,
                "project_id": result.project.project_id,
                "project_epoch": result.project.project_epoch,
                "actor_id": result.membership.actor_id,
                "role": result.membership.role.value,
            }
        )
        return 0

    return _with_store(_database(ns), run)


def cmd_admin_member(ns: argparse.Namespace) -> int:
    """Change one member's role or status."""
    if (ns.role is None) == (ns.status is None):
        raise CliError("give exactly one of --role and --status", EXIT_USAGE)
    remote = _remote(ns)
    if remote is not None:
        body: dict[str, Any] = {
            "tenant_id": ns.tenant_id,
            "project_id": ns.project_id,
            "actor_id": ns.actor_id,
        }
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
        _print_json(
            {
                "tenant_id": member.tenant_id,
                "project_id": member.project_id,
                "actor_id": member.actor_id,
                "role": member.role.value,
                "status": member.status.value,
            }
        )
        return 0

    return _with_store(_database(ns), run)


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

    return _with_store(_database(ns), run)


def cmd_admin_export(ns: argparse.Namespace) -> int:
    """Write the tenant's (or one project's) export to a new 0600 file (ARC-1)."""
    tenant_id: str = ns.tenant_id
    project_id: str | None = ns.project_id
    include_tokens = bool(ns.include_token_digests)
    if os.path.lexists(ns.out):  # before any work; the final link checks again
        raise CliError(f"{ns.out} already exists; refusing to overwrite an export")
    remote = _remote(ns)
    summary: dict[str, Any]
    if remote is not None:
        client = remote
        query = {"project_id": project_id} if project_id is not None else {}
        if include_tokens:
            query["include_token_digests"] = "true"
        path = f"/v1/admin/tenants/{tenant_id}/export"
        summary = write_export(
            ns.out, lambda write: client.download("export refused", path, query, write)
        )
    else:

        def run(store: Store) -> dict[str, Any]:
            try:
                lines = list(
                    _archive(store).export_lines(
                        tenant_id, project_id, include_tokens=include_tokens
                    )
                )
            except AidememoError as error:
                raise CliError(f"export refused: {error.message} ({error.code.value})") from None
            return write_export(ns.out, write_lines(lines))

        store = open_store(_database(ns))
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
    with handle:
        if remote is not None:
            _print_json(remote.upload("import refused", "/v1/admin/import", handle, size))
            return 0
        lines = list(handle)

    def run(store: Store) -> int:
        try:
            summary = _archive(store).import_lines(lines)
        except AidememoError as error:
            raise _refused("import refused", error) from None
        _print_json(
            {
                "tenant_id": summary.tenant_id,
                "project_epochs": summary.epochs,
                "counts": summary.counts,
            }
        )
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

    return _with_store(_database(ns), run)


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


def cmd_serve(ns: argparse.Namespace) -> int:
    """Serve the HTTP API (imports the origin extra lazily)."""
    from aidememo.cli.serve import run_serve

    admin_digest = (
        token_digest(read_token_file(ns.admin_token_file)) if ns.admin_token_file else None
    )
    return run_serve(
        database=ns.database,
        admin_token_sha256=admin_digest,
        host=ns.host,
        port=ns.port,
        allow_insecure_http=bool(ns.allow_insecure_http),
        handoff_lease_ms=ns.handoff_lease_ms,
        dispatch=ns.dispatch,
    )


# -- parser -----------------------------------------------------------------------------------


def _target(cmd: _Command, db_help: str) -> None:
    """`--database D`, or `--url URL --admin-token-file F` for the admin HTTP routes."""
    where = cmd.parser.add_mutually_exclusive_group()
    cmd.add("--database", env="AIDEMEMO_DATABASE_URL", help=db_help, group=where,
            group_name="target")  # fmt: skip
    cmd.add(
        "--url",
        help="an origin or edge to administer over HTTPS instead of a database",
        group=where,
        group_name="target",
    )
    cmd.add("--admin-token-file", help="file holding the admin token (with --url)")
    cmd.add(
        "--allow-insecure-http",
        switch=True,
        default=False,
        help="allow an http:// --url to a non-loopback host",
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Memory and coordination service for AI agent teams."
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    db_help = "SQLite file path or postgresql:// URL; default $AIDEMEMO_HOME/ssot.sqlite"

    token = sub.add_parser("token", help="token files").add_subparsers(
        dest="token_command", metavar="ACTION", required=True
    )
    new = _Command(
        token.add_parser("new", help="write a new random token file (0600)"), cmd_token_new
    )
    new.add("--out", env="AIDEMEMO_TOKEN_FILE", required=True, help="file to create")

    boot = _Command(
        sub.add_parser("bootstrap", help="create or confirm a project, member and token"),
        cmd_bootstrap,
    )
    _target(boot, db_help)
    boot.add("--tenant-id", required=True, help="tenant id")
    boot.add("--project-id", required=True, help="project id")
    boot.add("--actor-id", required=True, help="actor id")
    boot.add(
        "--actor-kind",
        default=ActorKind.AGENT.value,
        choices=[k.value for k in ActorKind],
        help="actor kind",
    )
    boot.add("--role", default=Role.WRITER.value, choices=[r.value for r in Role], help="role")
    boot.add("--project-epoch", help="epoch of a new project (default: a new random one)")
    boot.add("--token-file", required=True, help="token file to bind to the actor")

    admin = sub.add_parser("admin", help="administration").add_subparsers(
        dest="admin_command", metavar="ACTION", required=True
    )
    member = _Command(
        admin.add_parser("member", help="change a member's role or status"), cmd_admin_member
    )
    _target(member, db_help)
    member.add("--tenant-id", required=True, help="tenant id")
    member.add("--project-id", required=True, help="project id")
    member.add("--actor-id", required=True, help="actor id")
    change = member.parser.add_mutually_exclusive_group()
    member.add(
        "--role",
        choices=[r.value for r in Role],
        help="new role",
        group=change,
        group_name="change",
    )
    member.add(
        "--status",
        choices=[s.value for s in MemberStatus],
        help="new status",
        group=change,
        group_name="change",
    )
    admin_token = admin.add_parser("token", help="token administration").add_subparsers(
        dest="admin_token_command", metavar="ACTION", required=True
    )
    revoke = _Command(
        admin_token.add_parser("revoke", help="revoke a token (final)"), cmd_admin_token_revoke
    )
    _target(revoke, db_help)
    revoke.add("--token-file", required=True, help="token file whose token to revoke")

    export = _Command(
        admin.add_parser("export", help="export a tenant or project to a new JSONL file"),
        cmd_admin_export,
    )
    _target(export, db_help)
    export.add("--tenant-id", required=True, help="tenant to export")
    export.add("--project-id", help="export only this project (and its members)")
    export.add(
        "--include-token-digests",
        switch=True,
        default=False,
        help="include token digests, so members keep their tokens after an import",
    )
    export.add("--out", env="AIDEMEMO_EXPORT_FILE", required=True,
               help="file to create (0600; an existing file is never overwritten)")  # fmt: skip

    import_ = _Command(
        admin.add_parser("import", help="import an export into scopes that do not exist yet"),
        cmd_admin_import,
    )
    _target(import_, db_help)
    import_.add("--in", env="AIDEMEMO_IMPORT_FILE", required=True, help="export file to import")

    delete = _Command(
        admin.add_parser("delete-tenant", help="remove every row of a tenant"),
        cmd_admin_delete_tenant,
    )
    _target(delete, db_help)
    delete.add("--tenant-id", required=True, help="tenant to delete")
    delete.add("--confirm", required=True, help="the tenant id again")

    migrate = _Command(
        admin.add_parser("migrate", help="migrate the database to this version's schema"),
        cmd_admin_migrate,
    )
    migrate.add("--database", env="AIDEMEMO_DATABASE_URL", help=db_help)

    health = _Command(sub.add_parser("health", help="open the store and report it"), cmd_health)
    health.add("--database", env="AIDEMEMO_DATABASE_URL", help=db_help)

    serve = _Command(sub.add_parser("serve", help="serve the HTTP API"), cmd_serve)
    serve.add("--database", env="AIDEMEMO_DATABASE_URL", help=db_help)
    serve.add("--host", default=DEFAULT_HOST, help="address to listen on")
    serve.add("--port", default=DEFAULT_PORT, convert=_int_in(1, 65535), help="TCP port")
    serve.add(
        "--allow-insecure-http",
        switch=True,
        default=False,
        help="allow plain HTTP on a non-loopback host (put a TLS proxy in front)",
    )
    serve.add(
        "--handoff-lease-ms",
        default=HANDOFF_LEASE_MS_DEFAULT,
        convert=_int_in(1, HANDOFF_LEASE_MS_MAX),
        help="handoff claim lease",
    )
    serve.add(
        "--dispatch",
        default="writes",
        choices=["writes", "inline", "thread"],
        help="where requests run: reads on the event loop and writes in worker threads, "
        "everything on the loop, or everything in threads",
    )
    serve.add(
        "--admin-token-file",
        help="file holding the admin token; its SHA-256 guards /v1/admin (closed without it)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        _apply_environment(ns)
        run: Callable[[argparse.Namespace], int] = ns._run
        return run(ns)
    except CliError as error:
        sys.stderr.write(f"{PROG}: error: {error.message}\n")
        return error.exit_code
    except AidememoError as error:
        sys.stderr.write(f"{PROG}: error: {error.message} ({error.code.value})\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
