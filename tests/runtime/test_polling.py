"""When the driver checks a parked run again: a backoff from ``async-poll-interval-ms``, plus
one check when the call is expected to end, learned from the action's earlier calls.

The driver runs over a key state of dicts and timers that only record what was asked: the
clock is set by the test, so the schedule is exact (no timing assertion on real time)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import wait

import pytest

from flink_agents.plan import bind_plan, to_plan
from flink_agents.runtime._driver import KeyDriver
from flink_agents.runtime._engine import RunEngine
from flink_agents.runtime._local import LocalKeyState
from flink_agents.runtime._options import AgentOptions
from tests.runtime.held_agents import (
    RELEASE,
    HeldAgent,
    RecordingTimers,
    release_all,
    reset_release,
)


@pytest.fixture(autouse=True)
def fresh_release():
    """No test sees a release event another test (in any module) created or set."""
    reset_release()
    yield
    release_all()


def make_driver(**options) -> KeyDriver:
    engine = RunEngine(bind_plan(to_plan(HeldAgent)), AgentOptions(**options))
    return KeyDriver(engine, errors="errors", snapshots="snapshots")


def poll_until_done(driver, key, state, timers, name, *, release_at_ms: int) -> list:
    """Fire the key's timers in order, releasing the call at ``release_at_ms``."""
    outputs = []
    while driver.parked.get(key):
        due = timers.wakes.pop(0)
        timers.now = due
        if due >= release_at_ms and not RELEASE[name].is_set():
            RELEASE[name].set()
            wait([driver.parked[key][1].future])
        outputs += list(driver.on_timer(key, state, timers))
    return outputs


def until(condition, timeout_s: float = 10.0) -> None:
    """Wait for ``condition()`` (a future's done-callbacks run after ``wait`` returns)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_without_an_estimate_a_parked_run_is_polled_with_a_doubling_backoff():
    driver = make_driver(async_poll_interval_ms=5, async_poll_max_interval_ms=50)
    state, timers = LocalKeyState(), RecordingTimers()
    try:
        # The first call: nothing known yet, a plain backoff 5, 10, 20, 40, 50 ms apart.
        RELEASE["a"] = threading.Event()
        list(driver.on_record("k", "a", state, timers))
        assert timers.wakes == [5]
        outputs = poll_until_done(driver, "k", state, timers, "a", release_at_ms=120)
        assert outputs == ["A"]
        assert timers.now == 125  # 5, 15, 35, 75, 125: resumed 5 ms after its end at best
        # What the call took (in real time) is now the action's expected duration.
        assert 0 < driver._expected_ms["call"] < 10_000
    finally:
        release_all()
        driver.engine.close()


def test_the_expected_end_is_checked_between_backoff_steps_then_the_backoff_restarts():
    driver = make_driver(async_poll_interval_ms=5, async_poll_max_interval_ms=50)
    driver._expected_ms["call"] = 200.0  # as if the action's calls took 200 ms
    state, timers = LocalKeyState(), RecordingTimers()
    RELEASE["c"] = threading.Event()
    try:
        list(driver.on_record("k", "c", state, timers))
        outputs = poll_until_done(driver, "k", state, timers, "c", release_at_ms=205)
        assert outputs == ["C"]
        # 5 (a call that ended early), then the expected end at 200 (not the backoff steps
        # 15, 35, 75, ...), then the backoff again from 5 ms: 205, where the call is done.
        assert timers.now == 205
        assert timers.history == [5, 200, 205]
    finally:
        release_all()
        driver.engine.close()


def test_a_call_that_ends_on_time_is_resumed_at_its_expected_end():
    driver = make_driver(async_poll_interval_ms=5, async_poll_max_interval_ms=50)
    driver._expected_ms["call"] = 200.0
    state, timers = LocalKeyState(), RecordingTimers()
    RELEASE["d"] = threading.Event()
    try:
        list(driver.on_record("k", "d", state, timers))
        outputs = poll_until_done(driver, "k", state, timers, "d", release_at_ms=180)
        assert outputs == ["D"]
        assert timers.now == 200  # without the estimate: 225
        assert timers.history == [5, 200]  # two checks, not eight
    finally:
        release_all()
        driver.engine.close()


@pytest.mark.parametrize(("overshoot", "first_check"), [(4.0, 410), (50.0, 420)])
def test_the_expected_end_allows_for_how_late_calls_usually_end(overshoot, first_check):
    """Calls that end on average ``overshoot`` ms past the expected end are first checked
    twice that later, at most a twentieth of the expected time later (400 ms: 20 ms), on
    the 5 ms grid: a call that ends there is resumed by one check, not three."""
    driver = make_driver(async_poll_interval_ms=5, async_poll_max_interval_ms=50)
    driver._expected_ms["call"] = 400.0
    driver._overshoot_ms["call"] = overshoot
    driver._calls_timed["call"] = 8  # a steady latency: no early check
    state, timers = LocalKeyState(), RecordingTimers()
    RELEASE["e"] = threading.Event()
    try:
        list(driver.on_record("k", "e", state, timers))
        outputs = poll_until_done(driver, "k", state, timers, "e", release_at_ms=first_check)
        assert outputs == ["E"]
        assert timers.history == [first_check]  # without the allowance: 400, 405, 415, ...
    finally:
        release_all()
        driver.engine.close()


def test_how_late_calls_end_is_learned_from_the_calls():
    driver = make_driver(async_poll_interval_ms=5, async_poll_max_interval_ms=50)
    driver._expected_ms["call"] = 1.0
    state, timers = LocalKeyState(), RecordingTimers()
    RELEASE["f"] = threading.Event()
    try:
        list(driver.on_record("k", "f", state, timers))
        time.sleep(0.02)  # the call takes at least 20 ms: at least 19 past the estimate
        RELEASE["f"].set()
        wait([driver.parked["k"][1].future])
        until(lambda: "call" in driver._overshoot_ms)  # its done-callback comes after
        assert driver._overshoot_ms["call"] >= 19
        # At most one poll interval past the (updated) estimate, at this short a latency.
        assert driver._first_check_ms("call") == driver._expected_ms["call"] + 5
    finally:
        release_all()
        driver.engine.close()


def test_a_runner_resuming_elsewhere_is_told_which_finished_call_to_resume():
    """``resume_elsewhere``: a finished call puts its key (and the handle the runner gave
    when the run parked) in ``ready``; ``on_call_done`` then resumes the run and cancels
    its pending poll, and does nothing for a run resumed already."""
    driver = make_driver(async_poll_interval_ms=5, async_poll_max_interval_ms=50)
    handles = iter(["handle-1", "handle-2"])
    driver.resume_elsewhere(lambda: next(handles))
    state, timers = LocalKeyState(), RecordingTimers()
    RELEASE["g"] = threading.Event()
    try:
        list(driver.on_record("k", "g", state, timers))
        assert timers.wakes == [5] and not driver.ready
        RELEASE["g"].set()
        wait([driver.parked["k"][1].future])
        until(lambda: driver.ready)  # its done-callback comes after
        assert list(driver.ready) == [("k", "handle-1")]
        key, _ = driver.ready.popleft()
        assert list(driver.on_call_done(key, state, timers)) == ["G"]
        assert timers.cancelled == [5] and timers.wakes == [] and not driver.parked
        assert list(driver.on_call_done(key, state, timers)) == []  # nothing parked now
    finally:
        release_all()
        driver.engine.close()
