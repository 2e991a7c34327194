"""A bound shared by the steps of one wait (closing waits for calls, then writes, then
stores, all within one bound)."""

from __future__ import annotations

import time


class Deadline:
    """What is left of ``seconds`` from when it was made (None: no bound)."""

    __slots__ = ("_at",)

    def __init__(self, seconds: float | None) -> None:
        self._at = None if seconds is None else time.monotonic() + seconds

    def left(self) -> float | None:
        """Seconds left, never below 0 (None: no bound)."""
        return None if self._at is None else max(0.0, self._at - time.monotonic())
