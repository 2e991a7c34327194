"""CachedState: a run's write-back cache over a memory map reads and writes like the map
itself, touches the map at most once per key for reads, and leaves it equal after flush."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flink_agents.memory import BufferedState, CachedState, DictState, ObjectMarker

KEY_NAMES = ["", "a", "a.b", "c"]
KEYS = st.sampled_from(KEY_NAMES)
VALUES = st.one_of(st.none(), st.integers(), st.text(max_size=3))
ACTION_OP = st.one_of(  # what an action can do to a map
    st.tuples(st.just("get"), KEYS),
    st.tuples(st.just("contains"), KEYS),
    st.tuples(st.just("put"), KEYS, VALUES),
    st.tuples(st.just("remove"), KEYS),
    st.tuples(st.just("clear")),
)
OPS = st.lists(st.one_of(ACTION_OP, st.tuples(st.just("flush"))), max_size=40)


class CountingState(DictState):
    """A DictState that counts the requests it serves."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        super().__init__(data)
        self.reads = 0
        self.clears = 0

    def get(self, key: str) -> Any:
        self.reads += 1
        return super().get(key)

    def contains(self, key: str) -> bool:
        self.reads += 1
        return super().contains(key)

    def clear(self) -> None:
        self.clears += 1
        super().clear()


@given(st.dictionaries(KEYS, VALUES), OPS)
def test_cached_state_behaves_like_the_map_and_flushes_to_it(initial, ops) -> None:
    model = DictState(dict(initial))
    base = DictState(dict(initial))
    cached = CachedState(base)
    for op, *args in ops:
        if op == "flush":
            cached.flush()
            continue
        expected = getattr(model, op)(*args)
        assert getattr(cached, op)(*args) == expected, (op, args)
    cached.flush()
    assert base.data == model.data


def test_each_key_is_read_from_the_map_once_and_written_once() -> None:
    base = CountingState({"": "marker", "count": 1})
    cached = CachedState(base)
    for _ in range(3):
        cached.put("count", cached.get("count") + 1)
        assert cached.get("") == "marker" and cached.contains("")
    assert base.reads == 2 and base.data["count"] == 1  # nothing written yet
    cached.flush()
    assert base.data == {"": "marker", "count": 4}


def test_a_shared_cache_serves_the_next_callback_and_knows_a_cleared_map_is_complete():
    base = CountingState({"": "root", "a": 1})
    first = CachedState(base)
    assert first.get("a") == 1 and base.reads == 1
    first.flush()
    second = CachedState(base, first.cache)  # the next callback of the same key
    assert second.get("a") == 1 and base.reads == 1  # not read again
    second.clear()
    second.put("n", None)  # a stored None
    second.flush()
    third = CachedState(base, second.cache)
    # After the flushed clear the cache holds every key: a key it lacks is not read.
    assert third.get("a") is None and not third.contains("a") and base.reads == 1
    # A cached None may be a stored None: the base is asked.
    assert third.contains("n") and base.data == {"n": None}


def test_a_map_known_to_be_empty_is_not_cleared_again():
    """A run's sensory memory: written during the run, cleared at its end. Once a clear is
    flushed and nothing was written since, the next runs' clears cost the map nothing."""
    base = CountingState({"": "root", "topic": "x"})  # left by a run restored from state
    cache: dict = {}
    for run in range(3):
        sensory = CachedState(base, cache)
        sensory.put("", "root")
        sensory.put("topic", f"run {run}")
        sensory.clear()  # the run ends
        sensory.flush()
        cache = sensory.cache
    assert base.clears == 1 and base.data == {} and base.reads == 0
    parked = CachedState(base, cache)  # a run that parks: its writes reach the map
    parked.put("topic", "parked")
    parked.flush()
    resumed = CachedState(base, parked.cache)
    resumed.clear()
    resumed.flush()
    assert base.clears == 2 and base.data == {}


@given(st.dictionaries(KEYS, VALUES), OPS)
def test_writing_puts_together_leaves_the_same_map(initial, ops) -> None:
    model = DictState(dict(initial))
    base = DictState(dict(initial))
    cached = CachedState(base, put_all=True)
    for op, *args in ops:
        if op == "flush":
            cached.flush()
            continue
        getattr(model, op)(*args)
        getattr(cached, op)(*args)
    cached.flush()
    assert base.data == model.data


def test_several_puts_are_one_put_all_and_removals_stay_single():
    class Recording(DictState):
        def __init__(self, data: dict[str, Any]) -> None:
            super().__init__(data)
            self.calls: list[tuple[str, Any]] = []

        def put(self, key: str, value: Any) -> None:
            self.calls.append(("put", key))
            super().put(key, value)

        def put_all(self, entries: dict[str, Any]) -> None:
            self.calls.append(("put_all", dict(entries)))
            super().put_all(entries)

        def remove(self, key: str) -> None:
            self.calls.append(("remove", key))
            super().remove(key)

    base = Recording({"old": 0})
    cached = CachedState(base, put_all=True)
    cached.put("a", 1)
    cached.put("b", 2)
    cached.remove("old")
    cached.flush()
    assert base.calls == [("remove", "old"), ("put_all", {"a": 1, "b": 2})]
    cached.put("a", 3)  # a single put needs no dict
    cached.flush()
    assert base.calls[-1] == ("put", "a") and base.data == {"a": 3, "b": 2}


ACTION_OPS = st.lists(ACTION_OP, max_size=20)


def _replay(ops: list, *states: Any) -> None:
    for op, *args in ops:
        if op == "flush":
            getattr(states[-1], "flush", lambda: None)()
            continue
        results = {repr(getattr(state, op)(*args)) for state in states}
        assert len(results) == 1, (op, args, results)


@given(st.dictionaries(KEYS, VALUES), OPS, ACTION_OPS, st.booleans())
def test_an_action_s_writes_are_kept_or_taken_back_whole(initial, before, action, keep) -> None:
    """Between ``begin`` and ``commit`` the cache records what writes replace: ``rollback``
    leaves it as it was at ``begin`` (reads, and what a flush writes) and returns the
    writes as the delta a buffer over it would have held."""
    model = DictState(dict(initial))
    base = DictState(dict(initial))
    cached = CachedState(base)
    _replay(before, model, cached)
    at_begin = dict(model.data)
    cached.begin()
    _replay(action, model, cached)
    after = dict(model.data)
    if keep:
        assert cached.commit() == any(op in ("put", "remove", "clear") for op, *_ in action)
    else:
        delta = cached.rollback()
        for key in KEY_NAMES:
            assert cached.get(key) == at_begin.get(key)
            assert cached.contains(key) == (key in at_begin)
        redone = DictState(dict(at_begin))
        delta.apply_to(redone)
        assert redone.data == after
        buffer = BufferedState(cached)  # the same writes, loaded into a buffer
        buffer.load(delta)
        assert buffer.delta() == delta
        for key in KEY_NAMES:
            assert buffer.get(key) == after.get(key)
            assert buffer.contains(key) == (key in after)
    cached.flush()
    assert base.data == (after if keep else at_begin)


class KeysRead(DictState):
    """A DictState that lists the keys read from it."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.read: list[str] = []

    def get(self, key: str) -> Any:
        self.read.append(key)
        return super().get(key)

    def contains(self, key: str) -> bool:
        self.read.append(key)
        return super().contains(key)


def test_a_field_read_then_written_reads_no_marker() -> None:
    """A key read back from the map: reading a field and writing it back (the memory agent's
    run) reads that field alone; a field it has not read needs its object's marker."""
    base = KeysRead(
        {
            "": ObjectMarker(("count", "profile")),
            "count": 1,
            "profile": ObjectMarker(("name",)),
            "profile.name": "Ada",
        }
    )
    cached = CachedState(base)
    root = cached.begin()
    root.set("count", root.get("count") + 1)
    root.set("profile.name", root.get("profile.name") + "!")
    assert base.read == ["count", "profile.name"]
    root.set("other", 1)  # a new field: the root's marker is read, and lists it
    assert base.read[2:] == [""] and "other" in cached.get("").fields
    cached.commit()
    cached.flush()
    assert (base.data["count"], base.data["profile.name"]) == (2, "Ada!")
    assert base.data[""] == ObjectMarker(("count", "profile", "other"))
