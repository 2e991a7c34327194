"""The driver's per-key cache (``state-cache-keys``): what it last wrote or read of a key is
not read back from state, every change is still written at the end of its callback, and
evicted or disabled entries fall back to reading state, with the same results."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.memory import CachedState, DictState
from flink_agents.plan import bind_plan, to_plan
from flink_agents.runtime._driver import KeyControl, KeyDriver
from flink_agents.runtime._engine import RunEngine
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal


class Counted(Event):
    n: int
    count: int


class CounterAgent(Agent):
    """A counter and a sum in short-term memory, a note in sensory memory."""

    @action(InputEvent)
    def count(event: InputEvent, ctx: RunnerContext) -> None:
        count = (ctx.short_term_memory.get("count") or 0) + 1
        ctx.short_term_memory.set("count", count)
        ctx.sensory_memory.set("note", event.input)
        ctx.send_event(Counted(n=event.input, count=count))

    @action(Counted)
    def total(event: Counted, ctx: RunnerContext) -> None:
        total = (ctx.short_term_memory.get("sum") or 0) + event.n
        ctx.short_term_memory.set("sum", total)
        assert ctx.sensory_memory.get("note") == event.n  # the run's own sensory write
        ctx.send_event(OutputEvent(output=(ctx.key, event.count, total)))


class CountingMap(DictState):
    """A ``StateMap`` that counts reads and writes, as a Flink ``MapState`` would be called."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def get(self, key: str) -> Any:
        self.calls["get"] += 1
        return super().get(key)

    def contains(self, key: str) -> bool:
        self.calls["get"] += 1
        return super().contains(key)

    def put(self, key: str, value: Any) -> None:
        self.calls["put"] += 1
        super().put(key, value)

    def put_all(self, entries: dict[str, Any]) -> None:
        self.calls["put_all"] += 1
        self.calls["entries put"] += len(entries)
        super().put_all(entries)

    def clear(self) -> None:
        self.calls["clear"] += 1
        super().clear()


class CountingKeyState:
    """A ``KeyState`` that counts reads of the control value and hands out copies."""

    batch_puts = True

    def __init__(self) -> None:
        self.sensory = CountingMap()
        self.short_term = CountingMap()
        self.stored: tuple[int, Any, int] | None = None
        self.control_reads = 0
        self.control_writes = 0

    def control(self, short_term: CachedState) -> KeyControl | None:
        self.control_reads += 1
        return None if self.stored is None else KeyControl(*self.stored)

    def set_control(self, control: KeyControl, short_term: CachedState) -> None:
        self.control_writes += 1
        self.stored = (control.sequence, control.run, control.pending)

    def push_pending(self, record: Any) -> None:
        raise AssertionError("no run parks here")

    def pop_pending(self) -> Any:
        raise AssertionError("no run parks here")


class Clock:
    def now_ms(self) -> int:
        return 0

    def wake_at(self, due_ms: int) -> None:
        pass

    def wake_at_end(self) -> None:
        pass


def drive(cache_keys: int, keys: list[str], records: int):
    return drive_keys(cache_keys, [keys[n % len(keys)] for n in range(records)])


def test_a_cached_key_is_read_once_and_written_at_every_run():
    outputs, states = drive(4096, ["a", "b"], 20)
    for state in states.values():
        assert state.control_reads == 1  # its first record only
        assert state.control_writes == 10  # every run
        # The first run reads count, the root marker and sum once each; later runs nothing.
        assert state.short_term.calls["get"] == 3
        # Count and sum, every run (and the root marker in the first), in one call each run
        # (a state whose maps write several entries at once, as PyFlink's in thread mode).
        assert state.short_term.calls["put_all"] == 10 and state.short_term.calls["put"] == 0
        assert state.short_term.calls["entries put"] == 10 * 2 + 1
        # The run's sensory memory: cleared in the map at the end of the first run only;
        # then the cache knows the map is empty, and runs that never park never write it.
        assert state.sensory.calls["clear"] == 1
        assert state.sensory.calls["put"] == 0
        # Its root marker is read in the first run only: once a clear is written, the cache
        # knows the map holds nothing else.
        assert state.sensory.calls["get"] == 1
        assert state.short_term.data["count"] == 10
        assert state.stored[0] == 10
    assert outputs[-1] == ("b", 10, sum(range(1, 20, 2)))


@pytest.mark.parametrize("cache_keys", [0, 1])
def test_keys_not_cached_read_state_with_the_same_results(cache_keys):
    cached, cached_states = drive(4096, ["a", "b", "c"], 30)
    outputs, states = drive(cache_keys, ["a", "b", "c"], 30)
    assert outputs == cached
    for key, state in states.items():
        # With room for one key, "a" (the first) stays: "b" and "c", in turn, are never
        # seen again soon enough to be let in (``_admit``), so they are read every run.
        kept = cache_keys == 1 and key == "a"
        assert state.control_reads == (1 if kept else 10)
        # The first run reads count, the root marker (the key is new) and sum; each later
        # run its two fields alone: a field read before it is written needs no marker.
        assert state.short_term.calls["get"] == (3 if kept else 3 + 9 * 2)
        assert state.short_term.data == cached_states[key].short_term.data
        assert state.stored == cached_states[key].stored


def drive_keys(
    cache_keys: int, keys: Sequence[str]
) -> tuple[list[Any], dict[str, CountingKeyState]]:
    """One record for each of ``keys``, in order (record ``n`` is ``n``)."""
    engine = RunEngine(
        bind_plan(to_plan(CounterAgent)),
        AgentOptions(state_cache_keys=cache_keys, action_log="none"),
    )
    driver = KeyDriver(engine, errors="errors", snapshots="snapshots")
    states = {key: CountingKeyState() for key in set(keys)}
    outputs = []
    for n, key in enumerate(keys):
        outputs.extend(driver.on_record(key, n, states[key], Clock()))
    engine.close()
    return outputs, states


def test_a_full_cache_takes_a_key_seen_again_soon_in_place_of_the_least_recent():
    # "a" and "b" fill the cache; "a" is seen again. "c"'s first record leaves the cache
    # as it is; its second, soon after, lets it in, evicting "b", the least recent.
    outputs, states = drive_keys(2, "abaccab")
    assert states["a"].control_reads == 1  # cached from its first record on
    assert states["b"].control_reads == 2  # read again after its eviction
    assert states["c"].control_reads == 2  # not cached at its first record
    assert [output[1] for output in outputs] == [1, 1, 2, 1, 2, 3, 2]  # counts kept throughout


def test_keys_coming_round_in_turn_leave_the_cache_to_those_it_holds():
    # Twelve keys in turn through a cache of eight: least recently used alone would evict
    # every key before it comes round again, and read all of them every time; the cache
    # keeps its first eight, and the other four are read from state.
    keys = "abcdefghijkl"
    outputs, states = drive_keys(8, keys * 5)
    reads = {key: state.control_reads for key, state in states.items()}
    assert reads == {**dict.fromkeys("abcdefgh", 1), **dict.fromkeys("ijkl", 5)}
    assert [output[1] for output in outputs[-12:]] == [5] * 12


def test_the_option_is_validated():
    with pytest.raises(ValueError, match=r"state-cache-keys|state_cache_keys"):
        AgentOptions(state_cache_keys=-1)


def test_the_log_is_asked_about_pruning_at_the_first_record_then_every_64():
    journal = ActionJournal(InMemoryActionLog(), "job")
    asked = []
    ask = journal.maybe_prune
    journal.maybe_prune = lambda oldest: asked.append(oldest) or ask(oldest)
    engine = RunEngine(bind_plan(to_plan(CounterAgent)), AgentOptions(), journal=journal)
    driver = KeyDriver(engine, errors="errors", snapshots="snapshots")
    state = CountingKeyState()
    for n in range(130):  # records 1, 65 and 129 ask
        list(driver.on_record("a", n, state, Clock()))
    engine.close()
    assert len(asked) == 3
