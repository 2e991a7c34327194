"""Where ``_FlinkKeyState`` keeps a key's control value: an idle key's run sequence with its
short-term memory's root (no entry of its own), any other in the ``control`` ValueState,
never in both; and keys written by earlier releases (the sequence in the ValueState, the
root its marker alone) read back and move over on their next write.

Over stand-ins for PyFlink's keyed state (one key's): the placement is the dispatcher's own
logic; the Flink suites (parity, state backends, the compatibility restore) run it on
Flink."""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents.api import InputEvent
from flink_agents.memory import CachedState, DictState, FlatMemory, StateFormatError, to_dict
from flink_agents.runtime._driver import KeyControl
from flink_agents.runtime._persisted import encode_control
from flink_agents.runtime._run_state import PendingAction, RunState
from flink_agents.runtime.flink._dispatcher import _FlinkKeyState


class MapState(DictState):
    """One key's ``MapState``, counting the calls a callback makes into it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def get(self, key: str) -> Any:
        self.calls += 1
        return super().get(key)

    def put(self, key: str, value: Any) -> None:
        self.calls += 1
        super().put(key, value)

    def put_all(self, entries: dict[str, Any]) -> None:
        self.calls += 1
        super().put_all(entries)


class ValueState:
    def __init__(self) -> None:
        self.stored: Any = None
        self.calls = 0

    def value(self) -> Any:
        self.calls += 1
        return self.stored

    def update(self, value: Any) -> None:
        self.calls += 1
        self.stored = value

    def clear(self) -> None:
        self.calls += 1
        self.stored = None


class RuntimeContext:
    def __init__(self) -> None:
        self.maps: dict[str, MapState] = {}
        self.control = ValueState()

    def get_map_state(self, descriptor: Any) -> MapState:
        return self.maps.setdefault(descriptor.name, MapState())

    def get_state(self, descriptor: Any) -> ValueState:
        assert descriptor.name == "control"
        return self.control

    def get_list_state(self, descriptor: Any) -> Any:
        return None


def key_state(
    expiring: bool = False, context: RuntimeContext | None = None
) -> tuple[_FlinkKeyState, MapState, ValueState]:
    """A key's state over ``context`` (a new one if None)."""
    context = context or RuntimeContext()
    state = _FlinkKeyState(context, batch_puts=True, expiring=expiring)
    return state, context.maps["short_term"], context.control


def callback(state: _FlinkKeyState, work: Any = None) -> KeyControl:
    """One callback as the driver makes it: read the control value through the key's
    short-term memory, let ``work(control, memory)`` change both, write both."""
    short_term = CachedState(state.short_term, put_all=True)
    control = state.control(short_term) or KeyControl()
    if work is not None:
        work(control, FlatMemory(short_term).root())
    state.set_control(control, short_term)
    short_term.flush()
    return control


def run(control: KeyControl, memory: Any) -> None:
    control.sequence += 1
    memory.set("count", (memory.get("count") or 0) + 1)


def parked_run(sequence: int) -> RunState:
    event = InputEvent(input={"n": sequence})
    return RunState(key="k", sequence=sequence, input=event, queue=[PendingAction(event, "act")])


def test_an_idle_key_keeps_its_run_sequence_with_its_roots_marker() -> None:
    state, short_term, control = key_state()
    for _ in range(3):
        callback(state, run)
    assert short_term.data == {"": (2, ("count",), 3), "count": 3}
    # No entry; read once, for the new key (no root yet), never written.
    assert control.stored is None and control.calls == 1
    # A key read back: one read of the root gives its sequence and the memory's marker.
    short_term.calls = 0
    assert callback(state).sequence == 3
    assert short_term.calls == 2  # the root's read, and its write with the sequence


def test_a_key_without_memory_keeps_its_sequence_in_an_empty_root() -> None:
    state, short_term, control = key_state()
    callback(state, lambda c, m: setattr(c, "sequence", 1))
    assert short_term.data == {"": (2, (), 1)} and control.stored is None
    assert callback(state).sequence == 1


def test_a_busy_key_moves_to_the_value_state_and_back() -> None:
    state, short_term, control = key_state()
    callback(state, run)

    def park(c: KeyControl, memory: Any) -> None:
        run(c, memory)
        c.run, c.pending = parked_run(c.sequence), 1

    callback(state, park)
    # The root holds its marker alone: a sequence there would be read as an idle key's.
    assert short_term.data[""] == (1, ("count",))
    assert control.stored == encode_control(read(state))
    busy = read(state)
    assert (busy.sequence, busy.pending, busy.run.sequence) == (2, 1, 2)

    def end(c: KeyControl, memory: Any) -> None:
        c.run, c.pending = None, 0
        run(c, memory)

    callback(state, end)
    assert short_term.data == {"": (2, ("count",), 3), "count": 3}
    assert control.stored is None


def read(state: _FlinkKeyState) -> KeyControl:
    return state.control(CachedState(state.short_term))


@pytest.mark.parametrize("release", ["0.2.0", "0.3.0"])
def test_a_key_written_by_an_earlier_release_reads_back_and_moves_over(release: str) -> None:
    """Earlier releases kept an idle key's sequence in the ValueState (an int), its root a
    marker alone (0.2.0: the pickled ``ObjectMarker`` itself)."""
    from flink_agents.memory import ObjectMarker

    state, short_term, control = key_state()
    root = ObjectMarker(("count",)) if release == "0.2.0" else (1, ("count",))
    short_term.data.update({"": root, "count": 4})
    control.stored = 4
    found = read(state)
    assert found.sequence == 4 and found.apart
    callback(state, run)
    assert short_term.data == {"": (2, ("count",), 5), "count": 5}
    assert control.stored is None
    assert to_dict(FlatMemory(CachedState(state.short_term)).root()) == {"count": 5}


def test_a_forgotten_key_keeps_no_sequence() -> None:
    state, short_term, control = key_state()
    callback(state, run)

    def forget(c: KeyControl, memory: Any) -> None:
        c.sequence = 0
        memory.memory.clear()

    callback(state, forget)
    assert short_term.data == {} and control.stored is None
    assert read(state) is None


def test_a_job_with_a_memory_ttl_keeps_its_keys_apart_and_reads_there_first() -> None:
    state, short_term, control = key_state(expiring=True)

    def expiring(c: KeyControl, memory: Any) -> None:
        run(c, memory)
        c.active_ms, c.cleanup_ms = 1_000, 61_000

    callback(state, expiring)
    assert short_term.data[""] == (1, ("count",))
    assert control.stored == ("flink-agents/control", 7, 1, 1_000, 61_000)
    short_term.calls = 0
    assert read(state).cleanup_ms == 61_000
    assert short_term.calls == 0  # found in the ValueState: the root not read
    # Keys written before the option was turned on are found in their root.
    context = RuntimeContext()
    callback(key_state(context=context)[0], run)
    assert read(key_state(expiring=True, context=context)[0]).sequence == 1


def test_a_root_of_a_later_format_is_refused() -> None:
    state, short_term, _ = key_state()
    short_term.data[""] = (3, ("count",), 1, "more")
    with pytest.raises(StateFormatError, match="format version 3"):
        read(state)


def test_the_driver_keeps_every_idle_key_in_its_root_through_evictions() -> None:
    """The driver's own callbacks over the dispatcher's key state: five keys in turn
    through a cache of two (most records read their key back), one of them restored from
    an earlier release's format. Each key's counts go on; none keeps a control value."""
    from flink_agents.plan import bind_plan, to_plan
    from flink_agents.runtime._driver import KeyDriver
    from flink_agents.runtime._engine import RunEngine
    from flink_agents.runtime._options import AgentOptions
    from tests.runtime.test_driver_cache import Clock, CounterAgent

    engine = RunEngine(
        bind_plan(to_plan(CounterAgent)), AgentOptions(state_cache_keys=2, action_log="none")
    )
    driver = KeyDriver(engine, errors="errors", snapshots="snapshots")
    states = {key: key_state() for key in "abcde"}
    _, old_short_term, old_control = states["e"]
    old_short_term.data.update({"": (1, ("count", "sum")), "count": 7, "sum": 70})
    old_control.stored = 7  # 0.2.0: an idle key's run sequence as an int of its own
    outputs = []
    for n in range(25):
        key = "abcde"[n % 5]
        outputs.extend(driver.on_record(key, 1, states[key][0], Clock()))
    engine.close()
    assert [output for output in outputs if output[0] == "e"][-1] == ("e", 12, 75)
    for key, (_, short_term, control) in states.items():
        runs = 12 if key == "e" else 5
        assert short_term.data[""] == (2, ("count", "sum"), runs), key
        assert control.stored is None, key
