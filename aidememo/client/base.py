"""`ClientBase`: what `Client` and `AsyncClient` share besides their methods' plans: the
settings a client is made with and the project it works in.

The two clients differ only in their transport (`Transport` or `AsyncTransport`) and in
whether they await each call, so each names its default transport and drives the plans of
`aidememo.client.plans` its own way; everything else is here, once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Generic, TypeVar

from aidememo.client import plans as p
from aidememo.client.transport import Timeout, Wire

if TYPE_CHECKING:
    import httpx

TransportT = TypeVar("TransportT")


class ClientBase(ABC, Generic[TransportT]):
    """A member of one project, over HTTP.

    `base_url` is the service (`http://127.0.0.1:3030`, a Worker's URL); `token` the member's
    bearer token; `project_id` the project every method works in. `timeout` is seconds to
    connect and for each read (or `Timeouts`, or an `httpx.Timeout`); `retries` how often a
    call that got no answer is sent again, identically (default 1, CLIENT-1); `transport` a
    `Transport` for `Client`, an `AsyncTransport` for `AsyncClient`
    (`aidememo.client.transport`; the default one keeps connections alive, tests plug in
    their own, and `aidememo.client.httpx_transport` adapts an httpx transport, such as one
    through a proxy); `headers` are added to every request.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        project_id: str,
        *,
        timeout: Timeout | httpx.Timeout = 10.0,
        retries: int = 1,
        transport: TransportT | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be at least 0")
        self._ctx = p.Context(project_id, retries)
        self._wire = Wire(base_url, token, timeout, headers)
        self._transport: TransportT = transport or self._default_transport()
        self._artifact_grants: bool | None = None  # how this server moves bodies (GRANT-8)

    @abstractmethod
    def _default_transport(self) -> TransportT:
        """The transport of a client given none."""

    @property
    def project_id(self) -> str:
        return self._ctx.project_id
