"""BufferedState: an action's overlay over memory state, applied only through its delta."""

from __future__ import annotations

from typing import Any

from flink_agents.memory import (
    BufferedState,
    DictState,
    FlatMemory,
    MemoryDelta,
    ObjectMarker,
    to_dict,
)


def populated_base() -> DictState:
    """A base holding ``{"x": 1, "o": {"p": [1]}}``."""
    base = DictState()
    root = FlatMemory(base).root()
    root.set("x", 1)
    root.set("o.p", [1])
    return base


def overlay(base: DictState) -> tuple[BufferedState, Any]:
    buffer = BufferedState(base)
    return buffer, FlatMemory(buffer).root()


def test_reads_see_own_writes_and_the_base() -> None:
    base = populated_base()
    _, root = overlay(base)
    root.set("o.q", "new")
    root.set("x", 2)
    assert root.get("x") == 2
    assert root.get("o.p") == [1]  # from the base
    assert to_dict(root) == {"x": 2, "o": {"p": [1], "q": "new"}}


def test_base_untouched_until_apply() -> None:
    base = populated_base()
    before = dict(base.data)
    buffer, root = overlay(base)
    root.set("o.q", "new")
    root.delete("x")
    root.new_object("o.p")
    assert base.data == before
    buffer.delta().apply_to(base)
    assert to_dict(FlatMemory(base).root()) == {"o": {"p": {}, "q": "new"}}


def test_discarding_the_overlay_leaves_the_base() -> None:
    base = populated_base()
    before = dict(base.data)
    _, root = overlay(base)
    root.set("x", 2)
    del root
    assert base.data == before


def test_delete_in_overlay_hides_base_field() -> None:
    base = populated_base()
    _, root = overlay(base)
    assert root.delete("o") is True
    assert root.is_exist("o") is False
    assert root.is_exist("o.p") is False
    assert root.get("o.p") is None
    assert root.get_field_names() == ["x"]
    assert FlatMemory(base).root().is_exist("o.p") is True


def test_reads_do_not_write() -> None:
    base = populated_base()
    buffer, root = overlay(base)
    root.get("o.p")
    root.get_object("o")
    root.is_exist("nothing.here")
    root.get_fields()
    root.delete("absent")
    assert buffer.delta() == MemoryDelta()
    assert buffer.delta().is_empty()


def test_raw_state_reads_after_put_and_remove() -> None:
    buffer = BufferedState(DictState({"k": 1, "gone": 2}))
    buffer.put("n", None)
    buffer.remove("gone")
    assert (buffer.get("k"), buffer.contains("k")) == (1, True)
    assert (buffer.get("n"), buffer.contains("n")) == (None, True)
    assert (buffer.get("gone"), buffer.contains("gone")) == (None, False)
    assert (buffer.get("absent"), buffer.contains("absent")) == (None, False)


def test_clear_hides_the_base() -> None:
    base = populated_base()
    buffer, root = overlay(base)
    root.set("o.q", "lost by clear")
    buffer.clear()
    assert buffer.get("x") is None
    assert buffer.contains("x") is False
    assert buffer.contains("") is False
    assert root.get_field_names() == []
    assert root.get("o.p") is None
    assert to_dict(root) == {}


def test_clear_then_write() -> None:
    base = populated_base()
    buffer, root = overlay(base)
    buffer.clear()
    root.set("o.r", 1)
    assert to_dict(root) == {"o": {"r": 1}}
    delta = buffer.delta()
    assert delta.cleared is True
    assert delta.puts == {"": ObjectMarker(("o",)), "o": ObjectMarker(("r",)), "o.r": 1}
    assert delta.removals == ()
    delta.apply_to(base)
    assert base.data == {"": ObjectMarker(("o",)), "o": ObjectMarker(("r",)), "o.r": 1}


def test_delta_contents_for_a_set() -> None:
    buffer, root = overlay(populated_base())
    root.set("y", 2)
    assert buffer.delta() == MemoryDelta(
        cleared=False, puts={"": ObjectMarker(("x", "o", "y")), "y": 2}, removals=()
    )


def test_delta_contents_for_a_delete() -> None:
    buffer, root = overlay(populated_base())
    root.delete("o")
    delta = buffer.delta()
    assert delta.cleared is False
    assert delta.puts == {"": ObjectMarker(("x",))}
    assert sorted(delta.removals) == ["o", "o.p"]


def test_delta_contents_for_replacing_an_object() -> None:
    buffer, root = overlay(populated_base())
    root.set("o", "flat")
    delta = buffer.delta()
    assert delta.puts == {"o": "flat"}
    assert delta.removals == ("o.p",)


def test_delta_keeps_only_the_last_write_per_key() -> None:
    buffer = BufferedState(DictState())
    buffer.put("a", 1)
    buffer.remove("a")
    buffer.put("b", 1)
    buffer.remove("b")
    buffer.put("b", 2)
    assert buffer.delta() == MemoryDelta(puts={"b": 2}, removals=("a",))


def test_apply_reproduces_the_direct_map() -> None:
    base = populated_base()
    direct = DictState(dict(base.data))
    buffer, buffered_root = overlay(base)
    for root in (buffered_root, FlatMemory(direct).root()):
        root.set("o.p", {"replaced": True})
        root.new_object("z").set("n.j", True)
        root.set("copy", root.get("z"))
        root.delete("x")
        root.set("x", [3])
    buffer.delta().apply_to(base)
    assert base.data == direct.data


def test_apply_to_a_copy_of_the_base_and_replay_are_equal() -> None:
    """Applying the delta again (log replay) rebuilds exactly the same map."""
    base = populated_base()
    replica = DictState(dict(base.data))
    buffer, root = overlay(base)
    root.delete("o")
    root.set("o.new", 1)
    delta = buffer.delta()
    delta.apply_to(base)
    delta.apply_to(replica)
    assert base.data == replica.data
    delta.apply_to(replica)
    assert base.data == replica.data


def test_cleared_delta_replays_on_any_state() -> None:
    buffer, root = overlay(populated_base())
    buffer.clear()
    root.set("only", 1)
    elsewhere = DictState({"stale": 1})
    buffer.delta().apply_to(elsewhere)
    assert elsewhere.data == {"": ObjectMarker(("only",)), "only": 1}


def test_stored_values_in_overlay_are_snapshots() -> None:
    base = populated_base()
    buffer, root = overlay(base)
    value = [1]
    root.set("v", value)
    value.append(2)
    root.get("v").append(3)
    buffer.delta().apply_to(base)
    assert FlatMemory(base).root().get("v") == [1]
