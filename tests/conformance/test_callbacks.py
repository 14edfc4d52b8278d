"""STORE-2: a transaction callback that returns an awaitable is refused on every backend."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from aidememo.conformance.harness import TENANT, Fixture
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.ports import ReadTx, WriteTx
from tests.conformance.conftest import Backend


class _Awaitable:
    """An awaitable that is not a coroutine."""

    def __await__(self) -> Generator[Any, None, None]:
        yield None


def test_store2_a_callback_returning_an_awaitable_is_storage_failure_and_leaves_no_trace(
    backend: Backend,
) -> None:
    fx = Fixture.create(backend.open)
    fx.put("command_create", "a")

    async def coroutine(tx: WriteTx) -> None:
        tx.insert_tenant("tenant_async", 1)

    def awaitable(tx: WriteTx) -> _Awaitable:
        tx.insert_tenant("tenant_awaitable", 1)
        return _Awaitable()

    for callback in (coroutine, awaitable):
        with pytest.raises(AidememoError) as err:
            fx.store.transaction(callback)
        assert err.value.code is ErrorCode.STORAGE_FAILURE
    assert not fx.store.read(lambda tx: tx.tenant_exists("tenant_async"))
    assert not fx.store.read(lambda tx: tx.tenant_exists("tenant_awaitable"))
    assert fx.put("command_next", "b").project_seq == 2
    fx.store.close()


def test_store2_a_read_callback_returning_an_awaitable_is_storage_failure(
    backend: Backend,
) -> None:
    fx = Fixture.create(backend.open)

    async def coroutine(tx: ReadTx) -> bool:
        return tx.tenant_exists(TENANT)

    with pytest.raises(AidememoError) as err:
        fx.store.read(coroutine)
    assert err.value.code is ErrorCode.STORAGE_FAILURE
    assert fx.store.read(lambda tx: tx.tenant_exists(TENANT))
    fx.store.close()


def test_store2_results_already_seen_plain_never_let_an_awaitable_through() -> None:
    """The guard learns which result types are plain; a generator-based coroutine shares its
    type with plain generators, and an awaitable class is never learned."""
    import types

    from aidememo.stores.guard import not_awaitable

    def plain() -> Generator[int, None, None]:
        yield 1

    @types.coroutine
    def old_style() -> Generator[Any, None, None]:
        yield None

    for _ in range(2):
        assert not_awaitable(7) == 7 and not_awaitable(None) is None
        generator = plain()
        assert not_awaitable(generator) is generator
        for awaitable in (old_style(), _Awaitable()):
            with pytest.raises(AidememoError) as err:
                not_awaitable(awaitable)
            assert err.value.code is ErrorCode.STORAGE_FAILURE
