"""Durable Object namespaces, stubs and contexts on real SQLite.

- `Namespace.getByName(name)` = `get(idFromName(name))`: one live instance per name, created on
  the first call; its storage (a SQLite file under the runtime's folder) outlives it, so
  `evict(name)` models the runtime dropping an idle object: the next call constructs a new
  instance that wakes on the same data.
- A stub call `await stub.method(*args)` is delivered like workerd delivers RPC: after the
  object's `blockConcurrencyWhile` work, one call at a time per object (input gate), with every
  argument and result copied through `clone` (what structured clone accepts: dicts with string
  keys, lists, str, int, float, bool, None; the SDK refuses tuples and bytearrays, and our
  payloads never carry bytes), results coming back as `JsDict` like `python_from_rpc` gives.
  An exception escaping the object reaches the caller as `RpcError` with only its message,
  as a JS error does.
- `fail_next(method)` makes the next call of `method` on any object of the namespace fail
  before it is delivered (a crash between two steps of an orchestration).
- Alarms: `ctx.storage.setAlarm(ms | datetime)`, `getAlarm()`, `deleteAlarm()`; `Runtime.
  fire_alarms()` runs `alarm()` on every object whose alarm time has come.
- `stub.fetch(request)` delivers a `workers.Request` to the object's `fetch` (no clone).
- Hibernatable WebSockets (`tests.edge.runtime.websockets`): `ctx.acceptWebSocket(ws, tags)`,
  `ctx.getWebSockets(tag)` (the open ones), `setWebSocketAutoResponse`. Accepted sockets
  belong to the object's name and outlive its instance: `evict(name)` is hibernation, and the
  next event (a socket message or close, an alarm, a call) re-creates the object.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aidememo.ports import Clock
from tests.doubles.do_storage import DoStorage, JsDict
from tests.edge.runtime.websockets import OPEN, WebSocket


class RpcError(Exception):
    """A JS error thrown across RPC: its message survives, its Python type does not."""


def clone(value: Any, where: str = "value") -> Any:
    """A deep copy of what structured clone over Workers RPC would carry; refuses the rest."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        copied = JsDict()
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: dict keys must be str, got {type(key).__name__}")
            copied[key] = clone(item, f"{where}.{key}")
        return copied
    if isinstance(value, list):
        return [clone(item, f"{where}[]") for item in value]
    raise TypeError(f"{where}: {type(value).__name__} cannot be sent over RPC.")


class Storage(DoStorage):
    """`ctx.storage`: the SQL double plus the alarm API."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        # Durability across a process crash is not what these tests check; eviction keeps
        # the file, which is what they need. Skipping fsync keeps the suite quick.
        self._conn.execute("PRAGMA synchronous = OFF")
        self.alarm_ms: int | None = None

    async def setAlarm(self, when: int | float | datetime.datetime) -> None:
        if isinstance(when, datetime.datetime):
            when = when.timestamp() * 1000
        self.alarm_ms = int(when)

    async def getAlarm(self) -> int | None:
        return self.alarm_ms

    async def deleteAlarm(self) -> None:
        self.alarm_ms = None


class ObjectId:
    """`DurableObjectId` of a named object."""

    def __init__(self, name: str) -> None:
        self.name = name

    def toString(self) -> str:
        return hashlib.sha256(self.name.encode()).hexdigest()

    def equals(self, other: ObjectId) -> bool:
        return self.name == other.name


class Context:
    """`DurableObjectState`: `id`, `storage`, `blockConcurrencyWhile`, hibernatable
    WebSockets."""

    def __init__(
        self,
        object_id: ObjectId,
        storage: Storage,
        sockets: list[tuple[WebSocket, list[str]]] | None = None,
        deliver: Callable[..., None] | None = None,
    ) -> None:
        self.id = object_id
        self.storage = storage
        self.gate: list[Awaitable[Any]] = []
        self.sockets = [] if sockets is None else sockets
        self._deliver = deliver
        self.auto_response: Any = None

    def acceptWebSocket(self, ws: WebSocket, tags: list[str] | None = None) -> None:
        if not isinstance(ws, WebSocket) or ws.accepted:
            raise TypeError("acceptWebSocket takes the server end of a new WebSocketPair")
        if tags is not None and (
            not isinstance(tags, list)
            or len(tags) > 10
            or not all(isinstance(t, str) for t in tags)
        ):
            raise TypeError("tags must be an array of at most 10 strings")
        ws.accepted = True
        ws.deliver = self._deliver
        self.sockets.append((ws, list(tags or [])))

    def getWebSockets(self, tag: str | None = None) -> list[WebSocket]:
        return [
            ws
            for ws, tags in self.sockets
            if ws.readyState == OPEN and (tag is None or tag in tags)
        ]

    def setWebSocketAutoResponse(self, pair: Any = None) -> None:
        self.auto_response = pair

    def blockConcurrencyWhile(self, callback: Callable[[], Any]) -> None:
        """Calls wait until `callback` (sync or async) has finished."""
        result = callback()
        if inspect.isawaitable(result):
            self.gate.append(result)


class Instance:
    """A live object with its input gate."""

    def __init__(self, obj: Any, ctx: Context) -> None:
        self.obj = obj
        self.ctx = ctx
        self.lock = asyncio.Lock()


class Namespace:
    """`DurableObjectNamespace` of one class."""

    def __init__(self, cls: type, env: Any, folder: Path, clock: Clock) -> None:
        self.cls = cls
        self.env = env
        self.folder = folder
        self.clock = clock
        self.live: dict[str, Instance] = {}
        self.storages: dict[str, Storage] = {}
        self.failures: dict[str, int] = {}
        self.calls: list[tuple[str, str]] = []
        # Accepted WebSockets by object name: they survive the instance (hibernation).
        self.sockets: dict[str, list[tuple[WebSocket, list[str]]]] = {}
        # Runs a coroutine to completion (the runtime's loop); set by the harness.
        self.runner: Callable[[Any], Any] | None = None
        self.created = 0  # instances constructed (a re-creation after hibernation counts)

    def idFromName(self, name: str) -> ObjectId:
        return ObjectId(name)

    def get(self, object_id: ObjectId) -> Stub:
        return Stub(self, object_id.name)

    def getByName(self, name: str) -> Stub:
        return self.get(self.idFromName(name))

    def instance(self, name: str) -> Instance:
        live = self.live.get(name)
        if live is None:
            storage = self.storages.get(name)
            if storage is None:
                file = self.folder / f"{hashlib.sha256(name.encode()).hexdigest()[:24]}.sqlite"
                storage = self.storages[name] = Storage(str(file))
            sockets = self.sockets.setdefault(name, [])

            def deliver(method: str, *args: Any) -> None:
                assert self.runner is not None, "no runtime loop to deliver socket events"
                self.runner(self.event(name, method, *args))

            ctx = Context(ObjectId(name), storage, sockets, deliver)
            live = self.live[name] = Instance(self.cls(ctx, self.env), ctx)
            self.created += 1
        return live

    async def event(self, name: str, method: str, *args: Any) -> Any:
        """Deliver a runtime event (`fetch`, `alarm`, `webSocketMessage`, ...) to the object,
        re-created if it was evicted, after its input gate; nothing is cloned. A handler the
        class does not define is skipped (workerd logs it)."""
        live = self.instance(name)
        async with live.lock:
            while live.ctx.gate:
                await live.ctx.gate.pop(0)
            target = getattr(live.obj, method, None)
            if target is None:
                return None
            result = target(*args)
            if inspect.isawaitable(result):
                result = await result
            return result

    def hibernate(self, name: str) -> None:
        """Drop the instance while its WebSockets stay open (WebSocket hibernation)."""
        self.evict(name)

    def evict(self, name: str | None = None) -> None:
        """Drop live instances (all, or one); their storage stays. The sockets an instance
        held (PostgreSQL mode) die with it, as they do with an evicted isolate."""
        for key in [name] if name is not None else list(self.live):
            live = self.live.pop(key, None)
            if live is not None:
                _close_sockets(live.obj)

    def fail_next(self, method: str, times: int = 1) -> None:
        self.failures[method] = self.failures.get(method, 0) + times

    def names(self) -> list[str]:
        """Every object that has storage."""
        return sorted(self.storages)

    def close(self) -> None:
        self.evict()
        for storage in self.storages.values():
            storage.close()
        self.storages.clear()


def _close_sockets(obj: Any) -> None:
    """Close the PostgreSQL connections of an object's store, if it holds any."""
    from aidememo.stores.postgres import PostgresStore

    store = getattr(obj, "_store", None)
    if isinstance(store, PostgresStore):
        store.close()


class Stub:
    """`DurableObjectStub`: attribute access gives the object's RPC methods."""

    def __init__(self, namespace: Namespace, name: str) -> None:
        self._namespace = namespace
        self.name = name

    async def fetch(self, request: Any) -> Any:
        """`stub.fetch(request)`: the object's `fetch` handler with the request as it is."""
        self._namespace.calls.append((self.name, "fetch"))
        return await self._namespace.event(self.name, "fetch", request)

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        if method.startswith("_"):
            raise AttributeError(method)

        async def invoke(*args: Any) -> Any:
            return await self._namespace_call(method, args)

        return invoke

    async def _namespace_call(self, method: str, args: tuple[Any, ...]) -> Any:
        ns = self._namespace
        sent = [clone(arg, f"{method} argument") for arg in args]
        if ns.failures.get(method):
            ns.failures[method] -= 1
            raise RpcError(f"injected failure of {method}")
        ns.calls.append((self.name, method))
        live = ns.instance(self.name)
        async with live.lock:
            while live.ctx.gate:
                await live.ctx.gate.pop(0)
            target = getattr(live.obj, method, None)
            if target is None:
                raise RpcError(f"no RPC method {method}")
            try:
                result = target(*sent)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as exc:
                raise RpcError(f"{type(exc).__name__}: {exc}") from None
        return clone(result, f"{method} result")
