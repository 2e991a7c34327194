"""Values, paths and objects of flattened memory: what is accepted, copied and rejected."""

from __future__ import annotations

import enum
import re
import socket
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from flink_agents.api import MemoryObject, MemoryPathError, MemoryValueError
from flink_agents.memory import DictState, FlatMemory, ObjectMarker, to_dict


class Address(BaseModel):
    city: str
    lines: list[str] = []


class Person(BaseModel):
    name: str
    address: Address
    tags: list[str] = []


class Color(enum.StrEnum):
    RED = "red"


def new_memory() -> tuple[DictState, MemoryObject]:
    state = DictState()
    return state, FlatMemory(state).root()


# -- accepted values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -7,
        1.5,
        "",
        "text",
        b"\x00bytes",
        [],
        {},
        [1, "a", None, 2.5, b"b", [True]],
        {"k": [1, {"n": b"x", "m": None}], "e": {}},
        Color.RED,
    ],
    ids=repr,
)
def test_accepted_value_round_trips(value: Any) -> None:
    _, root = new_memory()
    root.set("x.y", value)
    got = root.get("x.y")
    assert got == value
    assert type(got) is type(value)


def test_dict_and_list_subclasses_are_stored_as_plain_containers() -> None:
    _, root = new_memory()
    root.set("d", OrderedDict(a=1))
    assert type(root.get("d")) is dict
    assert root.get("d") == {"a": 1}


def test_dict_value_is_not_an_object() -> None:
    """A dict is a plain value: no fields below it, no writes through it."""
    state, root = new_memory()
    root.set("d", {"k": 1})
    assert state.data == {"": ObjectMarker(("d",)), "d": {"k": 1}}
    assert root.get("d.k") is None
    assert root.is_exist("d.k") is False
    with pytest.raises(MemoryPathError):
        root.set("d.k", 2)


# -- values stored by pickling -----------------------------------------------------------


class Point:
    """A plain class of the user's: stored pickled, as Apache Flink Agents stores it."""

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)


@pytest.mark.parametrize(
    "value",
    [(1, "a", [2]), {1, 2}, frozenset({"x"}), Point(1, 2), bytearray(b"ab"), [{"p": Point(3, 4)}]],
    ids=["tuple", "set", "frozenset", "object", "bytearray", "nested object"],
)
def test_picklable_values_are_stored_as_copies(value: Any) -> None:
    _, root = new_memory()
    ref = root.set("x.y", value)
    got = root.get("x.y")
    assert got == value and type(got) is type(value)
    assert got is not value or isinstance(value, frozenset | tuple)
    assert root.get(ref) == value  # by the reference set returned
    if isinstance(value, set):
        got.add(99)  # a copy: memory does not change
        assert root.get("x.y") == value


def _local_instance() -> Any:
    class Local:
        pass

    return Local()


# -- rejected values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (lambda: 1, "cannot store function at 'x.y'"),
        (_local_instance(), "cannot store Local at 'x.y'"),
        (ObjectMarker(("a",)), "cannot store ObjectMarker at 'x.y'"),
        ({1: "a"}, "cannot store a dict with key 1 (int) at 'x.y'"),
        ([1, (lambda: 2,)], "cannot store tuple at 'x.y[1]'"),
        ({"k": {3: None}}, "cannot store a dict with key 3 (int) at 'x.y.k'"),
        ({"k": [{"m": threading.Lock()}]}, "cannot store lock at 'x.y.k[0].m'"),
        ([{2: 1}], "cannot store a dict with key 2 (int) at 'x.y[0]'"),
    ],
    ids=lambda case: re.sub(r" at 0x[0-9a-f]+", "", repr(case)),  # the same in every process
)
def test_rejected_value_names_the_path(value: Any, fragment: str) -> None:
    state, root = new_memory()
    with pytest.raises(MemoryValueError) as caught:
        root.set("x.y", value)
    assert fragment in str(caught.value)
    assert state.data == {}, "a rejected value must not create intermediate objects"


def test_rejected_value_leaves_old_value() -> None:
    _, root = new_memory()
    root.set("x", [1])
    with pytest.raises(MemoryValueError):
        root.set("x", [1, threading.Lock()])
    assert root.get("x") == [1]


def test_rejected_value_through_handle_names_absolute_path() -> None:
    _, root = new_memory()
    obj = root.new_object("z")
    with pytest.raises(MemoryValueError, match=r"cannot store lock at 'z\.w'"):
        obj.set("w", threading.Lock())


def test_memory_object_inside_a_value_is_rejected() -> None:
    _, root = new_memory()
    obj = root.new_object("o")
    with pytest.raises(MemoryValueError, match=r"at 'x\[0\]'"):
        root.set("x", [obj])


def test_foreign_memory_object_kind_is_rejected() -> None:
    class Foreign(MemoryObject):
        get = set = new_object = get_object = is_exist = delete = lambda self, path: None
        get_field_names = get_fields = lambda self: []

    _, root = new_memory()
    with pytest.raises(
        MemoryValueError, match=r"cannot store Foreign at 'f': unknown MemoryObject"
    ):
        root.set("f", Foreign())


def test_cyclic_list_is_rejected_with_memory_value_error() -> None:
    _, root = new_memory()
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(MemoryValueError):
        root.set("x", cyclic)


# -- snapshots ----------------------------------------------------------------------------


def test_mutating_the_value_passed_to_set_changes_nothing() -> None:
    _, root = new_memory()
    value = {"items": [1, 2], "inner": {"k": "v"}}
    root.set("x", value)
    value["items"].append(3)
    value["inner"]["k"] = "changed"
    value["new"] = 1
    assert root.get("x") == {"items": [1, 2], "inner": {"k": "v"}}


def test_mutating_a_value_from_get_changes_nothing() -> None:
    _, root = new_memory()
    root.set("x", [[1], {"k": [2]}])
    got = root.get("x")
    got[0].append(9)
    got[1]["k"].append(9)
    got.append(9)
    assert root.get("x") == [[1], {"k": [2]}]


def test_get_fields_returns_copies() -> None:
    _, root = new_memory()
    root.set("x", [1])
    root.get_fields()["x"].append(2)
    assert root.get("x") == [1]


def test_pydantic_model_round_trip() -> None:
    _, root = new_memory()
    person = Person(name="ann", address=Address(city="Oslo", lines=["1 Main St"]), tags=["a"])
    root.set("p", person)
    got = root.get("p")
    assert isinstance(got, Person)
    assert got == person
    assert got is not person
    assert got.address is not person.address


def test_pydantic_model_is_a_snapshot_both_ways() -> None:
    _, root = new_memory()
    person = Person(name="ann", address=Address(city="Oslo"))
    root.set("p", person)
    person.address.lines.append("changed after set")
    person.name = "changed"
    got = root.get("p")
    got.tags.append("changed after get")
    got.address.city = "changed"
    assert root.get("p") == Person(name="ann", address=Address(city="Oslo"))


def test_pydantic_models_inside_lists_are_copied() -> None:
    _, root = new_memory()
    address = Address(city="Oslo")
    root.set("xs", [address, {"a": address}])
    address.city = "changed"
    assert root.get("xs") == [Address(city="Oslo"), {"a": Address(city="Oslo")}]


# -- paths --------------------------------------------------------------------------------

BAD_PATHS = ["", ".", "a..b", ".a", "a.", "a.b."]
PATH_METHODS: dict[str, Callable[[MemoryObject, Any], Any]] = {
    "get": lambda obj, path: obj.get(path),
    "set": lambda obj, path: obj.set(path, 1),
    "new_object": lambda obj, path: obj.new_object(path),
    "get_object": lambda obj, path: obj.get_object(path),
    "is_exist": lambda obj, path: obj.is_exist(path),
    "delete": lambda obj, path: obj.delete(path),
}


@pytest.mark.parametrize("method", PATH_METHODS)
@pytest.mark.parametrize("path", BAD_PATHS)
def test_empty_path_segment_is_rejected_by_every_method(method: str, path: str) -> None:
    state, root = new_memory()
    root.set("a.b", 1)
    before = dict(state.data)
    with pytest.raises(MemoryPathError, match="empty path segment") as caught:
        PATH_METHODS[method](root, path)
    assert repr(path) in str(caught.value)
    assert state.data == before


@pytest.mark.parametrize("method", PATH_METHODS)
@pytest.mark.parametrize("path", [None, 1, b"a", ["a"]], ids=repr)
def test_non_str_path_is_rejected_by_every_method(method: str, path: Any) -> None:
    _, root = new_memory()
    with pytest.raises(MemoryPathError, match="memory path must be a str"):
        PATH_METHODS[method](root, path)


@pytest.mark.parametrize("method", PATH_METHODS)
def test_bad_path_through_a_handle_is_rejected(method: str) -> None:
    _, root = new_memory()
    obj = root.new_object("z")
    with pytest.raises(MemoryPathError):
        PATH_METHODS[method](obj, "a..b")


@pytest.mark.parametrize("stored", [1, None, "s", [1], {"k": 1}], ids=repr)
@pytest.mark.parametrize("path", ["a.b", "a.b.c"])
def test_write_through_a_plain_value_raises(stored: Any, path: str) -> None:
    state, root = new_memory()
    root.set("a", stored)
    before = dict(state.data)
    with pytest.raises(MemoryPathError, match=rf"cannot write '{path}': 'a' holds a value"):
        root.set(path, 1)
    with pytest.raises(MemoryPathError, match=rf"cannot write '{path}': 'a' holds a value"):
        root.new_object(path)
    assert state.data == before


def test_write_through_a_plain_value_via_handle_names_absolute_paths() -> None:
    _, root = new_memory()
    obj = root.new_object("z")
    obj.set("m", 0.5)
    with pytest.raises(MemoryPathError, match=r"cannot write 'z\.m\.x': 'z\.m' holds a value"):
        obj.set("m.x", 1)


def test_reads_through_a_plain_value_are_lenient() -> None:
    _, root = new_memory()
    root.set("a", 1)
    assert root.get("a.b") is None
    assert root.get("a.b.c") is None
    assert root.is_exist("a.b") is False
    assert root.get_object("a.b") is None
    assert root.delete("a.b") is False


def test_path_segments_may_contain_any_other_characters() -> None:
    _, root = new_memory()
    root.set("a b.[0].-", 1)
    assert root.get_object("a b").get("[0].-") == 1


# -- objects ------------------------------------------------------------------------------


def test_set_replaces_an_object_and_drops_its_subtree() -> None:
    state, root = new_memory()
    root.set("a.b.c", 1)
    root.set("a", 2)
    assert state.data == {"": ObjectMarker(("a",)), "a": 2}


def test_new_object_replaces_whatever_was_there() -> None:
    state, root = new_memory()
    root.set("a.b", 1)
    root.set("v", [1])
    assert root.new_object("a").get_field_names() == []
    assert root.new_object("v").get_field_names() == []
    assert state.data == {"": ObjectMarker(("a", "v")), "a": ObjectMarker(), "v": ObjectMarker()}


def test_replacing_keeps_creation_order() -> None:
    _, root = new_memory()
    root.set("a", 1)
    root.set("b", 2)
    root.new_object("a")
    assert root.get_field_names() == ["a", "b"]


def test_empty_memory_root() -> None:
    state, root = new_memory()
    assert root.get_field_names() == []
    assert root.get_fields() == {}
    assert root.get("a") is None
    assert root.is_exist("a") is False
    assert state.data == {}


def test_none_value_exists() -> None:
    _, root = new_memory()
    root.set("n", None)
    assert root.is_exist("n") is True
    assert root.get("n") is None
    assert root.get_fields() == {"n": None}


def test_get_object_rules() -> None:
    _, root = new_memory()
    root.set("obj.x", 1)
    root.set("val", 1)
    root.set("nothing", None)
    assert root.get_object("absent") is None
    assert root.get_object("obj.absent") is None
    assert to_dict(root.get_object("obj")) == {"x": 1}
    with pytest.raises(MemoryPathError, match=r"'val' holds a value \(int\), not an object"):
        root.get_object("val")
    with pytest.raises(MemoryPathError, match=r"'nothing' holds a value \(None\), not an object"):
        root.get_object("nothing")
    with pytest.raises(MemoryPathError, match=r"'obj\.x' holds a value \(int\)"):
        root.get_object("obj").get_object("x")


def test_delete_return_values() -> None:
    state, root = new_memory()
    root.set("v", 1)
    root.set("n", None)
    root.set("o.p.q", 1)
    assert root.delete("absent") is False
    assert root.delete("o.absent") is False
    assert root.delete("v.below") is False
    assert root.delete("v") is True
    assert root.delete("v") is False
    assert root.delete("n") is True
    assert root.delete("o") is True
    assert state.data == {"": ObjectMarker()}


def test_delete_nested_field_through_handle() -> None:
    state, root = new_memory()
    root.set("o.p.q", 1)
    root.set("o.r", 2)
    assert root.get_object("o").delete("p") is True
    assert state.data == {"": ObjectMarker(("o",)), "o": ObjectMarker(("r",)), "o.r": 2}


def test_recreated_field_goes_to_the_end() -> None:
    _, root = new_memory()
    for name in "abc":
        root.set(name, 1)
    root.delete("a")
    root.set("a", 1)
    assert root.get_field_names() == ["b", "c", "a"]


def test_get_fields_mixes_values_and_objects() -> None:
    _, root = new_memory()
    root.set("v", 1)
    root.set("o.x", 2)
    fields = root.get_fields()
    assert list(fields) == ["v", "o"]
    assert fields["v"] == 1
    assert isinstance(fields["o"], MemoryObject)
    assert fields["o"].get("x") == 2


# -- copying a MemoryObject value ---------------------------------------------------------


def test_setting_an_object_copies_its_subtree() -> None:
    state, root = new_memory()
    root.set("a.x", [1])
    root.set("a.n.m", "deep")
    root.set("b", root.get("a"))
    assert to_dict(root.get("b")) == {"x": [1], "n": {"m": "deep"}}
    root.set("a.x", [2])
    root.get_object("b").set("n.m", "changed")
    assert to_dict(root) == {
        "a": {"x": [2], "n": {"m": "deep"}},
        "b": {"x": [1], "n": {"m": "changed"}},
    }
    assert state.data["b"] == ObjectMarker(("x", "n"))


def test_copy_into_own_descendant() -> None:
    state, root = new_memory()
    root.set("a.x", 1)
    root.set("a.inner", root.get("a"))
    assert to_dict(root) == {"a": {"x": 1, "inner": {"x": 1}}}
    assert set(state.data) == {"", "a", "a.x", "a.inner", "a.inner.x"}


def test_copy_into_own_descendant_replacing_existing_child() -> None:
    state, root = new_memory()
    root.set("a.b.x", 1)
    root.set("a.b", root.get("a"))
    assert to_dict(root) == {"a": {"b": {"b": {"x": 1}}}}
    assert set(state.data) == {"", "a", "a.b", "a.b.b", "a.b.b.x"}


def test_copy_into_own_descendant_with_missing_intermediates() -> None:
    _, root = new_memory()
    root.set("a.x", 1)
    root.set("a.p.q", root.get("a"))
    assert to_dict(root) == {"a": {"x": 1, "p": {"q": {"x": 1}}}}


def test_copy_root_into_a_descendant() -> None:
    _, root = new_memory()
    root.set("x", 1)
    root.set("a.b", root)
    assert to_dict(root) == {"x": 1, "a": {"b": {"x": 1}}}


def test_copy_onto_itself_is_a_no_op() -> None:
    state, root = new_memory()
    root.set("a.x", 1)
    before = dict(state.data)
    root.set("a", root.get("a"))
    assert state.data == before


def test_copy_onto_an_ancestor() -> None:
    state, root = new_memory()
    root.set("a.b.c", 1)
    root.set("a.d", 2)
    root.set("a", root.get("a.b"))
    assert to_dict(root) == {"a": {"c": 1}}
    assert set(state.data) == {"", "a", "a.c"}


def test_copy_through_a_handle() -> None:
    _, root = new_memory()
    root.set("src.x", 1)
    root.new_object("z").set("copy", root.get("src"))
    assert to_dict(root) == {"src": {"x": 1}, "z": {"copy": {"x": 1}}}


def test_copy_object_into_a_path_through_a_value_raises() -> None:
    _, root = new_memory()
    root.set("a.x", 1)
    root.set("v", 1)
    with pytest.raises(MemoryPathError, match="'v' holds a value"):
        root.set("v.copy", root.get("a"))


def test_copy_between_two_memories() -> None:
    source_state, source = new_memory()
    target_state, target = new_memory()
    source.set("a.x", [1])
    source.set("a.n.m", {"k": "v"})
    target.set("imported", source.get("a"))
    source.set("a.x", [2])
    assert to_dict(target) == {"imported": {"x": [1], "n": {"m": {"k": "v"}}}}
    assert target_state.data["imported.x"] is not source_state.data["a.x"]


def test_copy_whole_root_into_another_memory() -> None:
    _, source = new_memory()
    _, target = new_memory()
    source.set("x", 1)
    source.set("o.y", 2)
    target.set("backup", source)
    assert to_dict(target) == {"backup": {"x": 1, "o": {"y": 2}}}


def test_copy_between_two_memories_to_the_same_path() -> None:
    _, source = new_memory()
    _, target = new_memory()
    source.set("a.x", 1)
    target.set("a", source.get("a"))
    assert to_dict(target) == {"a": {"x": 1}}


def test_copy_between_two_memories_replaces_same_path() -> None:
    _, source = new_memory()
    _, target = new_memory()
    source.set("a.x", 1)
    target.set("a", "old")
    target.set("a", source.get("a"))
    assert to_dict(target) == {"a": {"x": 1}}


# -- no scans -----------------------------------------------------------------------------


class StrictState:
    """A ``StateMap`` that counts calls and fails the test when anything iterates over it."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.calls: Counter[str] = Counter()

    def get(self, key: str) -> Any:
        self.calls["get"] += 1
        return self.data.get(key)

    def put(self, key: str, value: Any) -> None:
        self.calls["put"] += 1
        self.data[key] = value

    def remove(self, key: str) -> None:
        self.calls["remove"] += 1
        self.data.pop(key, None)

    def contains(self, key: str) -> bool:
        self.calls["contains"] += 1
        return key in self.data

    def clear(self) -> None:
        self.calls["clear"] += 1
        self.data.clear()

    def _scan(self, *args: Any) -> Any:
        raise AssertionError("memory scanned the state map")

    __iter__ = __len__ = __contains__ = keys = items = values = _scan


def strict_memory(bulk: int) -> tuple[StrictState, MemoryObject]:
    """A memory holding ``bulk`` unrelated fields at the root and in an object."""
    state = StrictState()
    root = FlatMemory(state).root()
    for i in range(bulk):
        root.set(f"r{i}", i)
        root.set(f"bulk.f{i}", [i])
    root.set("t.u.v", 1)
    root.set("t.u.w", 2)
    root.set("t.s", 3)
    state.calls.clear()
    return state, root


OPERATIONS: dict[str, Callable[[MemoryObject], Any]] = {
    "get": lambda root: root.get("t.u.v"),
    "get_object": lambda root: root.get_object("t.u"),
    "is_exist": lambda root: root.is_exist("t.u.x"),
    "set_replace": lambda root: root.set("t.u.v", [5]),
    "set_new_deep": lambda root: root.set("t.n.m.k", 1),
    "new_object": lambda root: root.new_object("t.u"),
    "delete_leaf": lambda root: root.delete("t.u.w"),
    "delete_subtree": lambda root: root.delete("t.u"),
    "delete_absent": lambda root: root.delete("t.q.r"),
    "field_names": lambda root: root.get_object("t.u").get_field_names(),
    "fields": lambda root: root.get_object("t.u").get_fields(),
    "copy": lambda root: root.set("t.c", root.get("t.u")),
    "copy_into_descendant": lambda root: root.set("t.u.c", root.get("t")),
}


@pytest.mark.parametrize("operation", OPERATIONS)
def test_operation_cost_does_not_depend_on_map_size(operation: str) -> None:
    """Same StateMap calls whether 0 or 300 unrelated fields exist; nothing iterates the map."""
    small_state, small_root = strict_memory(bulk=0)
    big_state, big_root = strict_memory(bulk=300)
    OPERATIONS[operation](small_root)
    OPERATIONS[operation](big_root)
    assert big_state.calls == small_state.calls
    assert sum(big_state.calls.values()) <= 20


def test_seed_example_on_strict_state() -> None:
    state = StrictState()
    root = FlatMemory(state).root()
    root.set("x", 100)
    obj_z = root.new_object("z")
    obj_z.set("n.j", True)
    root.set("copy", obj_z)
    root.delete("z")
    assert to_dict(root) == {"x": 100, "copy": {"n": {"j": True}}}


class Holder(BaseModel):
    """A model whose field takes anything: valid for pydantic, not always storable."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    payload: Any = None


def test_a_model_that_cannot_be_serialized_is_refused_at_set() -> None:
    """Flink state and the action log pickle values: what they cannot store is refused
    here, naming the path and the type, in the local runner exactly as on Flink."""
    _, root = new_memory()
    with pytest.raises(
        MemoryValueError, match=r"cannot store Holder at 'a\.b': it cannot be serialized"
    ):
        root.set("a.b", Holder(payload=lambda: 1))
    with socket.socket() as open_socket, pytest.raises(MemoryValueError, match="Holder at 'c'"):
        root.set("c", Holder(payload=open_socket))
    assert root.get_field_names() == []
    root.set("ok", Holder(payload={"n": 1}))
    assert root.get("ok") == Holder(payload={"n": 1})


# -- one field at a time (the common case, which skips the path checks) ---------------------


def test_a_plain_value_over_a_field_holding_an_object_drops_the_object() -> None:
    state = DictState()
    root = FlatMemory(state).root()
    root.new_object("profile").set("name", "Ada")
    root.set("profile", 3)
    assert state.data == {"": ObjectMarker(("profile",)), "profile": 3}
    assert root.get("profile") == 3


def test_one_field_writes_and_reads_keep_the_map_well_formed() -> None:
    state = DictState()
    root = FlatMemory(state).root()
    root.set("count", 1)  # no root marker yet: created
    root.set("count", 2)  # the field exists: one put
    child = root.new_object("child")
    child.set("n", 5)
    child.set("n", 6)
    root.set("color", Color.RED)  # a str subclass: stored as given, by the general path
    assert state.data == {
        "": ObjectMarker(("count", "child", "color")),
        "count": 2,
        "child": ObjectMarker(("n",)),
        "child.n": 6,
        "color": Color.RED,
    }
    assert isinstance(root.get("child"), MemoryObject)
    assert child.get("n") == 6 and root.get("missing") is None


def test_one_field_reads_hand_out_copies() -> None:
    root = FlatMemory(DictState()).root()
    root.set("items", [1, [2]])
    got = root.get("items")
    got[1].append(3)
    assert root.get("items") == [1, [2]]


def test_one_field_writes_still_refuse_bad_paths_and_values() -> None:
    root = FlatMemory(DictState()).root()
    root.set("x", 1)
    with pytest.raises(MemoryPathError):
        root.set("", 2)
    with pytest.raises(MemoryPathError):
        root.get("")
    with pytest.raises(MemoryValueError):
        root.set("x", threading.Lock())
    assert root.get("x") == 1


def test_new_object_without_overwrite_refuses_a_plain_value() -> None:
    """Apache Flink Agents' agents call ``new_object(path, overwrite=False)`` (their default)."""
    _, root = new_memory()
    root.set("v", [1])
    root.new_object("o").set("x", 1)
    with pytest.raises(MemoryPathError, match=r"'v' holds a value, not an object"):
        root.new_object("v", overwrite=False)
    assert root.get("v") == [1]
    assert root.new_object("o", overwrite=False).get_field_names() == []
    ref = root.set("o.y", 2)
    assert (ref.memory_type, ref.path) == ("short_term", "o.y")
    assert root.get(ref) == 2
