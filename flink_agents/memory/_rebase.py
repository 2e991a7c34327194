"""Applying a delta made against an older state: the commit of a fan-out group.

The actions of a fan-out group all start from the same memory (the group's base) and commit
one after another in plan order. A later member's delta was computed without the earlier
members' writes, so applying it as is would undo them where both touched one object:
each object marker lists its fields, and the later member's marker lists only its own
additions. ``apply_rebased`` is a three-way merge against the base instead:

- a plain value, or a marker that replaces a value (or the other way round), is written as
  is: the later member wins that path, and whatever the earlier members had below it goes;
- a marker that replaces a marker keeps the fields the state has now, minus those the
  member removed relative to the base (with everything below them), plus those it added;
- a path the member wrote gets its ancestors back as objects if an earlier member replaced
  or deleted one (the member saw them), and a marker lists only fields that exist.

So the flattened map's invariant (a key exists iff its parent's marker lists it) holds after
every member, and the same deltas over the same base always give the same map: a replay
from the action log rebuilds it exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flink_agents.memory._buffer import MemoryDelta
from flink_agents.memory._flat import FlatMemory, ObjectMarker, join, split_parent
from flink_agents.memory._state import StateMap


def rebase_points(deltas: Iterable[MemoryDelta], state: StateMap) -> dict[str, Any]:
    """The base values ``apply_rebased`` needs for ``deltas``: the state's current value of
    every key they put a marker at. Read before the first of them is applied."""
    return {
        key: state.get(key)
        for delta in deltas
        for key, value in delta.puts.items()
        if type(value) is ObjectMarker
    }


def apply_rebased(delta: MemoryDelta, base: Mapping[str, Any], state: StateMap) -> None:
    """Apply ``delta``, made against ``base`` (see ``rebase_points``), to ``state``, which
    earlier deltas over the same base may have changed since."""
    if delta.cleared:  # the member cleared the whole map: nothing of the others survives
        delta.apply_to(state)
        return
    memory = FlatMemory(state)
    for key in delta.removals:
        _drop(memory, key)
    markers = []
    for key, value in delta.puts.items():
        current = state.get(key)
        if type(value) is ObjectMarker:
            markers.append(key)
            if type(current) is ObjectMarker:
                value = _merged(memory, key, base.get(key), current, value)
        elif type(current) is ObjectMarker:
            memory._drop_subtree(key)
        state.put(key, value)
    for key in delta.puts:
        _link(state, key)
    # A marker written over a value (or nothing) lists the fields the member saw; an
    # earlier member may have removed some of those it did not write itself.
    for key in markers:
        marker = state.get(key)
        fields = tuple(name for name in marker.fields if state.contains(join(key, name)))
        if fields != marker.fields:
            state.put(key, ObjectMarker(fields))


def _merged(
    memory: FlatMemory, key: str, base: Any, current: ObjectMarker, mine: ObjectMarker
) -> ObjectMarker:
    """``current`` with the fields the member removed from ``base`` dropped (subtrees
    included) and the fields it added appended, in its order."""
    base_fields = base.fields if type(base) is ObjectMarker else ()
    removed = {name for name in base_fields if name not in mine.fields}
    for name in removed:
        if name in current.fields:
            _drop(memory, join(key, name))
    kept = [name for name in current.fields if name not in removed]
    added = [name for name in mine.fields if name not in base_fields and name not in kept]
    return ObjectMarker((*kept, *added))


def _drop(memory: FlatMemory, key: str) -> None:
    memory._drop_subtree(key)
    memory.state.remove(key)


def _link(state: StateMap, key: str) -> None:
    """Make the parent of ``key`` an object that lists it, with its ancestors: the member
    saw them as objects, and an earlier member may have replaced or deleted one."""
    if not key:
        return
    parent, name = split_parent(key)
    marker = state.get(parent)
    if type(marker) is not ObjectMarker:
        if parent:
            _link(state, parent)
        marker = ObjectMarker()
    if name not in marker.fields:
        state.put(parent, marker.with_field(name))
