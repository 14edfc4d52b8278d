"""Server URL checks shared by the agent and admin commands: loopback hosts and `--url`
without a scheme. Stdlib only and small, so an agent command imports nothing else for them."""

from __future__ import annotations

from urllib.parse import urlsplit

from aidememo.cli.errors import EXIT_USAGE, CliError


def is_loopback(host: str) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1 (brackets allowed)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    import ipaddress  # only here: its import costs more than the rest of this module

    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _as_http(url: str) -> str:
    return "http://" + url.split("://", 1)[-1]


def _no_scheme(url: str) -> None:
    """A `--url` without a scheme is read as https://, except on a loopback host, where the
    server is most likely a local `aidememo serve` (plain HTTP): there it is refused with the
    http:// URL to use instead, rather than failing later in a TLS handshake."""
    host = urlsplit("//" + url).hostname
    if host is not None and is_loopback(host):
        raise CliError(
            f"--url {url} has no scheme: a local `aidememo serve` speaks plain HTTP, so give "
            f"{_as_http(url)} (or https://{url} for a TLS front)",
            EXIT_USAGE,
        )
