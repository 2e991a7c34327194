"""The minimal map interface flattened memory needs, and its dict implementation.

PyFlink's ``MapState`` already has exactly these five methods, so the Flink dispatcher hands
its ``MapState`` straight to the same memory code the local runner uses over a dict.
"""

from __future__ import annotations

from typing import Any, Protocol


class StateMap(Protocol):
    """A string-keyed map. ``get`` returns None for a missing key. A map may also have
    ``put_all(dict)``, which ``CachedState`` can use to write several entries at once."""

    def get(self, key: str) -> Any: ...

    def put(self, key: str, value: Any) -> None: ...

    def remove(self, key: str) -> None: ...

    def contains(self, key: str) -> bool: ...

    def clear(self) -> None: ...


class DictState:
    """A ``StateMap`` over a plain dict: the local runner's memory and the tests' reference."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        self.data: dict[str, Any] = {} if data is None else data

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value

    def put_all(self, entries: dict[str, Any]) -> None:
        self.data.update(entries)

    def remove(self, key: str) -> None:
        self.data.pop(key, None)

    def contains(self, key: str) -> bool:
        return key in self.data

    def clear(self) -> None:
        self.data.clear()

    def __len__(self) -> int:
        return len(self.data)
