"""Property tests: random operation sequences on FlatMemory agree with a nested-dict model.

After every step the results, the whole tree and the flattened map itself (exact keys,
markers listing fields in creation order) must match what the model implies. The same
sequences run through a ``BufferedState`` overlay must produce the same map once its delta
is applied.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flink_agents.api import MemoryObject, MemoryPathError, MemoryRef, MemoryType
from flink_agents.memory import BufferedState, DictState, FlatMemory, ObjectMarker

SEGMENTS = ("a", "b", "c")


class Obj(dict):
    """A memory object in the model; a dict *value* is a plain ``dict``."""


class Model:
    """The reference: nested ``Obj`` s, field order = dict insertion order."""

    def __init__(self) -> None:
        self.root = Obj()

    def _parent(self, path: str, create: bool) -> Obj | None:
        node = self.root
        for name in path.split(".")[:-1]:
            if name not in node:
                if not create:
                    return None
                node[name] = Obj()
            node = node[name]
            if not isinstance(node, Obj):
                if create:
                    raise MemoryPathError(path)
                return None
        return node

    def get(self, path: str) -> Any:
        parent = self._parent(path, create=False)
        return None if parent is None else parent.get(path.rpartition(".")[2])

    def is_exist(self, path: str) -> bool:
        parent = self._parent(path, create=False)
        return parent is not None and path.rpartition(".")[2] in parent

    def set(self, path: str, value: Any) -> MemoryRef:
        self._parent(path, create=True)[path.rpartition(".")[2]] = copy.deepcopy(value)
        return MemoryRef(MemoryType.SHORT_TERM, path)

    def delete(self, path: str) -> bool:
        if not self.is_exist(path):
            return False
        del self._parent(path, create=False)[path.rpartition(".")[2]]
        return True


# -- strategies ---------------------------------------------------------------------------

# Each depth equally likely, so short paths (and collisions between ops) are frequent.
paths = st.one_of(
    *(st.lists(st.sampled_from(SEGMENTS), min_size=n, max_size=n).map(".".join) for n in (1, 2, 3))
)
scalars = st.none() | st.integers(-2, 2) | st.sampled_from(["", "s", "tt"])
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(SEGMENTS), inner, max_size=3)
    ),
    max_leaves=6,
)

# A path, or an int picking one of the paths written so far (so that ops often collide).
path_or_ref = st.one_of(paths, st.integers(0, 99))
handle = st.booleans()
operations = st.one_of(
    st.tuples(st.just("set"), path_or_ref, values, handle),
    st.tuples(st.just("copy"), path_or_ref, path_or_ref, handle),
    st.tuples(st.just("new_object"), path_or_ref, st.none(), handle),
    st.tuples(st.just("delete"), path_or_ref, st.none(), handle),
    st.tuples(st.just("get"), path_or_ref, st.none(), handle),
    st.tuples(st.just("get_object"), path_or_ref, st.none(), handle),
    st.tuples(st.just("is_exist"), path_or_ref, st.none(), handle),
    st.tuples(st.just("fields"), st.just("") | path_or_ref, st.none(), st.just(False)),
)
op_lists = st.lists(operations, min_size=10, max_size=40)
base_op_lists = st.lists(operations, max_size=20)  # may leave the base empty


def resolve(raw_ops: list[tuple[str, Any, Any, bool]]) -> list[tuple[str, str, Any, bool]]:
    """Replace path references by paths written earlier (or "a" when there is none)."""
    written: list[str] = []

    def path(ref: Any) -> str:
        if isinstance(ref, str):
            return ref
        return written[ref % len(written)] if written else "a"

    ops = []
    for kind, ref, arg, through_handle in raw_ops:
        op = (kind, path(ref), path(arg) if kind == "copy" else arg, through_handle)
        if kind in ("set", "copy", "new_object"):
            segments = op[1].split(".")
            prefixes = (".".join(segments[:n]) for n in range(1, len(segments) + 1))
            written.extend(p for p in prefixes if p not in written)
        ops.append(op)
    return ops


# -- comparing memory with the model ------------------------------------------------------


def snapshot(obj: MemoryObject) -> list[tuple[str, Any]]:
    """The subtree as ordered (name, value) pairs; objects as ("object", pairs)."""
    return [(name, tagged(value)) for name, value in obj.get_fields().items()]


def tagged(value: Any) -> Any:
    return ("object", snapshot(value)) if isinstance(value, MemoryObject) else ("value", value)


def model_snapshot(obj: Obj) -> list[tuple[str, Any]]:
    return [(name, model_tagged(value)) for name, value in obj.items()]


def model_tagged(value: Any) -> Any:
    return ("object", model_snapshot(value)) if isinstance(value, Obj) else ("value", value)


def expected_map(model: Model) -> dict[str, Any]:
    """The flattened map the model implies: markers list fields in creation order."""
    out: dict[str, Any] = {}

    def walk(key: str, obj: Obj) -> None:
        out[key] = ObjectMarker(tuple(obj))
        for name, value in obj.items():
            child = f"{key}.{name}" if key else name
            if isinstance(value, Obj):
                walk(child, value)
            else:
                out[child] = value

    walk("", model.root)
    return out


def check_map(actual: dict[str, Any], model: Model) -> None:
    expected = expected_map(model)
    if "" not in actual:  # the root marker may be absent only while memory was never written
        assert not model.root, actual
        del expected[""]
    assert actual == expected


def mutate(value: Any) -> None:
    """Change a caller-side list or dict in place: memory must not notice."""
    if isinstance(value, list):
        value.append("mutated")
    elif isinstance(value, dict):
        value["mutated"] = 1


def outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except MemoryPathError:
        return ("MemoryPathError", None)


def run_step(root: MemoryObject, model: Model, op: tuple[str, str, Any, bool]) -> None:
    kind, path, arg, through_handle = op
    target, rel = root, path
    first, _, rest = path.partition(".")
    if through_handle and rest and isinstance(root.get(first), MemoryObject):
        target, rel = root.get(first), rest  # same operation through a child's handle

    if kind == "set":
        value = copy.deepcopy(arg)
        got = outcome(lambda: target.set(rel, value))
        assert got == outcome(lambda: model.set(path, arg)), op
        mutate(value)
    elif kind == "copy":
        source = root.get(arg)
        if isinstance(source, MemoryObject):
            got = outcome(lambda: target.set(rel, source))
            assert got == outcome(lambda: model.set(path, model.get(arg))), op
    elif kind == "new_object":
        got = outcome(lambda: target.new_object(rel))
        expected = outcome(lambda: model.set(path, Obj()))
        assert got[0] == expected[0], op
        if got[0] == "ok":
            assert isinstance(got[1], MemoryObject)
            assert got[1].get_field_names() == []
    elif kind == "delete":
        assert target.delete(rel) == model.delete(path), op
    elif kind == "get":
        value = target.get(rel)
        assert tagged(value) == model_tagged(model.get(path)), op
        mutate(value)
    elif kind == "get_object":
        expected = model.get(path)
        if isinstance(expected, Obj) or not model.is_exist(path):
            found = target.get_object(rel)
            assert (None if found is None else tagged(found)) == (
                None if expected is None else model_tagged(expected)
            ), op
        else:
            assert outcome(lambda: target.get_object(rel))[0] == "MemoryPathError", op
    elif kind == "is_exist":
        assert target.is_exist(rel) == model.is_exist(path), op
    elif kind == "fields":
        obj = root if path == "" else root.get(path)
        expected = model.root if path == "" else model.get(path)
        if isinstance(expected, Obj):
            assert obj.get_field_names() == list(expected), op
            assert snapshot(obj) == model_snapshot(expected), op

    assert snapshot(root) == model_snapshot(model.root), op


def buffered_view(buffer: BufferedState, base: DictState) -> dict[str, Any]:
    """What the overlay holds, read only through the ``StateMap`` methods and its delta."""
    delta = buffer.delta()
    candidates = set(base.data) | set(delta.puts) | set(delta.removals)
    return {key: buffer.get(key) for key in candidates if buffer.contains(key)}


# -- properties ---------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(op_lists)
def test_flat_memory_matches_model(raw_ops: list) -> None:
    ops = resolve(raw_ops)
    state, model = DictState(), Model()
    root = FlatMemory(state).root()
    for op in ops:
        run_step(root, model, op)
        check_map(state.data, model)


@settings(max_examples=200, deadline=None)
@given(base_op_lists, op_lists)
def test_buffered_overlay_matches_direct(raw_before: list, raw_ops: list) -> None:
    """Ops through an overlay over a populated base, once applied, equal the same ops direct."""
    before = resolve(raw_before)
    ops = resolve(raw_before + raw_ops)[len(raw_before) :]
    base, model = DictState(), Model()
    for op in before:
        run_step(FlatMemory(base).root(), model, op)
    direct = DictState(dict(base.data))
    direct_model = copy.deepcopy(model)
    base_before = dict(base.data)

    buffer = BufferedState(base)
    buffered_root = FlatMemory(buffer).root()
    direct_root = FlatMemory(direct).root()
    for op in ops:
        run_step(buffered_root, model, op)
        check_map(buffered_view(buffer, base), model)
        run_step(direct_root, direct_model, op)

    assert base.data == base_before  # untouched until the delta is applied
    buffer.delta().apply_to(base)
    assert base.data == direct.data
    check_map(base.data, model)
