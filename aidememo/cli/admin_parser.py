"""The admin part of the command tree: `token`, `bootstrap`, `admin ...`, `health`, `serve`.

Built only when the command line names one of them (`aidememo.cli.main`); the handlers
(`aidememo.cli.commands`, with the store, service and HTTP modules they need) load when one
runs.
"""

from __future__ import annotations

import argparse

from aidememo.cli.agent_parser import lazy
from aidememo.cli.artifact_backend import add_backend_options
from aidememo.cli.options import DEFAULT_HOST, DEFAULT_PORT, Command, int_in
from aidememo.domain.limits import HANDOFF_LEASE_MS_DEFAULT, HANDOFF_LEASE_MS_MAX
from aidememo.domain.model import ActorKind, MemberStatus, Role

# The admin handlers (and the store, service and HTTP modules they need) load when one runs.
cmd_admin_delete_tenant = lazy("aidememo.cli.commands", "cmd_admin_delete_tenant")
cmd_admin_export = lazy("aidememo.cli.commands", "cmd_admin_export")
cmd_admin_gc = lazy("aidememo.cli.commands", "cmd_admin_gc")
cmd_admin_import = lazy("aidememo.cli.commands", "cmd_admin_import")
cmd_admin_member = lazy("aidememo.cli.commands", "cmd_admin_member")
cmd_admin_migrate = lazy("aidememo.cli.commands", "cmd_admin_migrate")
cmd_admin_token_revoke = lazy("aidememo.cli.commands", "cmd_admin_token_revoke")
cmd_bootstrap = lazy("aidememo.cli.commands", "cmd_bootstrap")
cmd_health = lazy("aidememo.cli.commands", "cmd_health")
cmd_serve = lazy("aidememo.cli.commands", "cmd_serve")
cmd_token_new = lazy("aidememo.cli.commands", "cmd_token_new")


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
        "--allow-insecure-http",
        switch=True,
        default=False,
        help="allow an http:// --url to a non-loopback host",
    )


def add_admin_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`token`, `bootstrap`, `admin`, `health` and `serve`."""
    db_help = "SQLite file path or postgresql:// URL; default $AIDEMEMO_HOME/ssot.sqlite"

    token = sub.add_parser("token", help="token files").add_subparsers(
        dest="token_command", metavar="ACTION", required=True
    )
    new = Command(
        token.add_parser("new", help="write a new random token file (0600)"), cmd_token_new
    )
    new.add("--out", env="AIDEMEMO_TOKEN_FILE", required=True, help="file to create")

    boot = Command(
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
    member = Command(
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
    revoke = Command(
        admin_token.add_parser("revoke", help="revoke a token (final)"), cmd_admin_token_revoke
    )
    _target(revoke, db_help)
    revoke.add("--token-file", required=True, help="token file whose token to revoke")

    export = Command(
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
    export.add("--include-bodies", switch=True, default=False,
               help="carry the artifact bodies (with --database)")  # fmt: skip
    export.add("--artifact-root", env="AIDEMEMO_ARTIFACT_ROOT",
               help="directory of artifact bodies (default: <sqlite path>.artifacts)")  # fmt: skip
    add_backend_options(export)

    import_ = Command(
        admin.add_parser("import", help="import an export into scopes that do not exist yet"),
        cmd_admin_import,
    )
    _target(import_, db_help)
    import_.add("--in", env="AIDEMEMO_IMPORT_FILE", required=True, help="export file to import")
    import_.add("--artifact-root", env="AIDEMEMO_ARTIFACT_ROOT",
                help="directory the export's artifact bodies go to")  # fmt: skip
    add_backend_options(import_)

    delete = Command(
        admin.add_parser("delete-tenant", help="remove every row of a tenant"),
        cmd_admin_delete_tenant,
    )
    _target(delete, db_help)
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
    gc.add("--artifact-root", env="AIDEMEMO_ARTIFACT_ROOT", help="directory of artifact bodies")
    add_backend_options(gc)

    health = Command(sub.add_parser("health", help="open the store and report it"), cmd_health)
    health.add("--database", env="AIDEMEMO_DATABASE_URL", help=db_help)

    serve = Command(sub.add_parser("serve", help="serve the HTTP API"), cmd_serve)
    serve.add("--database", env="AIDEMEMO_DATABASE_URL", help=db_help)
    serve.add("--host", default=DEFAULT_HOST, help="address to listen on")
    serve.add("--port", default=DEFAULT_PORT, convert=int_in(1, 65535), help="TCP port")
    serve.add(
        "--allow-insecure-http",
        switch=True,
        default=False,
        help="allow plain HTTP on a non-loopback host (put a TLS proxy in front)",
    )
    serve.add(
        "--handoff-lease-ms",
        default=HANDOFF_LEASE_MS_DEFAULT,
        convert=int_in(1, HANDOFF_LEASE_MS_MAX),
        help="handoff claim lease",
    )
    serve.add(
        "--workers",
        default=1,
        convert=int_in(1, 64),
        help="origin processes on the one port (more than 1 needs PostgreSQL)",
    )
    serve.add(
        "--listen-database",
        help="direct PostgreSQL URL the live feed LISTENs on for other processes' commits "
        "(default: --database; 'off' for none, e.g. when --database goes through PgBouncer)",
    )
    serve.add(
        "--admin-token-file",
        help="file holding the admin token; its SHA-256 guards /v1/admin (closed without it)",
    )
    serve.add(
        "--artifact-root",
        env="AIDEMEMO_ARTIFACT_ROOT",
        help="directory of artifact bodies (default: <sqlite path>.artifacts; required with "
        "PostgreSQL)",
    )
    add_backend_options(serve)
    serve.add(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="log lines as text or as one JSON object each",
    )
    serve.add(
        "--metrics-bind",
        help="HOST:PORT of a separate listener serving Prometheus metrics (default: off)",
    )
    serve.add(
        "--rate-limit",
        help="requests per token as N/SECONDS, or off (default: 600/60 on a non-loopback "
        "host, off on loopback)",
    )
    serve.add(
        "--mcp-allowed-origins",
        default="",
        help="browser origins (comma-separated) allowed to call the MCP endpoint; a request "
        "with any other Origin header is 403 (default: none)",
    )
    serve.add(
        "--embedding",
        env="AIDEMEMO_EMBEDDING",
        default="bundled",
        help="semantic search provider: bundled (the local model of the semantic extra), "
        "onnx:DIR (model.onnx + tokenizer.json), openai:URL#MODEL (key from "
        "AIDEMEMO_EMBEDDING_API_KEY), or off",
    )
    serve.add(
        "--indexer",
        env="AIDEMEMO_INDEXER",
        default="on",
        choices=["on", "off"],
        help="run the semantic indexer as this server's child (off: a separate `aidememo indexer`)",
    )
    add_indexer_command(sub, db_help)


def add_indexer_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], db_help: str
) -> None:
    """`aidememo indexer`: the semantic indexer as its own process (SEM-7)."""
    from aidememo.cli.indexer import cmd_indexer

    indexer = Command(
        sub.add_parser("indexer", help="follow every project's feed into the semantic index"),
        cmd_indexer,
    )
    indexer.add("--database", env="AIDEMEMO_DATABASE_URL", help=db_help)
    indexer.add("--embedding", env="AIDEMEMO_EMBEDDING", default="bundled", help="provider")
    indexer.add("--once", switch=True, default=False, help="index until caught up, then exit")
    indexer.add(
        "--attached",
        switch=True,
        default=False,
        help="as serve's child: JSON status lines on stdout, stop when stdin closes",
    )
