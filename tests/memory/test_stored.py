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
from flink_agents.memory._stored import OBJECT_TAG, VALUE_TAG
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
    with pytest.raises(StateFormatError, match=r"marker .* format version 2; .* reads up to 1"):
        from_stored("", (2, ("name",)))
    with pytest.raises(StateFormatError, match=r"format version 2"):
        from_stored("profile", (OBJECT_TAG, 2, ("name",)))


@settings(max_examples=150, deadline=None)
@given(op_lists)
def test_memory_through_stored_state_is_the_same_memory(raw_ops: list) -> None:
    """The Flink arrangement (a ``CachedState`` over ``StoredState`` over the map, flushed
    after every operation, then read back by a new cache) against the model."""
    ops = resolve(raw_ops)
    stored, model = DictState(), Model()
    for op in ops:
        cached = CachedState(StoredState(stored), put_all=True)
        run_step(FlatMemory(cached).root(), model, op)
        cached.flush()
        assert not any(type(value) is ObjectMarker for value in stored.data.values())
        check_map({key: from_stored(key, value) for key, value in stored.data.items()}, model)
    reread = FlatMemory(CachedState(StoredState(stored))).root()
    direct = DictState({key: from_stored(key, value) for key, value in stored.data.items()})
    assert to_dict(reread) == to_dict(FlatMemory(direct).root())
