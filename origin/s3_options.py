"""`--artifact-backend local|s3` for `serve` and `admin gc` (SPEC.md ART-8, OBJ-2).

`local` keeps bodies under `--artifact-root`; `s3` in a bucket of an S3-compatible store,
configured by `--s3-bucket`, `--s3-prefix`, `--s3-endpoint`, `--s3-region` and
`--s3-addressing`; `--s3-public-endpoint` is where grant URLs point when uploaders reach the
store at another address than the service (SPEC.md OBJ-4). Credentials are never flags:
boto3's standard provider chain finds them (environment, shared files, instance or container
roles). boto3 and `origin.s3_bodies` are imported only when `s3` is chosen.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.options import Command

if TYPE_CHECKING:
    from aidememo.ports import BodyStore

BACKENDS = ("local", "s3")


@dataclass(frozen=True)
class S3Settings:
    """The S3 flags as given (nothing secret): the fields of `origin.s3_bodies.S3Config`,
    which checks them."""

    bucket: str
    prefix: str
    endpoint: str | None
    region: str
    addressing: str
    public_endpoint: str | None = None


def add_backend_options(cmd: Command) -> None:
    """The backend flags of `serve` and `admin gc`."""
    cmd.add(
        "--artifact-backend",
        default="local",
        choices=list(BACKENDS),
        help="where artifact bodies live: local files (--artifact-root) or an S3 bucket",
    )
    cmd.add("--s3-bucket", help="S3 bucket of artifact bodies (with --artifact-backend s3)")
    cmd.add("--s3-prefix", default="", help="key prefix in the bucket, '' or ending in '/'")
    cmd.add("--s3-endpoint", help="S3-compatible endpoint URL (default: AWS S3)")
    cmd.add(
        "--s3-public-endpoint",
        help="S3 endpoint URL that grant URLs name (default: --s3-endpoint)",
    )
    cmd.add("--s3-region", default="us-east-1", help="S3 region ('auto' for R2)")
    cmd.add(
        "--s3-addressing",
        default="path",
        choices=["path", "virtual", "auto"],
        help="bucket in the path or in the host name",
    )


def s3_settings(ns: argparse.Namespace) -> S3Settings | None:
    """The S3 settings when `--artifact-backend s3`, else None."""
    if getattr(ns, "artifact_backend", "local") != "s3":
        return None
    if not ns.s3_bucket:
        raise CliError("--artifact-backend s3 needs --s3-bucket", EXIT_USAGE)
    return S3Settings(
        bucket=ns.s3_bucket,
        prefix=ns.s3_prefix or "",
        endpoint=ns.s3_endpoint or None,
        region=ns.s3_region,
        addressing=ns.s3_addressing,
        public_endpoint=getattr(ns, "s3_public_endpoint", None) or None,
    )


def open_s3_bodies(settings: S3Settings) -> BodyStore:
    """The S3 body store of `settings`; refuses bad settings and missing credentials."""
    try:
        import boto3

        from origin.s3_bodies import S3Bodies, S3Config, make_client
    except ImportError:
        raise CliError(
            "--artifact-backend s3 needs boto3: pip install 'aidememo[origin]'", EXIT_USAGE
        ) from None
    try:
        config = S3Config(**asdict(settings))
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    session = boto3.session.Session()
    if session.get_credentials() is None:
        raise CliError(
            "no AWS credentials for the S3 artifact backend: set them the standard way "
            "(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or an instance role)",
            EXIT_USAGE,
        )
    presigner = None
    if config.public_endpoint is not None:
        presigner = make_client(replace(config, endpoint=config.public_endpoint), session)
    return S3Bodies(config, client=make_client(config, session), presigner=presigner)
