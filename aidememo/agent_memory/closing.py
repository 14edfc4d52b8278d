"""`with` for the memory store's objects that hold an open database: the block's end closes
them, however it ends."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self


class ClosedOnExit(ABC):
    """A base whose `with` block returns the object itself and calls its `close` at the end."""

    @abstractmethod
    def close(self) -> None:
        """Release what the object holds open."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
