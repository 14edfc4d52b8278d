"""`with` for the memory store's objects that hold an open database: the block's end closes
them, however it ends."""

from __future__ import annotations

from typing import Self


class ClosedOnExit:
    """A base whose `with` block returns the object itself and calls its `close` at the end."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
