"""The memory interface actions see: a tree of objects addressed by dotted paths (seed 000)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class MemoryObject(ABC):
    """An object in sensory or short-term memory.

    Paths are relative to this object and dotted (``"z.n.j"``); no segment may be empty.
    Values are snapshots: ``set`` stores a copy and ``get`` returns a copy, so mutating a
    list you read changes nothing until you ``set`` it again. Storable values are None,
    bool, int, float, str, bytes, lists and str-keyed dicts of those, and pydantic models.

    Writes made inside an action are buffered and become visible to other actions only
    when the action returns; they are discarded if it raises.
    """

    @abstractmethod
    def get(self, path: str) -> Any:
        """The value at ``path``: a copy of a plain value, a ``MemoryObject`` for an object,
        or None when nothing is there."""

    @abstractmethod
    def set(self, path: str, value: Any) -> None:
        """Store ``value`` at ``path``, creating missing intermediate objects.

        Replaces whatever was there, an object and its whole subtree included. A
        ``MemoryObject`` value is copied with its subtree.

        Raises:
            MemoryPathError: the path is malformed or goes through a plain value.
            MemoryValueError: the value cannot be stored.
        """

    @abstractmethod
    def new_object(self, path: str) -> MemoryObject:
        """Create an empty object at ``path`` (replacing what was there) and return it."""

    @abstractmethod
    def get_object(self, path: str) -> MemoryObject | None:
        """The object at ``path``, or None when nothing is there.

        Raises:
            MemoryPathError: ``path`` holds a plain value, not an object.
        """

    @abstractmethod
    def is_exist(self, path: str) -> bool:
        """Whether a field (a value, None included, or an object) exists at ``path``."""

    @abstractmethod
    def get_field_names(self) -> list[str]:
        """Names of the direct fields of this object, in creation order."""

    @abstractmethod
    def get_fields(self) -> dict[str, Any]:
        """The direct fields of this object: plain values and ``MemoryObject`` s."""

    @abstractmethod
    def delete(self, path: str) -> bool:
        """Remove the field at ``path`` and, for an object, its whole subtree.

        Returns:
            True when something was removed, False when nothing was there.
        """
