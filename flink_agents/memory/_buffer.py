"""Per-action buffering: an action writes to an overlay that is applied only if it returns.

The net change an action made is a ``MemoryDelta`` over the flattened map, which is also
what the action log records: applying it again rebuilds exactly the same map, object
markers and field lists included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flink_agents.memory._state import StateMap

_REMOVED = object()
_ABSENT = object()


@dataclass
class MemoryDelta:
    """The net change to one flattened map: an optional clear, then puts and removals.

    Never changed once made (deltas are shared: the action log's records, the empty
    ``NO_CHANGE``). Not a frozen dataclass only because one is made per action on the hot
    path, and a frozen one's constructor costs several times as much."""

    cleared: bool = False
    puts: dict[str, Any] = field(default_factory=dict)
    removals: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        return not (self.cleared or self.puts or self.removals)

    def apply_to(self, state: StateMap) -> None:
        if self.cleared:
            state.clear()
        for key in self.removals:
            state.remove(key)
        for key, value in self.puts.items():
            state.put(key, value)


class BufferedState:
    """A ``StateMap`` overlay: reads see the buffered writes, the base is untouched until
    ``delta()`` is applied."""

    __slots__ = ("_base", "_cleared", "_removed", "_writes")

    def __init__(self, base: StateMap) -> None:
        self._base = base
        self._writes: dict[str, Any] = {}
        self._cleared = False
        self._removed = False
        """Whether a removal was ever buffered (else every write is a put)."""

    def load(self, delta: MemoryDelta) -> None:
        """Buffer the writes of ``delta`` (on an empty buffer: its ``delta()`` is then
        ``delta``)."""
        self._cleared = delta.cleared
        self._writes.update(delta.puts)
        for key in delta.removals:
            self.remove(key)

    def get(self, key: str) -> Any:
        written = self._writes.get(key, _ABSENT)
        if written is _ABSENT:
            return None if self._cleared else self._base.get(key)
        return None if written is _REMOVED else written

    def contains(self, key: str) -> bool:
        written = self._writes.get(key, _ABSENT)
        if written is _ABSENT:
            return False if self._cleared else self._base.contains(key)
        return written is not _REMOVED

    def put(self, key: str, value: Any) -> None:
        self._writes[key] = value

    def remove(self, key: str) -> None:
        self._writes[key] = _REMOVED
        self._removed = True

    def clear(self) -> None:
        self._writes.clear()
        self._cleared = True

    def apply_to(self, state: StateMap) -> bool:
        """Apply the buffered writes to ``state`` as ``delta().apply_to`` would (a clear,
        then removals, then puts), without making the delta; whether there were any."""
        writes = self._writes
        if self._cleared:
            state.clear()
        elif not writes:
            return False
        if self._removed:
            for key, value in writes.items():
                if value is _REMOVED:
                    state.remove(key)
            for key, value in writes.items():
                if value is not _REMOVED:
                    state.put(key, value)
        else:
            for key, value in writes.items():
                state.put(key, value)
        return True

    def delta(self) -> MemoryDelta:
        """The net change so far."""
        if not self._removed:  # every write a put
            return MemoryDelta(self._cleared, dict(self._writes))
        puts = {k: v for k, v in self._writes.items() if v is not _REMOVED}
        removals = tuple(k for k, v in self._writes.items() if v is _REMOVED)
        return MemoryDelta(self._cleared, puts, removals)
