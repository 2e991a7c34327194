"""What long-term memory tells whoever watches it: the runtime's metrics."""

from __future__ import annotations

from typing import Protocol


class LongTermObserver(Protocol):
    """Told of long-term memory and knowledge operations (any thread)."""

    def long_term_memory_added(self, n: int = 1) -> None:
        """``n`` items were added to a memory set or a knowledge set."""

    def long_term_memory_searched(self) -> None:
        """A memory set or a knowledge set was searched."""

    def long_term_memory_compacted(self) -> None:
        """A memory set was brought back under its capacity."""
