"""The memory interface actions see: a tree of objects addressed by dotted paths (seed 000)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic_core import core_schema

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler

    from flink_agents.api._context import RunnerContext


class MemoryType(StrEnum):
    """Which memory a ``MemoryRef`` points into."""

    SENSORY = "sensory"
    SHORT_TERM = "short_term"


class MemoryRef:
    """A reference to a field of sensory or short-term memory, as ``set`` returns it: small
    to put in an event instead of the value, read back with ``get(ref)`` or
    ``ref.resolve(ctx)`` (by then, the field's value at that time).

    Attributes:
        memory_type: the memory it points into.
        path: the field's path from that memory's root.
    """

    __slots__ = ("memory_type", "path")

    def __init__(
        self, memory_type: MemoryType | str = MemoryType.SHORT_TERM, path: str = ""
    ) -> None:
        if not path:
            raise ValueError("a MemoryRef needs the path of a field")
        if type(memory_type) is not MemoryType:  # (the enum's call costs ~1 us)
            memory_type = MemoryType(memory_type)
        object.__setattr__(self, "memory_type", memory_type)
        object.__setattr__(self, "path", path)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a MemoryRef cannot be changed")

    @staticmethod
    def create(memory_type: MemoryType | str, path: str) -> MemoryRef:
        """A reference to ``path`` of the memory ``memory_type``."""
        return MemoryRef(memory_type, path)

    def resolve(self, ctx: RunnerContext) -> Any:
        """The value the field holds now, in ``ctx``'s run."""
        memory = ctx.sensory_memory if self.memory_type is MemoryType.SENSORY else None
        return (memory or ctx.short_term_memory).get(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MemoryRef):
            return NotImplemented
        return (self.memory_type, self.path) == (other.memory_type, other.path)

    def __hash__(self) -> int:
        return hash((self.memory_type, self.path))

    def __repr__(self) -> str:
        return f"MemoryRef({self.memory_type.value!r}, {self.path!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (MemoryRef, (self.memory_type.value, self.path))

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # A field of this type in an event: the object itself, shown as its two strings.
        return core_schema.no_info_plain_validator_function(
            _memory_ref,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda ref: {"memory_type": ref.memory_type.value, "path": ref.path}
            ),
        )


def _memory_ref(value: Any) -> MemoryRef:
    if isinstance(value, MemoryRef):
        return value
    if isinstance(value, dict) and set(value) == {"memory_type", "path"}:
        return MemoryRef(value["memory_type"], value["path"])
    raise ValueError(f"not a MemoryRef: {value!r}")


class MemoryObject(ABC):
    """An object in sensory or short-term memory.

    Paths are relative to this object and dotted (``"z.n.j"``); no segment may be empty.
    Values are snapshots: ``set`` stores a copy and ``get`` returns a copy, so mutating a
    list you read changes nothing until you ``set`` it again. Storable values are None,
    bool, int, float, str, bytes, lists and str-keyed dicts of those, and any other object
    that pickles (pydantic models, tuples, sets, your own classes defined at module level):
    those are stored as Flink state stores them, pickled, so they come back as copies.

    Writes made inside an action are buffered and become visible to other actions only
    when the action returns; they are discarded if it raises.
    """

    @abstractmethod
    def get(self, path: str | MemoryRef) -> Any:
        """The value at ``path`` (or at a ``MemoryRef``'s path, from the root): a copy of a
        plain value, a ``MemoryObject`` for an object, or None when nothing is there."""

    @abstractmethod
    def set(self, path: str, value: Any) -> MemoryRef:
        """Store ``value`` at ``path``, creating missing intermediate objects; returns a
        reference to the field.

        Replaces whatever was there, an object and its whole subtree included. A
        ``MemoryObject`` value is copied with its subtree.

        Raises:
            MemoryPathError: the path is malformed or goes through a plain value.
            MemoryValueError: the value cannot be stored.
        """

    @abstractmethod
    def new_object(self, path: str, *, overwrite: bool = True) -> MemoryObject:
        """Create an empty object at ``path`` (replacing what was there, as ``set`` does:
        seed 001) and return it.

        Raises:
            MemoryPathError: ``path`` holds a plain value and ``overwrite`` is False (the
                default of Apache Flink Agents, whose agents pass it).
        """

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
