"""The order in which the local runner reports what runs emit: ``InputOrder``."""

from __future__ import annotations

from typing import Any


class InputOrder:
    """A reorder buffer over input positions, so that what runs emit is reported in the
    order of their inputs whatever the order in which they end.

    Every input gets the next position when it arrives (``admit``). What the run of an
    input emits is ``add``-ed under its position, in emission order, and the position is
    ``close``-d once that run has ended. ``release`` hands back everything no later emission
    can precede: the emissions of each closed position from the oldest not yet released,
    then what the first open one has emitted so far, since nothing before it is missing. So
    the concatenation of every release is the same however the runs overlap: positions in
    order, the emissions of each in the order they were made; a run that waits holds back
    what later inputs' runs emitted until it ends (memory is the bound, as for a bounded
    local run).
    """

    __slots__ = ("_held", "_next", "_oldest", "_open")

    def __init__(self) -> None:
        self._next = 0
        """The position the next input gets."""
        self._oldest = 0
        """The oldest position whose emissions are not all released."""
        self._open: set[int] = set()
        """Positions admitted and not closed: their runs may still emit."""
        self._held: dict[int, list[Any]] = {}
        """What each position emitted that is not released yet, in emission order."""

    def admit(self) -> int:
        """A position for a new input, after every other: its run is open until ``close``."""
        position = self._next
        self._next += 1
        self._open.add(position)
        return position

    def add(self, position: int, item: Any) -> None:
        """``item``, emitted by the run of ``position``, after what it emitted before."""
        self._held.setdefault(position, []).append(item)

    def close(self, position: int) -> None:
        """The run of ``position`` has ended: it emits nothing more."""
        self._open.discard(position)

    def released(self, position: int) -> bool:
        """Whether everything ``position`` emitted and will emit has been released."""
        return position < self._oldest

    def release(self) -> list[Any]:
        """What may be reported now, in order (see the class docstring)."""
        out: list[Any] = []
        held, open_ = self._held, self._open
        while self._oldest < self._next:
            items = held.pop(self._oldest, None)
            if items:
                out += items
            if self._oldest in open_:
                break  # still running: later positions wait for it
            self._oldest += 1
        return out

    def flush(self) -> list[Any]:
        """Close every position and release everything held: the runs still open will emit
        nothing more here (the runner was restored, or gave up waiting for them)."""
        self._open.clear()
        return self.release()
