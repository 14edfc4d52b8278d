"""Pure helpers of the Worker: binding names, object names, the transport rule.

Kept free of the Workers SDK so CPython unit tests exercise them directly.
"""

from __future__ import annotations

from typing import Any

# Binding names, as declared in wrangler.toml.
PROJECTS = "PROJECTS"  # ProjectCoordinator, one per (tenant, project)
TENANTS = "TENANTS"  # TenantRegistry, one per tenant
TOKENS = "TOKENS"  # TokenDirectory, 256 shards by digest prefix
RATE_LIMITER = "RATE_LIMITER"  # [[ratelimits]] binding
ADMIN_TOKEN_SHA256 = "ADMIN_TOKEN_SHA256"  # secret: hex SHA-256 of the admin token
ALLOW_INSECURE_HTTP = "ALLOW_INSECURE_HTTP"  # var: accept plain HTTP (local development)
CONSOLE_SESSION_KEY = "CONSOLE_SESSION_KEY"  # secret: hex key (>= 32 bytes) of console cookies

# The [[ratelimits]] period in seconds; a 429 tells the client to wait this long.
RATE_LIMIT_PERIOD_S = 60
# Hex characters of the digest that pick a token directory shard: 2 -> 256 shards.
TOKEN_SHARD_HEX = 2


def project_object_name(tenant_id: str, project_id: str) -> str:
    """The project object's name. Ids never contain "/" (ID-1), so the name is unambiguous,
    and the tenant always comes from the authenticated token, never from the request."""
    return f"{tenant_id}/{project_id}"


def tenant_object_name(tenant_id: str) -> str:
    """The tenant registry's name."""
    return tenant_id


def token_shard(token_sha256_hex: str) -> str:
    """The token directory shard of a digest: its first two hex characters."""
    return f"tokens-{token_sha256_hex[:TOKEN_SHARD_HEX]}"


def var_is_set(env: Any, name: str) -> bool:
    """A `[vars]` flag: set unless missing, empty, "0", "false" or "no"."""
    value = getattr(env, name, None)
    if value is None:
        return False
    return str(value).strip().lower() not in ("", "0", "false", "no")


def insecure(scheme: str, path: str, allow_insecure_http: bool) -> bool:
    """True when a `/v1` request arrived over plain HTTP and that is not allowed (426)."""
    if allow_insecure_http or scheme.lower() != "http":
        return False
    return path == "/v1" or path.startswith("/v1/")
