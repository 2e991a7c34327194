"""How the driver wakes parked runs: polls on a grid of ``async-poll-interval-ms`` (so the
polls of many keys fire together on Flink), one timer chain per key, one end-of-input timer
per key, no early check once an action's latency is known, and a wait on a free call slot
that any call's end ends.

The driver runs over dicts and timers that only record what was asked, on a clock the test
sets: the schedules are exact, and nothing depends on real time."""

from __future__ import annotations

import threading
from concurrent.futures import wait

import pytest

from flink_agents.plan import bind_plan, to_plan
from flink_agents.runtime._driver import KeyDriver
from flink_agents.runtime._engine import RunEngine
from flink_agents.runtime._local import LocalKeyState
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal
from tests.runtime.held_agents import (
    HeldAgent,
    RecordingTimers,
    release_all,
    release_event,
    reset_release,
)


@pytest.fixture(autouse=True)
def fresh_release():
    """No test sees a release event another test (in any module) created or set."""
    reset_release()
    yield
    release_all()


@pytest.fixture
def driver():
    drivers: list[KeyDriver] = []

    def make(journal: ActionJournal | None = None, **options) -> KeyDriver:
        options = {"async_poll_interval_ms": 5, "async_poll_max_interval_ms": 50, **options}
        engine = RunEngine(bind_plan(to_plan(HeldAgent)), AgentOptions(**options), journal=journal)
        drivers.append(KeyDriver(engine, errors="errors", snapshots="snapshots"))
        return drivers[-1]

    yield make
    release_all()
    for made in drivers:
        made.engine.close()


def release(driver: KeyDriver, key: str, name: str) -> None:
    release_event(name).set()
    wait([driver.parked.get(key).future])


def test_polls_fall_on_the_grid_of_the_poll_interval(driver):
    d = driver()
    state, timers = LocalKeyState(), RecordingTimers(now=1003)
    list(d.on_record("k", "a", state, timers))
    assert timers.wakes == [1010]  # 1003 + 5, rounded up to a multiple of 5
    timers.now = 1011  # fired a little late
    list(d.on_timer("k", state, timers))
    assert timers.wakes == [1010, 1025]  # 1011 + 10, rounded up
    release(d, "k", "a")
    timers.now = 1025
    assert list(d.on_timer("k", state, timers)) == ["A"]


def test_a_run_resumed_by_a_record_leaves_its_poll_to_the_next_run(driver):
    d = driver()
    state, timers = LocalKeyState(), RecordingTimers()
    list(d.on_record("k", "a", state, timers))
    assert timers.wakes == [5]
    release(d, "k", "a")
    timers.now = 2
    # The call is done: the record resumes the run, then its own run parks. Its first
    # check (at 10) would come after the timer still pending at 5: no second timer.
    assert list(d.on_record("k", "b", state, timers)) == ["A"]
    assert timers.wakes == [5]
    timers.now = 5
    assert list(d.on_timer("k", state, timers)) == []
    assert timers.wakes == [5, 10]  # the chain goes on from the timer that fired
    release(d, "k", "b")
    timers.now = 10
    assert list(d.on_timer("k", state, timers)) == ["B"]
    assert timers.wakes == [5, 10]


def test_runs_resumed_by_records_share_one_timer_chain(driver):
    d = driver()
    state, timers = LocalKeyState(), RecordingTimers()
    list(d.on_record("k", "a", state, timers))
    release(d, "k", "a")
    timers.now = 1
    assert list(d.on_record("k", "b", state, timers)) == ["A"]
    timers.now = 5
    assert list(d.on_timer("k", state, timers)) == []
    release(d, "k", "b")
    timers.now = 7
    assert list(d.on_record("k", "c", state, timers)) == ["B"]  # wants a check at 15
    timers.now = 10
    assert list(d.on_timer("k", state, timers)) == []
    assert timers.wakes == [5, 10, 15]  # one timer pending at a time, c's first check


def test_the_end_of_input_timer_is_registered_once_per_key(driver):
    d = driver()
    state, timers = LocalKeyState(), RecordingTimers()
    for n, name in enumerate(["a", "b", "c"]):
        timers.now = n * 100
        list(d.on_record("k", name, state, timers))
        release(d, "k", name)
        timers.now = n * 100 + 50
        assert list(d.on_timer("k", state, timers)) == [name.upper()]
    assert timers.ends == 1
    # Once it fired, the key's next parked run registers it again.
    list(d.on_end_of_input("k", state, timers))
    list(d.on_record("k", "d", state, timers))
    assert timers.ends == 2


def test_without_the_key_cache_the_end_timer_is_registered_at_every_park(driver):
    d = driver(state_cache_keys=0)
    state, timers = LocalKeyState(), RecordingTimers()
    for name in ["a", "b"]:
        list(d.on_record("k", name, state, timers))
        release(d, "k", name)
        timers.now += 50
        assert list(d.on_timer("k", state, timers)) == [name.upper()]
    assert timers.ends == 2


def test_once_the_latency_is_known_the_first_check_is_at_the_expected_end(driver):
    d = driver()
    d.parked.latency.assume("call", 200.0, calls=8)  # as if eight calls had shown it
    state, timers = LocalKeyState(), RecordingTimers(now=1000)
    list(d.on_record("k", "a", state, timers))
    assert timers.wakes == [1200]  # no check at 1005 first
    timers.now = 1200
    list(d.on_timer("k", state, timers))
    assert timers.wakes == [1200, 1205]  # not done: the backoff from its first interval


def test_a_record_waits_for_a_free_call_slot_until_any_call_ends(driver):
    d = driver(num_async_threads=2, max_in_flight=1)
    timers = RecordingTimers()
    states = {key: LocalKeyState() for key in "kl"}
    list(d.on_record("k", "a", states["k"], timers))
    started = threading.Event()
    finished = threading.Event()

    def second() -> None:
        started.set()
        list(d.on_record("l", "b", states["l"], timers))
        finished.set()

    thread = threading.Thread(target=second)
    thread.start()
    started.wait(10)
    assert not finished.wait(0.05)  # blocked: one call in flight, the limit is one
    release_event("a").set()
    assert finished.wait(10)
    thread.join(10)
    assert set(d.parked) == {"k", "l"}  # "a" is done but not resumed; "b" runs
    assert d.parked.calls_in_flight() == 1


def test_a_call_frees_its_slot_when_it_ends_not_when_its_outcome_is_stored(driver):
    """With an action log, a call's outcome is stored after the call ends, and its run waits
    for that; the call's place among ``max-in-flight`` does not: the next record's call
    starts while the log is still writing."""
    stored = threading.Event()

    class SlowLog(InMemoryActionLog):
        def record_calls(self, calls):
            stored.wait(10)
            super().record_calls(calls)

    d = driver(ActionJournal(SlowLog(), "job"), num_async_threads=2, max_in_flight=1)
    timers = RecordingTimers()
    states = {key: LocalKeyState() for key in "kl"}
    try:
        list(d.on_record("k", "a", states["k"], timers))
        first = d.parked.get("k").future
        finished = threading.Event()

        def second() -> None:
            list(d.on_record("l", "b", states["l"], timers))
            finished.set()

        thread = threading.Thread(target=second)
        release_event("a").set()  # "a" ends; its outcome waits for the log
        thread.start()
        assert finished.wait(10)  # "b" took the place "a" left, "a" still unstored
        thread.join(10)
        assert not first.done()
        assert not d.parked.call_done("k")
        assert d.parked.calls_in_flight() == 1  # that of "b": the call of "a" has ended
        stored.set()
        wait([first])
        assert d.parked.call_done("k")
    finally:
        stored.set()
