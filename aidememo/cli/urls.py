"""Server URL checks shared by the agent and admin commands: loopback hosts and `--url`
without a scheme. Stdlib only and small, so an agent command imports nothing else for them."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

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


def as_http(url: str) -> str:
    """`url` with its scheme replaced by `http://` (a hint for a plain-HTTP local server)."""
    return "http://" + url.split("://", 1)[-1]


def _no_scheme(url: str) -> None:
    """A `--url` without a scheme is read as https://, except on a loopback host, where the
    server is most likely a local `aidememo serve` (plain HTTP): there it is refused with the
    http:// URL to use instead, rather than failing later in a TLS handshake."""
    host = urlsplit("//" + url).hostname
    if host is not None and is_loopback(host):
        raise CliError(
            f"--url {url} has no scheme: a local `aidememo serve` speaks plain HTTP, so give "
            f"{as_http(url)} (or https://{url} for a TLS front)",
            EXIT_USAGE,
        )


def checked_url(url: str, secret: str, *, allow_insecure_http: bool = False) -> SplitResult:
    """`--url` as a server's address: https:// unless a scheme is given, a host, and no
    credentials, query or fragment; plain http:// only to a loopback host unless allowed, since
    `secret` (what the requests carry) would cross the network in clear text."""
    if "://" not in url:
        _no_scheme(url)
        url = "https://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(f"--url must be an http(s):// URL with a host, got {url!r}", EXIT_USAGE)
    if parts.query or parts.fragment or parts.username or parts.password:
        raise CliError("--url takes no credentials, query or fragment", EXIT_USAGE)
    if parts.scheme == "http" and not is_loopback(parts.hostname) and not allow_insecure_http:
        raise CliError(
            f"refusing plain http:// to non-loopback host {parts.hostname}: {secret} would "
            "cross the network in clear text; use https:// (or --allow-insecure-http)",
            EXIT_USAGE,
        )
    return parts
