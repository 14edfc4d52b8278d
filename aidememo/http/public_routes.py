"""The public routes' entries (no token: liveness and readiness), in `routes.ROUTES`."""

from __future__ import annotations

from aidememo.http import public_handlers as h
from aidememo.http.types import Auth, Route

HEALTH = Route(
    "health",
    "GET",
    "/health",
    h.health,
    "Liveness, serving mode, the canonical store's schema version and state",
    Auth.PUBLIC,
    answer="Health",
)
READY = Route(
    "ready",
    "GET",
    "/ready",
    h.ready,
    "Readiness: 200 while the canonical store takes writes, else 503 and why",
    Auth.PUBLIC,
    answer="Ready",
    unready="Ready",
)

PUBLIC_ROUTES: tuple[Route, ...] = (HEALTH, READY)
