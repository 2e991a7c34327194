"""Flattened memory as Flink state holds it: the user's values as they are, and each object's
marker as plain data with a format version, never as an object of a class of ours.

A key's memory outlives the code that wrote it (a savepoint restored by a later release), and
a key's checkpointed bytes are what many keys multiply. Every key's memory has a root, so the
root's marker is written for every key that has memory; its entry (map key ``""``) holds
nothing else, so it is stored in the shortest form that still carries a version:

``(1, names)``
    The root object: format version 1 and its direct field names, in creation order.
``(2, names, sequence)``
    The root object of a key whose run sequence the runtime keeps with it (an idle key's,
    on Flink: ``runtime/flink/_dispatcher.py``), so that the key needs no entry of its own
    for it: the sequence is rewritten with every run, and the marker with it. Memory reads
    the names alone (``RootEntry`` is what writes both).
``("flink-agents/object", 1, names)``
    Any other object. Its entry could hold a value of the user's, so it is tagged; a user's
    tuple that begins with one of our tags is stored as ``("flink-agents/value", value)``,
    so that it never reads back as ours.

Releases up to 0.2.0 stored markers as pickled ``flink_agents.memory.ObjectMarker`` objects
(the class stays importable): those read back as they are, and a key is written in this
format when its objects next change. A root of two fields pickles to 32 bytes in this form,
to 71 in 0.2.0's (``bench/RESULTS.md``, issue 45).
"""

from __future__ import annotations

from typing import Any

from flink_agents.api import FlinkAgentsError
from flink_agents.memory._flat import ROOT, ObjectMarker
from flink_agents.memory._state import StateMap

OBJECT_TAG = "flink-agents/object"
VALUE_TAG = "flink-agents/value"
_TAGS = frozenset((OBJECT_TAG, VALUE_TAG))
MARKER_VERSION = 1
"""The version of a stored marker; 0.2.0's pickled markers have none."""
ROOT_VERSION = 2
"""The latest version of the root's entry: 2 keeps a run sequence with the marker."""


class RootEntry:
    """What the root's entry is to hold besides its marker: ``sequence``, the key's run
    sequence (None: none, the entry is the marker alone). Written through a ``StoredState``
    (``CachedState.keep_with_root``); it never reads back as one."""

    __slots__ = ("marker", "sequence")

    def __init__(self, marker: ObjectMarker, sequence: int | None) -> None:
        self.marker = marker
        self.sequence = sequence


class StateFormatError(FlinkAgentsError):
    """A value in Flink state is of a format or version this release cannot read (written by
    a later release, or not by flink_agents)."""


def stored_form(key: str, value: Any) -> Any:
    """``value``, written at map key ``key``, as Flink state holds it."""
    kind = type(value)
    if kind is ObjectMarker:
        if key == ROOT:
            return (MARKER_VERSION, value.fields)
        return (OBJECT_TAG, MARKER_VERSION, value.fields)
    if kind is tuple and value and type(value[0]) is str and value[0] in _TAGS:
        return (VALUE_TAG, value)
    if kind is RootEntry:
        if value.sequence is None:
            return (MARKER_VERSION, value.marker.fields)
        return (ROOT_VERSION, value.marker.fields, value.sequence)
    return value


def from_stored(key: str, stored: Any) -> Any:
    """What ``stored``, read at map key ``key``, holds (``stored_form``'s inverse; 0.2.0's
    markers read back as they are).

    Raises:
        StateFormatError: a marker of a later format version.
    """
    if type(stored) is not tuple:
        return stored
    if key == ROOT:
        _check_version(stored[0], ROOT_VERSION)
        return ObjectMarker(stored[1])
    if stored and type(stored[0]) is str and stored[0] in _TAGS:
        if stored[0] == VALUE_TAG:
            return stored[1]
        _check_version(stored[1], MARKER_VERSION)
        return ObjectMarker(stored[2])
    return stored


def root_sequence(stored: Any) -> int | None:
    """The run sequence kept in the root's entry as stored (``(2, names, sequence)``); None
    for any other (a marker alone, or no entry).

    Raises:
        StateFormatError: a root entry of a later format version.
    """
    if type(stored) is not tuple:
        return None
    _check_version(stored[0], ROOT_VERSION)
    return stored[2] if stored[0] == ROOT_VERSION else None


def _check_version(found: Any, latest: int) -> None:
    if type(found) is not int or found > latest:
        raise StateFormatError(
            f"a memory object's marker in Flink state has format version {found!r}; this "
            f"release of flink_agents reads up to {latest}: restore it with the "
            "release that wrote it or a later one"
        )


class StoredState:
    """A ``StateMap`` over ``stored``, a map holding stored forms (a Flink ``MapState``):
    values go in through ``stored_form`` and come out through ``from_stored``."""

    __slots__ = ("_map",)

    def __init__(self, stored: StateMap) -> None:
        self._map = stored

    def get(self, key: str) -> Any:
        stored = self._map.get(key)
        return from_stored(key, stored) if type(stored) is tuple else stored

    def put(self, key: str, value: Any) -> None:
        self._map.put(key, stored_form(key, value))

    def get_root(self) -> tuple[ObjectMarker | None, int | None]:
        """The root's marker (None: no root entry) and the run sequence kept with it (None:
        none), from one read of its entry."""
        stored = self._map.get(ROOT)
        if type(stored) is tuple and stored[0] == ROOT_VERSION:  # (an idle key's, mostly)
            return ObjectMarker(stored[1]), stored[2]
        if stored is None:
            return None, None
        return from_stored(ROOT, stored), root_sequence(stored)

    def put_all(self, entries: dict[str, Any]) -> None:
        """Every entry in one ``put_all`` of the map (which must have one)."""
        self._map.put_all(  # type: ignore[attr-defined]
            {key: stored_form(key, value) for key, value in entries.items()}
        )

    def remove(self, key: str) -> None:
        self._map.remove(key)

    def contains(self, key: str) -> bool:
        return self._map.contains(key)

    def clear(self) -> None:
        self._map.clear()
