"""A write-back cache over a ``StateMap``, so a run reads each key of its state at most once
and writes each changed key once.

Every state request of the Flink runner costs a call into the JVM (a gRPC round trip in
process mode). A run's actions read the same keys again and again (the root marker on every
``set``, a counter read by two actions), and each completed action used to write straight
through. The run driver wraps a key's memory maps in a ``CachedState`` for as long as it
works on the key, and ``flush``es it before it lets go (a run ends, parks, or fails), so
Flink's state is complete at every checkpoint: checkpoints happen between callbacks.

Only the driver writes a key's state, one key at a time, so the cache stays right while the
key is between callbacks too (a parked run keeps its cache).
"""

from __future__ import annotations

import weakref
from typing import Any

from flink_agents.api import MemoryObject, MemoryRef, MemoryType
from flink_agents.memory._buffer import MemoryDelta
from flink_agents.memory._flat import ROOT, FlatMemory, ObjectMarker, StoredMemoryObject
from flink_agents.memory._state import StateMap
from flink_agents.memory._stored import RootEntry
from flink_agents.memory._values import IMMUTABLE

_MISSING = object()
"""Cached: the key is not in the map."""
_NONE = object()
"""Cached: ``get`` returned None, which is either a stored None or no key at all."""
_COMPLETE = object()
"""A cache key: present when the cache holds every key of the base (after a clear was
flushed), so a key it lacks is missing and need not be read."""
_EMPTY = object()
"""A cache key: present when the base holds no key at all (a flushed clear, and nothing
put since), so clearing it again needs no call: a run's sensory memory, cleared at the end
of every run that wrote some, reaches Flink state only when a run parks."""


_ABSENT = object()
"""In an undo entry: the key was not in the cache (or not among the dirty keys)."""
_ALL = object()
"""An undo key: the whole cache, dirty keys and clear flag as they were at ``begin``."""


class CachedState:
    """``StateMap`` over ``base``: reads are cached, writes are kept until ``flush``.

    Between ``begin`` and ``commit`` (one action's execution) it also records what each
    write replaced, so that ``rollback`` can take the writes back: an action that fails
    leaves nothing, as if it had written to a buffer of its own."""

    __slots__ = (
        "_base",
        "_cache",
        "_cleared",
        "_dirty",
        "_held",
        "_put_all",
        "_removed",
        "_root",
        "_undo",
        "kind",
    )

    def __init__(
        self,
        base: StateMap,
        cache: dict[str, Any] | None = None,
        *,
        put_all: bool = False,
        kind: MemoryType = MemoryType.SHORT_TERM,
    ) -> None:
        """``put_all``: write several puts with one ``base.put_all(dict)`` (PyFlink's
        MapState in thread mode: one call into the JVM instead of one per key; its process
        mode's ``put_all`` cannot take a dict)."""
        self._base = base
        self._put_all = base.put_all if put_all else None
        # ``cache``: what an earlier ``CachedState`` over the same base read, kept by the
        # caller between callbacks; valid as long as every write to ``base`` goes through a
        # ``CachedState`` sharing it (the run driver's per-key cache).
        self._cache: dict[str, Any] = {} if cache is None else cache
        self._dirty: dict[str, Any] = {}  # key -> value, or _MISSING for a removal
        self._cleared = False
        self._removed = False  # whether a removal may be among the dirty keys
        self.kind = kind
        """The memory this state holds (what ``MemoryRef`` s to its fields name)."""
        self._root: weakref.ref[_CachedRoot] | None = None
        self._held: _CachedRoot | None = None
        """``memory_root``: held from ``begin`` until ``flush`` (a callback's use), weakly
        after. The root holds this state (root -> ``FlatMemory`` -> state), so a strong
        link back would be a cycle, which would outlive the key's cache entry until the
        cycle collector found it: with many keys, every key leaving the per-key cache left
        one, and collecting them took a third of the time (bench/RESULTS.md, issue 45).
        Between callbacks the root lives as long as someone else holds it (the driver's
        per-key cache, a parked action's context)."""
        self._undo: dict[Any, Any] | None = None
        """While recording (``begin``): per key written, its cache and dirty entries before
        the first write; or, once cleared, ``_ALL``: everything as it was at ``begin``."""

    def get(self, key: str) -> Any:
        cache = self._cache
        cached = cache.get(key, _NONE)
        if cached is _NONE and key not in cache:
            if self._cleared or _COMPLETE in cache:
                return None
            value = self._base.get(key)
            cache[key] = _NONE if value is None else value
            return value
        return None if cached is _NONE or cached is _MISSING else cached

    def contains(self, key: str) -> bool:
        cached = self._cache.get(key, _NONE)
        if cached is _MISSING:
            return False
        if cached is not _NONE or key in self._dirty:  # a value, or a None written here
            return True
        if self._cleared:
            return False
        if key not in self._cache and _COMPLETE in self._cache:
            return False  # (a cached None may be a stored None: the base knows)
        present = self._base.contains(key)
        if not present:
            self._cache[key] = _MISSING
        return present

    def put(self, key: str, value: Any) -> None:
        undo = self._undo
        if undo is not None and key not in undo:
            undo[key] = (self._cache.get(key, _ABSENT), self._dirty.get(key, _ABSENT))
        self._cache[key] = _NONE if value is None else value
        self._dirty[key] = value

    def remove(self, key: str) -> None:
        undo = self._undo
        if undo is not None and key not in undo:
            undo[key] = (self._cache.get(key, _ABSENT), self._dirty.get(key, _ABSENT))
        self._cache[key] = _MISSING
        self._dirty[key] = _MISSING
        self._removed = True

    def clear(self) -> None:
        undo = self._undo
        if undo is not None:
            everything = undo.get(_ALL)
            if everything is None:
                # Everything as it was at ``begin``: now, with the writes since taken back.
                cache, dirty = dict(self._cache), dict(self._dirty)
                _put_back(undo, cache, dirty)
                everything = (cache, dirty, self._cleared)
            # (The writes since are gone with the clear: only the state at ``begin`` counts.)
            self._undo = {_ALL: everything}
        cache = self._cache
        empty = _EMPTY in cache
        cache.clear()
        self._dirty.clear()
        if empty:  # nothing to clear in the base: it stays empty and fully known
            cache[_COMPLETE] = cache[_EMPTY] = True
        else:
            self._cleared = True

    def read_root(self) -> int | None:
        """The run sequence kept with the root's marker in the base (a ``StoredState``:
        ``get_root``), read from the base; the marker, read with it, is cached as ``get``
        would cache it (unless this state has written or cleared the root since)."""
        marker, sequence = self._base.get_root()  # type: ignore[attr-defined]
        if not (self._cleared or ROOT in self._dirty):
            self._cache[ROOT] = _MISSING if marker is None else marker
        return sequence

    def keep_with_root(self, sequence: int | None) -> None:
        """Have the next ``flush`` write the root's entry with ``sequence`` in it (None: the
        marker alone), whether its marker changed or not (a ``StoredState`` base:
        ``RootEntry``). Without a root, one with no field is made to keep a sequence;
        with none to keep, nothing is written."""
        marker = self._cache.get(ROOT)
        if type(marker) is not ObjectMarker:
            marker = self.get(ROOT)
            if type(marker) is not ObjectMarker:
                if sequence is None:
                    return
                marker = self._cache[ROOT] = ObjectMarker()
        self._dirty[ROOT] = RootEntry(marker, sequence)

    @property
    def memory_root(self) -> MemoryObject | None:
        """The root memory object over this state, made by ``begin`` and shared by those
        who read and write this state directly (``DirectActionContext``); None until then,
        once nobody holds it any more, and once one of them moved it onto a buffer of its
        own (setting None)."""
        if self._held is not None:
            return self._held
        return None if self._root is None else self._root()

    @memory_root.setter
    def memory_root(self, root: _CachedRoot | None) -> None:
        self._held = root
        self._root = None if root is None else weakref.ref(root)

    def begin(self) -> MemoryObject:
        """Start recording what writes replace, until ``commit`` or ``rollback``; returns
        ``memory_root``, made if there is none."""
        self._undo = {}
        root = self.memory_root
        if root is None:
            root = _CachedRoot(FlatMemory(self, self.kind), ROOT)
            self._root = weakref.ref(root)
        self._held = root
        return root

    def commit(self) -> bool:
        """Keep the writes since ``begin``; whether there were any."""
        undo, self._undo = self._undo, None
        return bool(undo)

    def rollback(self) -> MemoryDelta:
        """Take back the writes since ``begin``, and return them: the delta that, applied
        to this state as it is again, would redo them."""
        undo, self._undo = self._undo, None
        if not undo:
            return MemoryDelta()
        dirty = self._dirty
        everything = undo.pop(_ALL, None)
        # Every key written since (since the clear, if there was one) is dirty.
        written = {key: dirty[key] for key in undo}
        puts = {key: value for key, value in written.items() if value is not _MISSING}
        removals = tuple(key for key, value in written.items() if value is _MISSING)
        cache = self._cache
        if everything is not None:
            before_cache, before_dirty, self._cleared = everything
            cache.clear()  # in place: the driver's key cache holds this dict
            cache.update(before_cache)
            dirty.clear()
            dirty.update(before_dirty)
        else:
            _put_back(undo, cache, dirty)
        return MemoryDelta(everything is not None, puts, removals)

    @property
    def cache(self) -> dict[str, Any]:
        """What this state knows of its base (to hand to the next ``CachedState``)."""
        return self._cache

    @property
    def dirty(self) -> bool:
        return self._cleared or bool(self._dirty)

    def flush(self) -> None:
        """Write what changed to the base map (a clear first, then removals and puts; the
        puts in one ``put_all`` when asked for and there are several); the callback's use
        ends, so the root is no longer held from here (``_held``)."""
        self._held = None
        dirty = self._dirty
        if not dirty:
            if not self._cleared:
                return
        elif not (self._cleared or self._removed) and self._put_all is not None and len(dirty) > 1:
            # The common flush, puts only: the dirty dict itself is the batch.
            self._put_all(dirty)
            self._dirty = {}
            self._cache.pop(_EMPTY, None)
            return
        cache = self._cache
        if self._cleared:
            self._base.clear()
            self._cleared = False
            # What was cleared is known to be missing now, unless written since; the base
            # now holds just what is written below, all of it in the cache.
            for key in [k for k, v in cache.items() if v is _NONE and k not in self._dirty]:
                cache[key] = _MISSING
            cache[_COMPLETE] = cache[_EMPTY] = True
        batch = {} if self._put_all is not None and len(dirty) > 1 else None
        for key, value in dirty.items():
            if value is _MISSING:
                self._base.remove(key)
            elif batch is not None:
                batch[key] = value
            else:
                self._base.put(key, value)
                cache.pop(_EMPTY, None)
        if batch:
            self._put_all(batch)  # one call for every put
            cache.pop(_EMPTY, None)
        dirty.clear()
        self._removed = False


def _put_back(undo: dict[Any, Any], cache: dict[Any, Any], dirty: dict[Any, Any]) -> None:
    """Put back into ``cache`` and ``dirty`` the entries the per-key ``undo`` log holds."""
    for key, (cached, was_dirty) in undo.items():
        _restore(cache, key, cached)
        _restore(dirty, key, was_dirty)


def _restore(entries: dict[Any, Any], key: Any, value: Any) -> None:
    """Put back an undo entry's ``value`` of ``key`` (``_ABSENT``: no entry)."""
    if value is _ABSENT:
        entries.pop(key, None)
    else:
        entries[key] = value


class _CachedRoot(StoredMemoryObject):
    """The root memory object over a ``CachedState`` (its ``memory_root``), whose ``get`` and
    ``set`` of a plain value in a field the cache already holds read and write the cache
    directly: what ``StoredMemoryObject``'s do through ``CachedState.get`` and ``put``, in
    fewer steps. They are the bulk of a plain action's own work on
    memory (``bench/RESULTS.md``). Anything else, and a root moved onto a buffer (the
    state is then not a ``CachedState``), takes ``StoredMemoryObject``'s path."""

    __slots__ = ()

    def get(self, path: str | MemoryRef) -> Any:
        state = self.memory.state
        if type(state) is CachedState and type(path) is str:
            # A dotted path is a stored key too: what ``FlatMemory.read`` would read. (A
            # sentinel is not IMMUTABLE; nor is an object, which the general path makes.)
            stored = state._cache.get(path, _NONE)
            if type(stored) in IMMUTABLE:
                return stored
        return super().get(path)

    def set(self, path: str, value: Any) -> MemoryRef:
        state = self.memory.state
        if type(state) is CachedState and type(value) in IMMUTABLE and type(path) is str:
            cache = state._cache
            # A plain value cached at ``path`` proves the field exists, so its object's
            # marker lists it (the invariant) and none need be read: a key read back from
            # Flink state reads no marker for it. Else the root's cached marker must list
            # the field, and the field must not hold an object.
            current = cache.get(path, _ABSENT)
            if type(current) not in IMMUTABLE:
                marker = cache.get(ROOT)
                if not (type(marker) is ObjectMarker and path in marker.fields):
                    current = _ABSENT
            if current is not _ABSENT and type(current) is not ObjectMarker:
                # ``CachedState.put``, inlined.
                undo = state._undo
                if undo is not None and path not in undo:
                    undo[path] = (current, state._dirty.get(path, _ABSENT))
                cache[path] = _NONE if value is None else value
                state._dirty[path] = value
                return self.memory.ref(path)
        return super().set(path, value)
