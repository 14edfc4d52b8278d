"""`aidememo serve`: its flags, and serving: open the store, build the HTTP app, hand it to the
origin server.

This is the one module of origin/ the command line imports (tests/unit/test_cli_origin_entry.py):
`aidememo.cli.admin` adds `serve` and the S3 body flags (`origin.s3_options`, re-exported here)
from it when it builds the admin commands, and the admin handlers open S3 bodies through it.
uvicorn and the rest of origin/ are imported only when serving, so every other command works
without the `origin` extra. `--workers N` (PostgreSQL only) forks N origin processes on one
port (`origin.workers`). With an artifact root each process pins the body store's identity and
runs a GC task (`origin.gc_task`). `--rate-limit` (`origin.rate_limit`) and `--metrics-bind`
(`origin.metrics`) are made here before any worker forks, so the workers share them.
"""

from __future__ import annotations

import argparse
import importlib.util
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.options import DEFAULT_HOST, DEFAULT_PORT, Command, int_in
from aidememo.cli.stores import default_database, is_postgres, open_store
from aidememo.cli.token_files import read_token_file
from aidememo.cli.urls import is_loopback
from aidememo.domain.limits import HANDOFF_LEASE_MS_DEFAULT, HANDOFF_LEASE_MS_MAX
from origin.s3_options import S3Settings, add_backend_options, open_s3_bodies, s3_settings

if TYPE_CHECKING:
    import socket

    from aidememo.http.app import HttpApp
    from aidememo.ports import BodyStore
    from origin.metrics import Metrics
    from origin.rate_limit import RateLimiter
    from origin.server import ServerSettings

MISSING_EXTRA = "aidememo serve needs the origin extra: pip install 'aidememo[origin]'"
MISSING_METRICS = "--metrics-bind needs prometheus_client: pip install 'aidememo[origin,metrics]'"
ORIGIN_CONNECTIONS = 8
"""PostgreSQL connections of the whole origin, shared out between its workers."""


def worker_pool_size(workers: int) -> int | None:
    """Each worker's PostgreSQL pool under `--workers N`: the origin's `ORIGIN_CONNECTIONS`
    shared out (at least 2 each), so N workers keep about as many sessions as one: writers of a
    project queue on its row in PostgreSQL, and more sessions are only more waiters woken per
    commit (docs/bench-notes.md). None for one worker: the store's default pool, which is the
    same size."""
    if workers <= 1:
        return None
    return max(2, -(-ORIGIN_CONNECTIONS // workers))


__all__ = ["S3Settings", "add_backend_options", "open_s3_bodies", "s3_settings"]  # the S3 flags


def add_serve_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], db_help: str
) -> None:
    """`aidememo serve` and its flags."""
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


def cmd_serve(ns: argparse.Namespace) -> int:
    """Serve the HTTP API with the flags of `add_serve_command`."""
    from aidememo.service.identity import token_digest

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
        workers=ns.workers,
        listen_database=ns.listen_database,
        mcp_allowed_origins=ns.mcp_allowed_origins,
        artifact_root=ns.artifact_root,
        log_format=ns.log_format,
        metrics_bind=ns.metrics_bind,
        rate_limit=ns.rate_limit,
        s3=s3_settings(ns),
        embedding=ns.embedding,
        indexer=ns.indexer == "on",
    )


SQLITE_WORKERS = (
    "--workers above 1 needs PostgreSQL: on SQLite one process already batches every "
    "writer into one group commit, which separate processes cannot share"
)


def run_serve(
    *,
    database: str | None,
    host: str,
    port: int,
    allow_insecure_http: bool,
    handoff_lease_ms: int,
    admin_token_sha256: bytes | None = None,
    workers: int = 1,
    listen_database: str | None = None,
    mcp_allowed_origins: str = "",
    artifact_root: str | None = None,
    gc_interval_s: float | None = None,
    log_format: str = "text",
    metrics_bind: str | None = None,
    rate_limit: str | None = None,
    s3: S3Settings | None = None,
    embedding: str = "bundled",
    indexer: bool = True,
) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit status.

    `embedding` names the semantic search provider (`aidememo.embedding`; "off": lexical
    only) and `indexer` runs the semantic indexer as a child process of the server, of the
    first worker with `workers` above 1 (SEM-7; off when a separate `aidememo indexer`
    follows the database).

    `admin_token_sha256` opens the admin routes to the token with that digest; without it
    they answer 401 `authentication_failed` to everyone. `workers` above 1 runs that many
    origin processes on the one port (`origin.workers`), on PostgreSQL only. On PostgreSQL
    each process LISTENs for the others' commits on `listen_database` (default the database
    URL; "off": none, the live feed's 2 s re-read only). Where each request runs is the
    origin's decision (`origin.lanes`), from its route and the store.

    `rate_limit` is `N/SECONDS` per token or `off`; None is 600/60 on a non-loopback host
    and off on loopback (`origin.rate_limit`, RATE-1..3). `metrics_bind` HOST:PORT serves
    Prometheus metrics on a listener of its own (`origin.metrics`, METRICS-1); None: off."""
    if not is_loopback(host) and not allow_insecure_http:
        raise CliError(
            f"refusing plain HTTP on non-loopback host {host}: tokens would cross the network "
            "in clear text; put a TLS proxy in front and pass --allow-insecure-http",
            EXIT_USAGE,
        )
    if importlib.util.find_spec("uvicorn") is None:
        raise CliError(MISSING_EXTRA, EXIT_USAGE)
    from aidememo.mcp.http import parse_origins
    from origin.limits import TransportLimits
    from origin.server import ServerSettings

    try:
        limits = TransportLimits.from_environ()
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None

    url = database if database else default_database()
    postgres = is_postgres(url)
    if postgres and s3 is None and not artifact_root:  # ART-8: no default next to a URL
        from aidememo.cli.admin.artifact_root import ROOT_REQUIRED

        raise CliError(ROOT_REQUIRED, EXIT_USAGE)
    if workers > 1 and not postgres:
        raise CliError(SQLITE_WORKERS, EXIT_USAGE)
    listen_url = _listen_url(url, listen_database) if postgres else None
    limiter = _rate_limiter(rate_limit, host)
    metrics = _start_metrics(metrics_bind, multiprocess=workers > 1)
    settings = ServerSettings(
        host=host,
        port=port,
        limits=limits,
        listen_url=listen_url,
        log_format=log_format,
        metered=None if metrics is None else metrics.wrap,
    )

    origins = parse_origins(mcp_allowed_origins)
    from aidememo.cli.admin.artifact_root import artifact_root as root_of
    from aidememo.cli.admin.artifact_root import open_bodies

    bodies: BodyStore | None
    if s3 is not None:  # OBJ-2: bodies in an S3 bucket
        bodies = open_s3_bodies(s3)
    else:
        root = root_of(url, artifact_root)
        bodies = None if root is None else open_bodies(root)
    try:
        return _serve(url, workers, settings, limiter, metrics, origins, host, port,
                      handoff_lease_ms, admin_token_sha256, bodies, gc_interval_s,
                      embedding, indexer)  # fmt: skip
    finally:
        if metrics is not None:
            metrics.stop()
        if limiter is not None:
            limiter.close()


def _serve(
    url: str,
    workers: int,
    settings: ServerSettings,
    limiter: RateLimiter | None,
    metrics: Metrics | None,
    origins: frozenset[str],
    host: str,
    port: int,
    handoff_lease_ms: int,
    admin_token_sha256: bytes | None,
    bodies: BodyStore | None,
    gc_interval_s: float | None,
    embedding: str = "bundled",
    indexer: bool = True,
) -> int:
    import shutil
    import tempfile
    from pathlib import Path

    from aidememo.cli.admin.artifact_root import pin_identity
    from aidememo.http.app import HttpApp
    from aidememo.service.artifact_gc import ArtifactGc
    from origin.gc_task import GC_INTERVAL_S, GcTask
    from origin.semantic_task import IndexerTask, load_provider, shared_status
    from origin.server import serve

    console_key = secrets.token_bytes(32)  # made before forking: every worker takes its cookies

    # with several workers the first runs the indexer and the others read its status here
    shared = None
    if workers > 1:
        shared = Path(tempfile.mkdtemp(prefix="aidememo-indexer-")) / "status.json"

    def open_app(index: int = 0) -> tuple[HttpApp, Callable[[], None]]:
        # The semantic search and what `/ready` says of the indexer (SEM-7), given to the app.
        task, engine, status = None, None, None
        embedder = load_provider(embedding)
        if embedder is not None:
            from aidememo.embedding.matrix import MatrixSearch

            engine = MatrixSearch(embedder)
            fingerprint = embedder.fingerprint.as_json()
            if indexer and index == 0:
                task = IndexerTask(url, embedding, fingerprint, shared)
                status = task.status
            elif indexer and shared is not None:
                status = shared_status(shared, fingerprint)
        store = open_store(url, pool_size=worker_pool_size(workers))
        try:
            if bodies is not None:
                pin_identity(store, bodies)  # ART-8: before serving any request
            app = HttpApp(
                store,
                handoff_lease_ms=handoff_lease_ms,
                admin_token_sha256=admin_token_sha256,
                mcp_allowed_origins=origins,
                bodies=bodies,
                rate_limit=limiter,
                console_key=console_key,
                semantic=engine,
                semantic_status=status,
            )
        except BaseException:
            store.close()
            raise
        if task is not None:
            task.start()
        gc = None
        if bodies is not None:
            gc = GcTask(ArtifactGc(store, bodies, app.services.artifacts.clock),
                        gc_interval_s or GC_INTERVAL_S)  # fmt: skip
            gc.start()

        def close() -> None:
            if gc is not None:
                gc.stop()
            if task is not None:
                task.stop()
            store.close()

        return app, close

    if workers == 1:
        app, close = open_app()
        return serve(app, settings, close=close)
    from origin.workers import bind, run_workers

    open_store(url).close()  # migrate once and report a bad database before forking
    try:
        sock = bind(host, port)
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None

    def worker(listening: socket.socket, index: int) -> int:
        if metrics is not None:
            metrics.after_fork()
        app, close = open_app(index)
        return serve(app, settings, close=close, sockets=[listening])

    try:
        return run_workers(workers, sock, worker)
    finally:
        if shared is not None:
            shutil.rmtree(shared.parent, ignore_errors=True)


def _rate_limiter(text: str | None, host: str) -> RateLimiter | None:
    """The limiter `--rate-limit` asks for; None (off) by default on a loopback host."""
    from origin.rate_limit import RateLimiter, RateSetting, parse_rate

    if text is None or not text.strip():
        return None if is_loopback(host) else RateLimiter(RateSetting())
    try:
        setting = parse_rate(text)
    except ValueError as exc:
        raise CliError(f"--rate-limit: {exc}", EXIT_USAGE) from None
    return None if setting is None else RateLimiter(setting)


def _start_metrics(bind: str | None, *, multiprocess: bool) -> Metrics | None:
    """The metrics listener `--metrics-bind` asks for (None: off)."""
    if bind is None or not bind.strip():
        return None
    if importlib.util.find_spec("prometheus_client") is None:
        raise CliError(MISSING_METRICS, EXIT_USAGE)
    from origin.metrics import start

    try:
        return start(bind, multiprocess=multiprocess)
    except ValueError as exc:
        raise CliError(f"--metrics-bind: {exc}", EXIT_USAGE) from None
    except OSError as exc:
        raise CliError(f"cannot serve metrics on {bind}: {exc.strerror or exc}") from None


def _listen_url(url: str, listen_database: str | None) -> str | None:
    """The URL the live feed LISTENs on (SPEC.md LIVE-9): the database's unless another
    is given; None for "off"."""
    if listen_database is None or not listen_database.strip():
        return url
    if listen_database.strip().lower() == "off":
        return None
    if not is_postgres(listen_database):
        raise CliError("--listen-database must be a PostgreSQL URL or 'off'", EXIT_USAGE)
    return listen_database
