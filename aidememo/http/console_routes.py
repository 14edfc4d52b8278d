"""The browser console's route entries (SPEC.md CONSOLE-*), in `routes.ROUTES`; their
handlers are `aidememo.http.console_handlers`'."""

from __future__ import annotations

from aidememo.domain.errors import ErrorCode
from aidememo.http import console_handlers as h
from aidememo.http.types import Auth, EdgeHandler, Route

CONSOLE_PAGE = Route(
    "console_page",
    "GET",
    "/console",
    h.page,
    "The browser console (HTML)",
    Auth.PUBLIC,
    answer="ConsoleFile",
    answer_media="text/html",
)
CONSOLE_ASSET = Route(
    "console_asset",
    "GET",
    "/console/{asset}",
    h.asset,
    "A file of the console (script, style sheet or image)",
    Auth.PUBLIC,
    answer="ConsoleFile",
    answer_media="*/*",
)
CONSOLE_SIGN_IN = Route(
    "console_sign_in",
    "POST",
    "/console/session",
    h.sign_in,
    "Console sign-in: the bearer token becomes an HttpOnly session cookie (CONSOLE-2)",
    answer="ConsoleSession",
    errors=(ErrorCode.ORIGIN_NOT_ALLOWED,),
    edge_handler=EdgeHandler.SIGN_IN,
)
CONSOLE_SIGN_OUT = Route(
    "console_sign_out",
    "DELETE",
    "/console/session",
    h.sign_out,
    "Console sign-out: drops the session cookie",
    Auth.PUBLIC,
    answer="ConsoleSignedOut",
    errors=(ErrorCode.ORIGIN_NOT_ALLOWED,),
)
CONSOLE_ROUTES = (CONSOLE_PAGE, CONSOLE_ASSET, CONSOLE_SIGN_IN, CONSOLE_SIGN_OUT)
