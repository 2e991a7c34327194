"""``apply_rebased``: a fan-out group's later members commit over the earlier ones' writes.

Random operation sequences (those of the flattened-memory property tests) build a base map,
then two members' deltas against that same base; the first is applied as is, the second
rebased. The map must stay well formed, and members that write disjoint subtrees must give
exactly what running them one after another gives.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flink_agents.api import MemoryPathError
from flink_agents.memory import (
    BufferedState,
    DictState,
    FlatMemory,
    MemoryDelta,
    ObjectMarker,
    apply_rebased,
    rebase_points,
    to_dict,
)
from tests.memory.test_flat_memory_properties import base_op_lists, resolve

member_op_lists = st.lists(
    st.tuples(
        st.sampled_from(["set", "new_object", "delete"]),
        st.lists(st.sampled_from("abc"), min_size=1, max_size=3).map(".".join),
        st.integers(0, 3),
    ),
    max_size=12,
)


def apply_ops(state: Any, ops: list[tuple[str, str, Any]], prefix: str = "") -> None:
    root = FlatMemory(state).root()
    for kind, path, value in ops:
        path = prefix + path
        try:
            if kind == "set":
                root.set(path, value)
            elif kind == "new_object":
                root.new_object(path)
            elif kind == "delete":
                root.delete(path)
        except MemoryPathError:
            pass  # a path through a value: refused, as an action would see


def base_state(raw_ops) -> DictState:
    state = DictState()
    ops = [(kind, path, arg) for kind, path, arg, _ in resolve(raw_ops) if kind != "copy"]
    apply_ops(state, ops)
    return state


def delta_of(base: DictState, ops, prefix: str = "") -> MemoryDelta:
    buffer = BufferedState(base)
    apply_ops(buffer, ops, prefix)
    return buffer.delta()


def commit(state: DictState, first: MemoryDelta, second: MemoryDelta) -> None:
    bases = rebase_points([second], state)
    first.apply_to(state)
    apply_rebased(second, bases, state)


def assert_well_formed(data: dict[str, Any]) -> None:
    """Every key but the root is listed by its parent's marker, every listed field exists,
    and no marker lists a field twice."""
    for key, stored in data.items():
        if key:
            parent, _, name = key.rpartition(".")
            assert type(data.get(parent)) is ObjectMarker, (key, data)
            assert name in data[parent].fields, (key, data)
        if type(stored) is ObjectMarker:
            assert len(set(stored.fields)) == len(stored.fields), (key, data)
            for name in stored.fields:
                assert (f"{key}.{name}" if key else name) in data, (key, name, data)


@given(base_op_lists, member_op_lists, member_op_lists)
def test_the_map_stays_well_formed_whatever_the_members_do(base_ops, first_ops, second_ops):
    state = base_state(base_ops)
    first, second = delta_of(state, first_ops), delta_of(state, second_ops)
    commit(state, first, second)
    assert_well_formed(state.data)


@given(base_op_lists, member_op_lists, member_op_lists)
def test_members_writing_disjoint_subtrees_commit_as_if_run_one_after_another(
    base_ops, first_ops, second_ops
):
    state = base_state(base_ops)
    sequential = DictState(dict(state.data))
    first, second = delta_of(state, first_ops, "x."), delta_of(state, second_ops, "y.")
    commit(state, first, second)

    apply_ops(sequential, first_ops, "x.")
    apply_ops(sequential, second_ops, "y.")
    assert state.data == sequential.data


@given(base_op_lists, member_op_lists, member_op_lists)
def test_the_later_member_wins_every_path_it_wrote(base_ops, first_ops, second_ops):
    state = base_state(base_ops)
    second_view = BufferedState(state)
    first = delta_of(state, first_ops)
    apply_ops(second_view, second_ops)
    second = second_view.delta()
    commit(state, first, second)
    for key, value in second.puts.items():
        if type(value) is not ObjectMarker:
            assert state.data[key] == value


def test_fields_both_members_added_to_one_object_are_all_kept():
    state = DictState()
    FlatMemory(state).root().new_object("profile").set("name", "Ada")
    first = delta_of(state, [("set", "profile.city", "London"), ("delete", "profile.name", 0)])
    second = delta_of(state, [("set", "profile.age", 36), ("set", "seen", 1)])
    commit(state, first, second)
    assert to_dict(FlatMemory(state).root()) == {
        "profile": {"city": "London", "age": 36},
        "seen": 1,
    }
