"""Where the origin's artifact bodies live (`--artifact-root`, SPEC.md ART-8), and the pinning
of the catalog to their body store's identity."""

from __future__ import annotations

from aidememo.bodies.local import LocalBodies
from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.stores import is_postgres
from aidememo.domain.errors import AidememoError
from aidememo.ports import BodyStore, Store

ROOT_REQUIRED = (
    "--artifact-root is required with a PostgreSQL database: artifact bodies need a directory "
    "every origin of the database shares"
)


def artifact_root(database: str, root: str | None, *, required: bool = True) -> str | None:
    """`root`, or `<sqlite path>.artifacts`. PostgreSQL has no default: without a root it
    is refused when `required` (`serve`, `admin gc`), else None (an export or import without
    bodies needs none: ART-8, ART-12)."""
    if root:
        return root
    if is_postgres(database):
        if required:
            raise CliError(ROOT_REQUIRED, EXIT_USAGE)
        return None
    return f"{database}.artifacts"


def open_bodies(root: str) -> LocalBodies:
    """The local body store under `root` (created 0700)."""
    try:
        return LocalBodies(root)
    except (OSError, AidememoError) as exc:
        raise CliError(f"cannot use artifact root {root}: {exc}") from None


def pin_identity(store: Store, bodies: BodyStore) -> None:
    """Pin the catalog to `bodies`' identity on first use; refuse a mismatch (ART-8)."""
    store.transaction(lambda tx: tx.bind_body_store_identity(bodies.identity))
    bound = store.read(lambda tx: tx.body_store_identity())
    if bound != bodies.identity:
        raise CliError(
            f"this database's artifact catalog is pinned to body store {bound!r}, not "
            f"{bodies.identity!r}: refusing to start"
        )
