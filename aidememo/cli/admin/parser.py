"""The admin part of the command tree: `token`, `bootstrap`, `admin ...`, `health`, `serve`.

Built only when the command line names one of them (`aidememo.cli.main`); the handlers
(`aidememo.cli.admin.commands`, with the store, service and HTTP modules they need) load when one
runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from aidememo.cli.options import Command, lazy
from aidememo.domain.model import ActorKind, MemberStatus, Role

# The admin handlers (and the store, service and HTTP modules they need) load when one runs.
cmd_admin_delete_tenant = lazy("aidememo.cli.admin.commands", "cmd_admin_delete_tenant")
cmd_admin_export = lazy("aidememo.cli.admin.commands", "cmd_admin_export")
cmd_admin_gc = lazy("aidememo.cli.admin.commands", "cmd_admin_gc")
cmd_admin_import = lazy("aidememo.cli.admin.commands", "cmd_admin_import")
cmd_admin_member = lazy("aidememo.cli.admin.commands", "cmd_admin_member")
cmd_admin_migrate = lazy("aidememo.cli.admin.commands", "cmd_admin_migrate")
cmd_admin_token_revoke = lazy("aidememo.cli.admin.commands", "cmd_admin_token_revoke")
cmd_bootstrap = lazy("aidememo.cli.admin.commands", "cmd_bootstrap")
cmd_health = lazy("aidememo.cli.admin.commands", "cmd_health")
cmd_token_new = lazy("aidememo.cli.admin.commands", "cmd_token_new")


def _target(cmd: Command, db_help: str) -> None:
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
        "--allow-insecure-http", switch=True, help="allow an http:// --url to a non-loopback host"
    )


def _command(
    parent: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    handler: Callable[[argparse.Namespace], int],
    db_help: str,
) -> Command:
    """A command that works on a database or an admin URL (`_target`)."""
    cmd = Command(parent.add_parser(name, help=help), handler)
    _target(cmd, db_help)
    return cmd


def _bodies(cmd: Command, help: str, add_backend_options: Callable[[Command], None]) -> None:
    """Where the artifact bodies are: `--artifact-root` or the S3 flags."""
    cmd.add("--artifact-root", env="AIDEMEMO_ARTIFACT_ROOT", help=help)
    add_backend_options(cmd)


def add_admin_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`token`, `bootstrap`, `admin`, `health`, `serve` and `indexer`."""
    # `serve` and the S3 body flags are origin's: `origin.serve_command` is the one module of
    # origin/ the command line imports, here and in the handlers that open S3 bodies.
    from origin.serve_command import add_backend_options, add_serve_command

    db_help = "SQLite file path or postgresql:// URL; default $AIDEMEMO_HOME/ssot.sqlite"

    token = sub.add_parser("token", help="token files").add_subparsers(
        dest="token_command", metavar="ACTION", required=True
    )
    new = Command(
        token.add_parser("new", help="write a new random token file (0600)"), cmd_token_new
    )
    new.add("--out", env="AIDEMEMO_TOKEN_FILE", required=True, help="file to create")

    boot = _command(
        sub, "bootstrap", "create or confirm a project, member and token", cmd_bootstrap, db_help
    )
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
    member = _command(
        admin, "member", "change a member's role or status", cmd_admin_member, db_help
    )
    member.add("--tenant-id", required=True, help="tenant id")
    member.add("--project-id", required=True, help="project id")
    member.add("--actor-id", required=True, help="actor id")
    change = member.parser.add_mutually_exclusive_group()
    for flag, values, help in (
        ("--role", Role, "new role"),
        ("--status", MemberStatus, "new status"),
    ):
        member.add(
            flag,
            choices=[v.value for v in values],
            help=help,
            group=change,
            group_name="change",
        )
    admin_token = admin.add_parser("token", help="token administration").add_subparsers(
        dest="admin_token_command", metavar="ACTION", required=True
    )
    revoke = _command(
        admin_token, "revoke", "revoke a token (final)", cmd_admin_token_revoke, db_help
    )
    revoke.add("--token-file", required=True, help="token file whose token to revoke")

    export = _command(
        admin, "export", "export a tenant or project to a new JSONL file", cmd_admin_export, db_help
    )
    export.add("--tenant-id", required=True, help="tenant to export")
    export.add("--project-id", help="export only this project (and its members)")
    export.add(
        "--include-token-digests",
        switch=True,
        help="include token digests, so members keep their tokens after an import",
    )
    export.add("--out", env="AIDEMEMO_EXPORT_FILE", required=True,
               help="file to create (0600; an existing file is never overwritten)")  # fmt: skip
    export.add("--include-bodies", switch=True, help="carry the artifact bodies (with --database)")
    _bodies(export, "directory of artifact bodies (default: <sqlite path>.artifacts)",
            add_backend_options)  # fmt: skip

    import_ = _command(
        admin,
        "import",
        "import an export into scopes that do not exist yet",
        cmd_admin_import,
        db_help,
    )
    import_.add("--in", env="AIDEMEMO_IMPORT_FILE", required=True, help="export file to import")
    _bodies(import_, "directory the export's artifact bodies go to", add_backend_options)

    delete = _command(
        admin, "delete-tenant", "remove every row of a tenant", cmd_admin_delete_tenant, db_help
    )
    delete.add("--tenant-id", required=True, help="tenant to delete")
    delete.add("--confirm", required=True, help="the tenant id again")

    migrate = Command(
        admin.add_parser("migrate", help="migrate the database to this version's schema"),
        cmd_admin_migrate,
    )
    migrate.add("--database", env="AIDEMEMO_DATABASE_URL", help=db_help)

    gc = Command(
        admin.add_parser("gc", help="one pass of artifact garbage collection (for a cron job)"),
        cmd_admin_gc,
    )
    gc.add("--database", env="AIDEMEMO_DATABASE_URL", help=db_help)
    _bodies(gc, "directory of artifact bodies", add_backend_options)

    health = Command(sub.add_parser("health", help="open the store and report it"), cmd_health)
    health.add("--database", env="AIDEMEMO_DATABASE_URL", help=db_help)

    add_serve_command(sub, db_help)
    add_indexer_command(sub, db_help)


def add_indexer_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], db_help: str
) -> None:
    """`aidememo indexer`: the semantic indexer as its own process (SEM-7)."""
    from aidememo.cli.admin.indexer import cmd_indexer

    indexer = Command(
        sub.add_parser("indexer", help="follow every project's feed into the semantic index"),
        cmd_indexer,
    )
    indexer.add("--database", env="AIDEMEMO_DATABASE_URL", help=db_help)
    indexer.add("--embedding", env="AIDEMEMO_EMBEDDING", default="bundled", help="provider")
    indexer.add("--once", switch=True, help="index until caught up, then exit")
    indexer.add(
        "--attached",
        switch=True,
        help="as serve's child: JSON status lines on stdout, stop when stdin closes",
    )
