"""Nothing of ours that outlives a record grows with the number of keys (issue 45, goal 4:
at a million keys a TaskManager's memory must stay near raw PyFlink's).

Many distinct keys run through cheap agents that use what real ones do: short-term and
sensory memory, an async action parked on a durable call recorded in the default action log
(SQLite), scheduled events, sleeping runs, long-term memory; metrics, the event log and
tracing on. Every table of ours that outlives a record is then read (``tables``): each is
empty again or at its cap. What no table listed here holds is caught by the interpreter's
count of allocated memory blocks (``sys.getallocatedblocks``): a second wave of keys must
leave no more blocks than the first. (``tracemalloc`` would do it by bytes, but it slows
every allocation about tenfold: a minute for 10,000 keys on the 2-core machine.)

``docs/architecture.md``, "What stays in memory per key", lists every structure, its bound
and the test that holds it.
"""

from __future__ import annotations

import gc
import heapq
import sys
from collections import defaultdict
from concurrent.futures import wait
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from flink_agents import _ids
from flink_agents._ids import key_text
from flink_agents.api import (
    Agent,
    Event,
    InputEvent,
    OutputEvent,
    action,
)
from flink_agents.plan import bind_plan, to_plan
from flink_agents.runtime import AgentOptions, LocalRunner, _engine, _local, _tracing
from flink_agents.runtime._driver import KeyDriver
from flink_agents.runtime._event_log import configured_event_log
from flink_agents.runtime._local import LocalKeyState
from flink_agents.runtime._tracing import RUNS_KEPT, Tracer
from flink_agents.runtime.action_log import (
    ActionIdentity,
    DurableCall,
    InMemoryActionLog,
    open_action_log,
)
from flink_agents.runtime.journal import ActionJournal

CACHE_KEYS = 256
"""``state-cache-keys`` of the many-key runs: small, so that the cache is full after the
first wave and a leak of its bound shows at once."""
WARM_UP = 1_000
WAVE = 6_000
"""Keys per measured wave: at most the 8,192 entries of ``_ids``' spelling caches, so that
both waves leave those as full (they are emptied before each wave)."""
FIVE_MINUTES = timedelta(minutes=5)


# -- the agents -------------------------------------------------------------------------------


class Work(Event):
    n: int


class Later(Event):
    n: int


def looked_up(n: int) -> int:
    return 2 * n


async def looked_up_async(n: int) -> int:
    return 3 * n


class ManyKeys(Agent):
    """Per record (its number ``n``): a counter in short-term memory and the input in sensory
    memory, then an async action parked on a durable call. One record in ten makes its call
    to an ``async def`` function (the call loop), one schedules an event five minutes on, one
    sleeps five minutes after its call."""

    @action(InputEvent)
    @staticmethod
    def remember(event: InputEvent, ctx) -> None:
        memory = ctx.short_term_memory
        memory.set("seen", (memory.get("seen") or 0) + 1)
        ctx.sensory_memory.set("input", event.input)
        ctx.send_event(Work(n=event.input))

    @action(Work)
    @staticmethod
    async def work(event: Work, ctx) -> None:
        kind = event.n % 10
        function = looked_up_async if kind == 2 else looked_up
        answer = await ctx.durable_execute_async(function, event.n)
        ctx.short_term_memory.set("answer", answer)
        if kind == 0:
            ctx.schedule(Later(n=event.n), delay=FIVE_MINUTES)
        elif kind == 1:
            await ctx.sleep(FIVE_MINUTES)
        ctx.send_event(OutputEvent(output=answer))

    @action(Later)
    @staticmethod
    def later(event: Later, ctx) -> None:
        ctx.send_event(OutputEvent(output=-event.n))


class Parks(Agent):
    """One async action parked on one durable call."""

    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        ctx.short_term_memory.set("answer", await ctx.durable_execute_async(looked_up, event.input))
        ctx.send_event(OutputEvent(output=event.input))


# -- reading the tables -----------------------------------------------------------------------


def tables(runner: LocalRunner) -> dict[str, int]:
    """The size of every table of ours that outlives a record and could take an entry per key
    or per run, by name: the driver's, its parked runs', the local runner's reorder buffer,
    the call loop's, the journal's, the tracer's and the metrics'. (Private attributes: this
    is the one place that reads them all.)"""
    driver, engine = runner.driver, runner.engine
    parked, journal, tracer, loop = driver.parked, engine.journal, engine.tracer, engine._call_loop
    return {
        "key cache": len(driver._keys),
        "keys seen lately": len(driver._sightings),
        "parked runs": len(parked),
        "calls in flight": parked.calls_in_flight() + len(parked._storing),
        "poll timers": len(parked._due),
        "sleeping runs' calls": len(driver._sleeping_since),
        "open inputs": len(runner._order._open),
        "held emissions": len(runner._order._held),
        "call loop": len(loop._tasks) + len(loop._incoming) + len(loop._ended),
        "run index": len(journal._index),
        "queued records": len(journal._calls._queue) + len(journal._writer._queue),
        "traced runs": len(tracer._runs) + len(tracer._replays),
        "traced run ids": len(tracer._known),
        "metrics": len(engine.metrics.registry.entries),
    }


def allocated_blocks() -> int:
    gc.collect()
    return sys.getallocatedblocks()


class Lines:
    """An event-log stream that counts its lines."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, line: str) -> None:
        self.count += 1


@pytest.fixture
def observed(monkeypatch: pytest.MonkeyPatch) -> Lines:
    """The local runner with its event log handed to a stream, as the Flink dispatcher's is
    with ``event-log-output: stream`` (the files cost two stats per line, most of the run),
    and tracing on, into a sink that drops the spans."""
    lines = Lines()

    def event_log(options: AgentOptions, subdirectory: str, job: str) -> Any:
        return configured_event_log(options, subdirectory, job, stream=lines)

    def tracer(options: AgentOptions, job: str, agent: str) -> Tracer:
        return Tracer(lambda span: None, job=job, agent=agent)

    monkeypatch.setattr(_local, "configured_event_log", event_log)
    monkeypatch.setattr(_engine, "configured_tracer", tracer)
    return lines


def run_wave(runner: LocalRunner, first: int, count: int) -> None:
    """Keys ``k<first>`` on, one record each, fed without waiting; then the input ends (every
    run done, every scheduled event fired, every sleeper woken). What the local runner keeps
    in Flink's place (keyed state, the sink's lists) is dropped: it lives outside the Python
    process there."""
    for cache in (_ids._key_text_of_str, _ids._json_string, _ids._input_id_base):
        cache.cache_clear()  # (lru caches: each wave fills them alike)
    for n in range(first, first + count):
        runner.feed(f"k{n}", n)
    runner.finish()
    runner.engine.journal.flush()
    assert len(runner.keyed_outputs) == count + count // 10  # every run, every later event
    runner._states.clear()
    runner.keyed_outputs.clear()
    runner.outputs_per_key.clear()


# -- the tests --------------------------------------------------------------------------------


def test_many_keys_leave_every_table_empty_or_at_its_cap(observed: Lines, tmp_path: Path):
    log = open_action_log(f"sqlite://{tmp_path / 'action-log.db'}")
    options = AgentOptions(
        event_log_level="standard", event_log_output="stream", state_cache_keys=CACHE_KEYS
    )
    runner = LocalRunner(ManyKeys, journal=ActionJournal(log, "bounds"), options=options)
    try:
        run_wave(runner, 0, WARM_UP)
        expected = {
            **dict.fromkeys(tables(runner), 0),
            "key cache": CACHE_KEYS,
            "traced run ids": RUNS_KEPT,
            "metrics": tables(runner)["metrics"],  # none per key: the same after any wave
        }
        sightings = CACHE_KEYS // 4  # (``KeyDriver._admit``: two generations of these)
        expected["keys seen lately"] = tables(runner)["keys seen lately"]
        assert sightings <= expected["keys seen lately"] < 2 * sightings
        assert tables(runner) == expected
        blocks = []
        for first in (WARM_UP, WARM_UP + WAVE):
            run_wave(runner, first, WAVE)
            seen = tables(runner)
            assert sightings <= seen.pop("keys seen lately") < 2 * sightings
            assert seen == {k: v for k, v in expected.items() if k != "keys seen lately"}
            blocks.append(allocated_blocks())
        assert observed.count > 5 * (WARM_UP + 2 * WAVE)  # the event log was on (lines per run)
        assert runner.engine.tracer.exported > 0
        # A table that kept one object per key would add at least WAVE blocks. (Other
        # threads' buffers come and go: a loaded machine once showed 1,580 more.)
        assert blocks[1] - blocks[0] < WAVE // 2, blocks
    finally:
        runner.close()


class SharedPolls:
    """What the Flink dispatcher does around the driver in thread mode, over dicts: a run
    whose call has finished is resumed from whichever callback comes next, its key made
    current (``resume_elsewhere``; here every ready run is resumed at once, as at a quiet
    input); timers fire in time order on a clock the test moves, one per key and time."""

    def __init__(self, driver: KeyDriver) -> None:
        self.driver = driver
        self.now = 0
        self.current: Any = None
        self.states: defaultdict[Any, LocalKeyState] = defaultdict(LocalKeyState)
        self.at_end: set[Any] = set()
        self.outputs: list[Any] = []
        self._heap: list[tuple[int, str]] = []
        self._registered: set[tuple[int, str]] = set()
        driver.parked.resume_elsewhere(lambda: self.current)

    def record(self, key: str, record: Any) -> None:
        self._callback(key, self.driver.on_record, record)

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` on, firing the timers due by then in order."""
        self.now += ms
        while self._heap and self._heap[0][0] <= self.now:
            due, key = heapq.heappop(self._heap)
            if (due, key) in self._registered:
                self._registered.remove((due, key))
                self._callback(key, self.driver.on_timer)

    def end(self) -> None:
        """The input ended: the final watermark reaches every key's end-of-input timer."""
        while self.at_end:
            self._callback(self.at_end.pop(), self.driver.on_end_of_input)

    def _callback(self, key: str, callback: Any, *record: Any) -> None:
        self.current = key
        self.outputs += callback(key, *record, self.states[key], _KeyTimers(self, key))
        ready = self.driver.parked.ready
        while ready:
            ready_key = ready.popleft().key
            self.current = ready_key
            timers = _KeyTimers(self, ready_key)
            self.outputs += self.driver.on_call_done(ready_key, self.states[ready_key], timers)
        self.current = key


class _KeyTimers:
    """One key's ``Timers`` over ``SharedPolls``' clock and timer heap."""

    def __init__(self, polls: SharedPolls, key: str) -> None:
        self.polls, self.key = polls, key

    def now_ms(self) -> int:
        return self.polls.now

    def wake_at(self, due_ms: int) -> None:
        if (due_ms, self.key) not in self.polls._registered:  # one per key and time, as Flink
            self.polls._registered.add((due_ms, self.key))
            heapq.heappush(self.polls._heap, (due_ms, self.key))

    def cancel(self, due_ms: int) -> None:
        self.polls._registered.discard((due_ms, self.key))

    def wake_at_end(self) -> None:
        self.polls.at_end.add(self.key)

    def cancel_end(self) -> None:
        self.polls.at_end.discard(self.key)


def test_parked_runs_leave_no_poll_timer_or_shared_poll_behind():
    """The tables the Flink dispatcher's way of resuming adds (the shared poll schedule, the
    shared timers, the ready queue, each key's own poll timers) empty again once the runs of
    10,000 keys have ended and their timers have fired."""
    engine = _engine.RunEngine(bind_plan(to_plan(Parks)), AgentOptions(state_cache_keys=64))
    driver = KeyDriver(engine, errors="errors", snapshots="snapshots")
    polls = SharedPolls(driver)
    try:
        for n in range(10_000):
            polls.record(f"k{n}", n)
            polls.advance(1)
        while driver.parked:
            wait(driver.parked.futures())
            polls.advance(5)
        polls.advance(10_000)  # every run's own poll, a second after it parked
        polls.end()
        parked = driver.parked
        assert sorted(polls.outputs) == list(range(10_000))
        assert {
            "parked runs": len(parked),
            "poll timers": len(parked._due),
            "shared polls": len(parked._shared_polls),
            "shared timers": len(parked._armed) + len(parked._armed_on),
            "ready runs": len(parked.ready),
            "key cache": len(driver._keys),
        } == {
            "parked runs": 0,
            "poll timers": 0,
            "shared polls": 0,
            "shared timers": 0,
            "ready runs": 0,
            "key cache": 64,
        }
    finally:
        engine.close()


def test_a_restored_attempt_drops_its_run_index_once_the_records_it_lists_are_pruned():
    """The run index holds an entry per key an earlier attempt left records of. Once the
    retention prune has removed everything written before the attempt started, nothing it
    lists is left: it is dropped rather than kept for as long as the attempt runs."""
    log, clock = InMemoryActionLog(), _Clock(1_000_000)
    for n in range(20_000):  # an earlier attempt: one recorded call per key
        identity = ActionIdentity("job", key_text(f"k{n}"), 1, 1, "work")
        log.record_call(identity, DurableCall(0, "f", "d", n), clock.now - 1)
    journal = ActionJournal(log, "job", retention_ms=60_000, clock=clock)
    try:
        assert len(journal._index) == 20_000 and journal.may_replay("k7", 1)
        clock.now += 59_000
        assert journal.maybe_prune() == 0  # within the window: a restore may need them
        assert len(journal._index) == 20_000 and journal.may_replay("k7", 1)
        clock.now += 16_000
        assert journal.maybe_prune() == 20_000
        assert journal._index == {} and not journal.may_replay("k7", 1)
    finally:
        journal.close()


class _Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_a_tracer_forgets_runs_that_never_end_here_past_its_bounds(monkeypatch):
    """A run whose start was traced here and whose end never is (its job failed, or its key
    moved to another subtask) is forgotten past ``MAX_OPEN_RUNS`` (made 100 here); the ids of
    recent runs are kept for ``RUNS_KEPT`` of them."""
    monkeypatch.setattr(_tracing, "MAX_OPEN_RUNS", 100)
    tracer = Tracer(lambda span: None, job="job", agent="agent")
    for n in range(2 * RUNS_KEPT):
        tracer.run_started(f"k{n}", 1)
        tracer.action_replayed(f"k{n}", 1, 1, "work", 0, 0, ())
    assert (len(tracer._runs), len(tracer._replays), len(tracer._known)) == (100, 100, RUNS_KEPT)


class Counts(Agent):
    """Two plain actions a record, a counter and a sum in short-term memory, an input in
    sensory memory: the memory agent of the benchmarks."""

    @action(InputEvent)
    @staticmethod
    def count(event: InputEvent, ctx) -> None:
        memory = ctx.short_term_memory
        memory.set("count", (memory.get("count") or 0) + 1)
        ctx.sensory_memory.set("input", event.input)
        ctx.send_event(Work(n=event.input))

    @action(Work)
    @staticmethod
    def total(event: Work, ctx) -> None:
        memory = ctx.short_term_memory
        memory.set("sum", (memory.get("sum") or 0) + event.n)
        ctx.send_event(OutputEvent(output=memory.get("sum")))


@pytest.mark.parametrize("cache_keys", [0, CACHE_KEYS])
def test_keys_leaving_the_cache_leave_no_reference_cycle(cache_keys: int):
    """A key's maps and memory objects are freed as soon as the driver lets go of them, by
    reference counting: a cycle among them would wait for the cycle collector, whose passes
    over every key that ever left the cache cost a third of the time at 10,000 keys (issue
    45). Three records a key, round robin, so that every record of a key misses the cache."""
    runner = LocalRunner(Counts, options=AgentOptions(state_cache_keys=cache_keys))
    keys = 2_000
    gc.collect()
    gc.disable()
    try:
        for n in range(3 * keys):
            runner.feed(f"k{n % keys}", n)
        runner.finish()
        unreachable = gc.collect()
    finally:
        gc.enable()
        runner.close()
    assert len(runner.keyed_outputs) == 3 * keys
    assert unreachable < keys // 10, unreachable  # was about 7 objects a record
