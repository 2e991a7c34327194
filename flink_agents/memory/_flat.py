"""Flattened memory (seed 000): a tree of objects stored in one string-keyed map.

Layout: the map key is the absolute dotted path from the root; the root's key is ``""``.
A plain value is stored as itself. An object is stored as an ``ObjectMarker`` that lists
its direct field names, so reading an object never scans the map.

Invariant: a key exists if and only if its parent exists as an object whose marker lists
it. Hence finding the parent marker proves every ancestor exists, and each operation costs
O(depth) or O(direct fields), never O(size of the map).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flink_agents.api import (
    MemoryObject,
    MemoryPathError,
    MemoryRef,
    MemoryType,
    MemoryValueError,
)
from flink_agents.memory._state import StateMap
from flink_agents.memory._values import IMMUTABLE, checked_copy, copy_out

ROOT = ""


class ObjectMarker:
    """The stored form of an object: its direct field names, in creation order."""

    __slots__ = ("fields",)

    def __init__(self, fields: tuple[str, ...] = ()) -> None:
        self.fields = fields

    def with_field(self, name: str) -> ObjectMarker:
        return ObjectMarker((*self.fields, name))

    def without_field(self, name: str) -> ObjectMarker:
        return ObjectMarker(tuple(f for f in self.fields if f != name))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectMarker) and other.fields == self.fields

    def __hash__(self) -> int:
        return hash(self.fields)

    def __repr__(self) -> str:
        return f"ObjectMarker({list(self.fields)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ObjectMarker, (self.fields,))


def join(base: str, path: str) -> str:
    """The absolute key of relative ``path`` under the object at ``base``."""
    return f"{base}.{path}" if base else path


_REFS: dict[MemoryType, dict[str, MemoryRef]] = {kind: {} for kind in MemoryType}
"""The references ``set`` returned, by memory and key. A reference cannot change and names
no key of the stream, so one object serves every key's memory: a write costs a dict lookup
for its reference, not an object."""

REFS_KEPT = 16384
"""References kept per memory: paths are few, but a path made from the data could grow
the table with every key; past this many it starts again."""


def check_path(path: Any) -> str:
    """Validate a relative path given by a user."""
    if not isinstance(path, str):
        raise MemoryPathError(f"memory path must be a str, got {type(path).__name__}: {path!r}")
    if not path or "" in path.split("."):
        raise MemoryPathError(f"invalid memory path {path!r}: empty path segment")
    return path


def split_parent(key: str) -> tuple[str, str]:
    """``"a.b.c"`` -> ``("a.b", "c")``; ``"a"`` -> ``("", "a")``."""
    parent, _, name = key.rpartition(".")
    return parent, name


class FlatMemory:
    """Memory operations on absolute keys over any ``StateMap``."""

    __slots__ = ("kind", "refs", "state")

    def __init__(self, state: StateMap, kind: MemoryType = MemoryType.SHORT_TERM) -> None:
        self.state = state
        self.kind = kind
        """The memory it is (what a ``MemoryRef`` to one of its fields names)."""
        self.refs = _REFS[kind]

    def ref(self, key: str) -> MemoryRef:
        """The reference to the field at ``key``."""
        ref = self.refs.get(key)
        if ref is None:
            if len(self.refs) >= REFS_KEPT:
                self.refs.clear()
            ref = self.refs[key] = MemoryRef(self.kind, key)
        return ref

    def root(self) -> StoredMemoryObject:
        return StoredMemoryObject(self, ROOT)

    # -- reads ---------------------------------------------------------------------------

    def read(self, key: str) -> Any:
        stored = self.state.get(key)
        if type(stored) is ObjectMarker:
            return StoredMemoryObject(self, key)
        return copy_out(stored)

    def marker(self, key: str) -> ObjectMarker | None:
        stored = self.state.get(key)
        if type(stored) is ObjectMarker:
            return stored
        if key == ROOT and stored is None:
            return ObjectMarker()
        return None

    def exists(self, key: str) -> bool:
        return self.state.contains(key)

    # -- writes --------------------------------------------------------------------------

    def write_value(self, key: str, value: Any) -> None:
        if type(value) is ObjectMarker:  # it would read back as an object
            raise MemoryValueError(f"cannot store ObjectMarker at '{key}': memory's own marker")
        self._write(key, checked_copy(value, key))

    def write_object(self, key: str) -> None:
        self._write(key, ObjectMarker())

    def write_copy(self, key: str, source: StoredMemoryObject) -> None:
        """Copy ``source`` and its subtree to ``key``; safe when ``key`` lies inside it."""
        entries = list(source.memory.iter_subtree(source.key))
        if source.memory is self and key == source.key:
            return
        self._write(key, ObjectMarker())
        for suffix, stored in entries:
            copied = stored if type(stored) is ObjectMarker else copy_out(stored)
            self.state.put(key + suffix, copied)

    def delete(self, key: str) -> bool:
        parent, name = split_parent(key)
        parent_marker = self.marker(parent)
        if parent_marker is None or name not in parent_marker.fields:
            return False
        self._drop_subtree(key)
        self.state.remove(key)
        self.state.put(parent, parent_marker.without_field(name))
        return True

    def clear(self) -> None:
        self.state.clear()

    def iter_subtree(self, key: str) -> Iterator[tuple[str, Any]]:
        """``(suffix, stored)`` for the object at ``key`` and everything under it, pre-order.

        The suffix is relative to ``key``: ``""`` for the object itself, ``".a.b"`` below it.
        """
        marker = self.marker(key)
        if marker is not None:
            yield from self._walk(key, "", marker)

    def _walk(self, key: str, suffix: str, marker: ObjectMarker) -> Iterator[tuple[str, Any]]:
        yield suffix, marker
        for name in marker.fields:
            stored = self.state.get(join(key, name))
            if type(stored) is ObjectMarker:
                yield from self._walk(join(key, name), f"{suffix}.{name}", stored)
            else:
                yield f"{suffix}.{name}", stored

    # -- internals -----------------------------------------------------------------------

    def _write(self, key: str, stored: Any) -> None:
        parent, name = split_parent(key)
        parent_marker = self._ensure_object(parent, key)
        if name in parent_marker.fields:
            self._drop_subtree(key)
        else:
            self.state.put(parent, parent_marker.with_field(name))
        self.state.put(key, stored)

    def _ensure_object(self, key: str, requested: str) -> ObjectMarker:
        """The marker of the object at ``key``, creating it and missing ancestors."""
        stored = self.state.get(key)
        if type(stored) is ObjectMarker:
            return stored
        if key == ROOT:
            marker = ObjectMarker()
            self.state.put(ROOT, marker)
            return marker
        if stored is None and not self.state.contains(key):
            parent, name = split_parent(key)
            parent_marker = self._ensure_object(parent, requested)
            self.state.put(parent, parent_marker.with_field(name))
            marker = ObjectMarker()
            self.state.put(key, marker)
            return marker
        raise MemoryPathError(f"cannot write '{requested}': '{key}' holds a value, not an object")

    def _drop_subtree(self, key: str) -> None:
        """Remove everything below the object at ``key`` (no-op for a plain value)."""
        stored = self.state.get(key)
        if type(stored) is not ObjectMarker:
            return
        for name in stored.fields:
            child = join(key, name)
            self._drop_subtree(child)
            self.state.remove(child)


class StoredMemoryObject(MemoryObject):
    """A ``MemoryObject`` handle: a position (absolute key) in a ``FlatMemory``."""

    __slots__ = ("key", "memory")

    def __init__(self, memory: FlatMemory, key: str) -> None:
        self.memory = memory
        self.key = key

    def get(self, path: str | MemoryRef) -> Any:
        if type(path) is str and path and "." not in path:
            # One field, no check needed: ``FlatMemory.read`` inlined (read on every step).
            key = f"{self.key}.{path}" if self.key else path
            stored = self.memory.state.get(key)
            kind = type(stored)
            if kind in IMMUTABLE:
                return stored
            if kind is ObjectMarker:
                return StoredMemoryObject(self.memory, key)
            return copy_out(stored)
        if type(path) is MemoryRef:  # a path from the root
            return self.memory.read(check_path(path.path))
        return self.memory.read(join(self.key, check_path(path)))

    def set(self, path: str, value: Any) -> MemoryRef:
        if type(value) in IMMUTABLE and type(path) is str and path and "." not in path:
            # A plain value for a field the object already has, which holds no object:
            # the common case, one put (what ``write_value`` would do, without its checks).
            key = f"{self.key}.{path}" if self.key else path  # ``join``, inlined
            state = self.memory.state
            marker = state.get(self.key)
            if (
                type(marker) is ObjectMarker
                and path in marker.fields
                and type(state.get(key)) is not ObjectMarker
            ):
                state.put(key, value)
                return self.memory.ref(key)
        target = join(self.key, check_path(path))
        if isinstance(value, StoredMemoryObject):
            self.memory.write_copy(target, value)
        elif isinstance(value, MemoryObject):
            raise MemoryValueError(
                f"cannot store {type(value).__name__} at '{target}': unknown MemoryObject kind"
            )
        else:
            self.memory.write_value(target, value)
        return self.memory.ref(target)

    def new_object(self, path: str, *, overwrite: bool = True) -> MemoryObject:
        target = join(self.key, check_path(path))
        if not overwrite and self.memory.exists(target) and self.memory.marker(target) is None:
            raise MemoryPathError(f"'{target}' holds a value, not an object (overwrite=False)")
        self.memory.write_object(target)
        return StoredMemoryObject(self.memory, target)

    def get_object(self, path: str) -> MemoryObject | None:
        target = join(self.key, check_path(path))
        found = self.memory.read(target)
        if found is None or isinstance(found, MemoryObject):
            if found is None and self.memory.exists(target):
                raise MemoryPathError(f"'{target}' holds a value (None), not an object")
            return found
        raise MemoryPathError(f"'{target}' holds a value ({type(found).__name__}), not an object")

    def is_exist(self, path: str) -> bool:
        return self.memory.exists(join(self.key, check_path(path)))

    def get_field_names(self) -> list[str]:
        marker = self.memory.marker(self.key)
        return list(marker.fields) if marker is not None else []

    def get_fields(self) -> dict[str, Any]:
        return {name: self.memory.read(join(self.key, name)) for name in self.get_field_names()}

    def delete(self, path: str) -> bool:
        return self.memory.delete(join(self.key, check_path(path)))

    def __repr__(self) -> str:
        return f"MemoryObject({self.key or '<root>'!r}, fields={self.get_field_names()!r})"


def to_dict(obj: MemoryObject) -> dict[str, Any]:
    """A nested-dict snapshot of an object and its subtree, for display and tests."""
    return {
        name: to_dict(value) if isinstance(value, MemoryObject) else value
        for name, value in obj.get_fields().items()
    }
