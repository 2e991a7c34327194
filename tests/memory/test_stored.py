"""Memory as Flink state holds it (``StoredState``): markers as versioned plain data, the
user's values as they are, and the same memory through it as without it."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flink_agents.memory import (
    CachedState,
    DictState,
    FlatMemory,
    ObjectMarker,
    StateFormatError,
    StoredState,
    from_stored,
    stored_form,
    to_dict,
)
from flink_agents.memory._stored import OBJECT_TAG, VALUE_TAG, RootEntry, root_sequence
from tests.memory.test_flat_memory_properties import (
    Model,
    check_map,
    op_lists,
    resolve,
    run_step,
)

names = st.lists(st.sampled_from(["a", "b", "name", "x.y"]), max_size=4, unique=True)
markers = names.map(lambda fields: ObjectMarker(tuple(fields)))
tag = st.sampled_from([OBJECT_TAG, VALUE_TAG, "flink-agents/control", "other"])
user_values = st.recursive(
    st.none() | st.integers() | st.text(max_size=5) | tag | st.binary(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples()
        | st.tuples(tag)
        | st.tuples(tag, inner)
        | st.tuples(tag, inner, inner)
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["a", "a.b", "profile.address"]), markers | user_values)
def test_a_value_reads_back_as_written(key: str, value: Any) -> None:
    stored = stored_form(key, value)
    assert from_stored(key, stored) == value
    assert type(from_stored(key, stored)) is type(value)
    assert type(pickle.loads(pickle.dumps(stored))) is not ObjectMarker


@settings(max_examples=100, deadline=None)
@given(markers)
def test_the_root_marker_reads_back_and_is_the_shortest_form(marker: ObjectMarker) -> None:
    stored = stored_form("", marker)
    assert stored == (1, marker.fields)
    assert from_stored("", stored) == marker
    assert len(pickle.dumps(stored)) < len(pickle.dumps(stored_form("a", marker)))


def test_no_class_of_ours_is_pickled() -> None:
    for key in ("", "profile"):
        stored = pickle.dumps(stored_form(key, ObjectMarker(("name", "address"))))
        assert b"flink_agents" not in stored
        assert b"ObjectMarker" not in stored


def test_a_users_tuple_that_looks_like_a_marker_stays_a_value() -> None:
    looks_like = (OBJECT_TAG, 1, ("name",))
    assert stored_form("note", looks_like) == (VALUE_TAG, looks_like)
    assert from_stored("note", stored_form("note", looks_like)) == looks_like
    assert stored_form("note", ("other", 1)) == ("other", 1)  # as it is: no tag of ours
    assert stored_form("note", ()) == ()
    for value in [(), ("other", 1), (OBJECT_TAG,), (VALUE_TAG, 1, 2)]:
        assert from_stored("note", stored_form("note", value)) == value


def test_markers_of_releases_up_to_0_2_0_read_back_as_they_are() -> None:
    old = ObjectMarker(("name",))  # 0.2.0 pickled the object itself
    assert from_stored("", old) is old
    assert from_stored("profile", old) is old


def test_a_marker_of_a_later_format_is_refused() -> None:
    with pytest.raises(StateFormatError, match=r"marker .* format version 3; .* reads up to 2"):
        from_stored("", (3, ("name",), 7))
    with pytest.raises(StateFormatError, match=r"format version 3"):
        root_sequence((3, ("name",), 7))
    with pytest.raises(StateFormatError, match=r"format version 2; .* reads up to 1"):
        from_stored("profile", (OBJECT_TAG, 2, ("name",)))


@settings(max_examples=100, deadline=None)
@given(markers, st.integers(min_value=1, max_value=2**40))
def test_the_root_keeps_a_run_sequence_in_version_2(marker: ObjectMarker, sequence: int) -> None:
    stored = stored_form("", RootEntry(marker, sequence))
    assert stored == (2, marker.fields, sequence)
    assert from_stored("", stored) == marker
    assert root_sequence(stored) == sequence
    # Without a sequence the root is its marker alone, as before.
    assert stored_form("", RootEntry(marker, None)) == stored_form("", marker)
    assert root_sequence(stored_form("", marker)) is None
    assert root_sequence(None) is None
    assert root_sequence(ObjectMarker(("name",))) is None  # 0.2.0's pickled marker


def test_a_cached_state_reads_and_keeps_the_roots_sequence_with_one_entry() -> None:
    base = DictState()
    cached = CachedState(StoredState(base), put_all=True)
    assert cached.read_root() is None
    cached.keep_with_root(5)  # no root yet: an empty one keeps the sequence
    cached.flush()
    assert base.data == {"": (2, (), 5)}
    # The memory's writes keep the sequence kept with them; the marker is what memory reads.
    cached = CachedState(StoredState(base), put_all=True)
    assert cached.read_root() == 5
    FlatMemory(cached).root().set("count", 1)
    cached.keep_with_root(6)
    cached.flush()
    assert base.data == {"": (2, ("count",), 6), "count": 1}
    reread = CachedState(StoredState(base))
    assert reread.read_root() == 6
    assert to_dict(FlatMemory(reread).root()) == {"count": 1}
    # None: the marker alone again; and nothing is written for a key without a root.
    reread.keep_with_root(None)
    reread.flush()
    assert base.data == {"": (1, ("count",)), "count": 1}
    empty = DictState()
    nothing = CachedState(StoredState(empty))
    nothing.keep_with_root(None)
    nothing.flush()
    assert empty.data == {}


def test_the_root_read_with_its_sequence_is_cached_for_memory() -> None:
    reads = []

    class Counting(DictState):
        def get(self, key: str) -> Any:
            reads.append(key)
            return super().get(key)

    cached = CachedState(StoredState(Counting({"": (2, ("count",), 3), "count": 1})))
    assert cached.read_root() == 3
    assert FlatMemory(cached).root().get_field_names() == ["count"]
    assert reads == [""]  # once: the marker came with the sequence


@settings(max_examples=150, deadline=None)
@given(op_lists)
def test_memory_through_stored_state_is_the_same_memory(raw_ops: list) -> None:
    """The Flink arrangement (a ``CachedState`` over ``StoredState`` over the map, flushed
    after every operation, then read back by a new cache) against the model."""
    ops = resolve(raw_ops)
    stored, model = DictState(), Model()
    for sequence, op in enumerate(ops, 1):
        cached = CachedState(StoredState(stored), put_all=True)
        # A run sequence kept with the root (as an idle key's on Flink) changes no memory.
        assert cached.read_root() == (sequence - 1 or None)
        run_step(FlatMemory(cached).root(), model, op)
        cached.keep_with_root(sequence)
        cached.flush()
        assert not any(type(value) is ObjectMarker for value in stored.data.values())
        check_map({key: from_stored(key, value) for key, value in stored.data.items()}, model)
    reread = FlatMemory(CachedState(StoredState(stored))).root()
    direct = DictState({key: from_stored(key, value) for key, value in stored.data.items()})
    assert to_dict(reread) == to_dict(FlatMemory(direct).root())
