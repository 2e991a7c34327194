"""``ParkedRuns`` through its own interface: the poll schedule, the shared poll grid, the
latency estimates, the bounds on calls in flight and stores, and when a finished call's run
resumes.

No agent and no engine: runs park on futures the test completes, timers only record what
was asked on a clock the test sets, and the monotonic clock is the test's too, so every
schedule and every rule is exact."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass

import pytest

from flink_agents.memory import CachedState, DictState
from flink_agents.runtime import _parking as parking
from flink_agents.runtime._engine import RunState
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime._parking import (
    SAFETY_POLL_MS,
    STARTS_FIRST_AT_MOST_S,
    STARTS_FIRST_FULL_S,
    STARTS_FIRST_QUIET_S,
    ParkedRuns,
    ReadyRun,
)
from flink_agents.runtime.journal import CallFuture
from tests.runtime.held_agents import RecordingTimers


@dataclass
class FakeSuspension:
    """What ``ParkedRuns`` reads of a suspension (the engine's hold a coroutine)."""

    action: str
    future: Future
    storing: bool = False
    oldest_call_ms: int | None = None


class Clock:
    """A monotonic clock the test moves (seconds)."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make(clock: Clock | None = None, **options) -> ParkedRuns:
    options = {"async_poll_interval_ms": 5, "async_poll_max_interval_ms": 50, **options}
    return ParkedRuns(AgentOptions(**options), clock=clock or Clock())


def park(
    parked: ParkedRuns,
    key: str,
    timers: RecordingTimers,
    future: Future | None = None,
    **suspension,
) -> Future:
    """Park a run of ``key`` on ``future`` (a new one by default); the future."""
    future = Future() if future is None else future
    run = RunState(key, 1, key)
    caches = CachedState(DictState()), CachedState(DictState())
    parked.park(run, FakeSuspension("call", future, **suspension), *caches, timers)
    assert run.parked
    return future


def fire(parked: ParkedRuns, key: str, timers: RecordingTimers) -> None:
    """The key's next timer fires, and its call is still running (as the driver's
    ``on_timer`` does then)."""
    timers.now = timers.wakes.pop(0)
    parked.timer_fired(key, timers)
    parked.poll_again(key, timers)


def test_a_parked_run_is_kept_until_it_is_unparked():
    parked, timers = make(), RecordingTimers()
    future = park(parked, "k", timers)
    assert len(parked) == 1 and "k" in parked and list(parked) == ["k"]
    assert parked.get("k").future is future and parked.get("k").run.key == "k"
    assert parked.futures() == [future] and parked.keys_done() == []
    assert not parked.call_done("k")
    future.set_result(None)
    assert parked.call_done("k") and parked.keys_done() == ["k"]
    assert parked.unpark("k").future is future
    assert len(parked) == 0 and parked.get("k") is None and not parked.call_done("k")


def test_without_an_estimate_the_polls_back_off_to_the_longest_interval():
    parked, timers = make(), RecordingTimers()
    park(parked, "k", timers)
    assert timers.wakes == [5]
    for _ in range(5):
        fire(parked, "k", timers)
    assert timers.history == [5, 15, 35, 75, 125, 175]  # doubling from 5, at most 50 apart


def test_with_an_estimate_the_expected_end_is_checked_then_the_backoff_restarts():
    parked, timers = make(), RecordingTimers()
    parked.latency.assume("call", 200.0)
    park(parked, "k", timers)
    for _ in range(2):
        fire(parked, "k", timers)
    assert timers.history == [5, 200, 205]  # early, expected end, backoff from 5 ms again


def test_a_steady_latency_skips_the_early_check_and_allows_for_late_ends():
    """400 ms expected, calls ending 4 ms late on average: first check 8 ms later, on the
    5 ms grid; the margin is at most a twentieth of the expected time."""
    parked, timers = make(), RecordingTimers(now=1000)
    parked.latency.assume("call", 400.0, overshoot_ms=4.0, calls=8)
    park(parked, "k", timers)
    assert timers.wakes == [1410]
    assert parked.latency.first_check_ms("call", 5) == 408
    parked.latency.assume("call", 400.0, overshoot_ms=50.0, calls=8)
    assert parked.latency.first_check_ms("call", 5) == 420


def test_a_finished_call_teaches_its_actions_latency():
    clock = Clock(100.0)
    parked, timers = make(clock), RecordingTimers()
    assert parked.latency.of("call") is None
    first = park(parked, "a", timers)
    clock.now = 100.2
    first.set_result(None)
    latency = parked.latency.of("call")
    assert latency.expected_ms == pytest.approx(200.0) and latency.overshoot_ms is None
    second = park(parked, "b", timers)
    clock.now = 100.5  # 300 ms: the estimate moves up by a quarter of the difference
    second.set_result(None)
    latency = parked.latency.of("call")
    assert latency.expected_ms == pytest.approx(225.0)
    assert latency.overshoot_ms == pytest.approx(100.0) and latency.calls == 2
    assert not parked.latency.steady("call")


def test_timers_fall_on_the_grid_and_a_key_gets_no_second_timer_while_one_comes_sooner():
    parked, timers = make(), RecordingTimers()
    assert parked.wake_at("k", 7, timers)
    assert not parked.wake_at("k", 12, timers)  # 10 comes first
    assert parked.wake_at("k", 3, timers)
    assert timers.wakes == [10, 5]
    timers.now = 5
    parked.timer_fired("k", timers)
    assert not parked.wake_at("k", 10, timers)  # the timer at 10 is still pending
    timers.now = 10
    parked.timer_fired("k", timers)
    assert parked.wake_at("k", 10, timers)


def test_calls_in_flight_are_bounded_and_a_call_frees_its_place_when_it_ends():
    """With an action log the future is done once the outcome is stored, after the call
    ends (``CallFuture``): the place is free from the end."""
    parked, timers = make(max_in_flight=2), RecordingTimers()
    park(parked, "a", timers)
    logged = park(parked, "b", timers, CallFuture())
    assert parked.calls_in_flight() == 2 and not parked.has_free_slot()
    logged.set_ended()
    assert parked.calls_in_flight() == 1 and parked.has_free_slot()
    assert not parked.call_done("b")
    logged.set_result(None)
    assert parked.call_done("b")


def test_stores_have_a_bound_of_their_own():
    parked, timers = make(max_in_flight=1, long_term_memory_max_storing=1), RecordingTimers()
    store = park(parked, "a", timers, storing=True)
    assert parked.calls_in_flight() == 0 and not parked.has_free_slot()
    store.set_result(None)
    assert parked.has_free_slot()
    assert parked.latency.of("call") is None and parked.latency.of("call (storing)")


def test_the_oldest_parked_action_bounds_pruning():
    parked, timers = make(), RecordingTimers()
    assert parked.oldest_call_ms() is None
    park(parked, "a", timers, oldest_call_ms=70)
    park(parked, "b", timers, oldest_call_ms=40)
    park(parked, "c", timers)  # no recorder
    assert parked.oldest_call_ms() == 40


def test_waiting_for_a_free_place_blocks_until_a_call_ends():
    parked, timers = make(max_in_flight=1), RecordingTimers()
    future = park(parked, "a", timers)
    returned = threading.Event()
    waiting = threading.Thread(target=lambda: (parked.wait_for_free_slot(), returned.set()))
    waiting.start()
    assert not returned.wait(0.05)
    future.set_result(None)
    assert returned.wait(10)
    waiting.join(10)
    parked.wait_for_free_slot()  # a free place: returns at once


def test_queued_inputs_count_toward_the_bound_until_they_start():
    """Past ``max-in-flight`` parked runs and queued inputs together, the next record waits
    for a call to end; once a queued input has started, the bound is clear again."""
    parked, timers = make(max_in_flight=2), RecordingTimers()
    future = park(parked, "a", timers)
    parked.input_queued()
    returned = threading.Event()
    waiting = threading.Thread(
        target=lambda: (parked.slow_down_while_queues_grow(), returned.set())
    )
    waiting.start()
    assert not returned.wait(0.05)
    future.set_result(None)
    assert returned.wait(10)
    waiting.join(10)
    parked.queued_input_started()
    parked.slow_down_while_queues_grow()  # one parked run, nothing queued: returns at once


def test_a_long_wait_for_a_place_is_logged_with_what_is_in_flight(monkeypatch, caplog):
    monkeypatch.setattr(parking, "STALL_REPORT_S", 0.05)
    parked, timers = make(max_in_flight=1), RecordingTimers()
    future = park(parked, "a", timers)
    parked.input_queued()
    threading.Timer(0.5, future.set_result, [None]).start()
    with caplog.at_level(logging.WARNING, logger=parking.__name__):
        parked.wait_for_free_slot()  # blocks until the call of "a" ends
    reports = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert reports
    assert reports[0] == (
        "the runner's thread has waited another 0 s for a place for a call: 1 durable call(s) and 0"
        " store(s) running (max-in-flight 1), 1 parked run(s), 1 input(s) queued behind them"
    )
    assert not [r for r in caplog.records if r.levelno == logging.ERROR]


class DeafFuture(Future):
    """A future that never calls back: its call's place would never be released."""

    def add_done_callback(self, fn) -> None:
        pass


@pytest.mark.parametrize("wait", ["wait_for_free_slot", "slow_down_while_queues_grow"])
def test_a_call_that_ended_without_releasing_its_place_blocks_no_thread_for_ever(
    wait, monkeypatch, caplog
):
    """Were a call's release missed, the thread would wait for it for ever: the stall
    report finds the call ended, releases its place and says so."""
    monkeypatch.setattr(parking, "STALL_REPORT_S", 0.05)
    parked, timers = make(max_in_flight=1), RecordingTimers()
    future = park(parked, "a", timers, future=DeafFuture())
    parked.input_queued()
    future.set_result(None)
    returned = threading.Event()
    waiting = threading.Thread(target=lambda: (getattr(parked, wait)(), returned.set()))
    with caplog.at_level(logging.WARNING, logger=parking.__name__):
        waiting.start()
        assert returned.wait(10)
        waiting.join(10)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == [
        "1 durable call(s) that had ended still held a place among the bounds; released"
    ]
    assert parked.has_free_slot()


# -- shared polls (``resume_elsewhere``) ----------------------------------------------------


@pytest.fixture
def elsewhere() -> tuple[ParkedRuns, Clock]:
    clock = Clock()
    parked = make(clock)
    handles = iter(range(100))
    parked.resume_elsewhere(lambda: f"handle-{next(handles)}")
    return parked, clock


def test_a_finished_call_is_put_in_ready_with_its_handle_and_time(elsewhere):
    parked, clock = elsewhere
    future = park(parked, "k", RecordingTimers())
    assert not parked.ready
    clock.now = 101.0
    future.set_result(None)
    assert list(parked.ready) == [ReadyRun("k", "handle-0", 101.0)]


def test_parked_runs_share_one_poll_timer_and_keep_one_of_their_own(elsewhere):
    parked, _ = elsewhere
    timers = {key: RecordingTimers() for key in "abc"}
    for key in "abc":
        park(parked, key, timers[key])
    assert timers["a"].wakes == [5, SAFETY_POLL_MS]
    assert timers["b"].wakes == timers["c"].wakes == [SAFETY_POLL_MS]
    assert parked.next_checks() == [(5, "a"), (5, "b"), (5, "c")]


def test_a_shared_timer_checks_the_runs_due_and_arms_one_timer_for_the_next(elsewhere):
    parked, _ = elsewhere
    timers = {key: RecordingTimers() for key in "abc"}
    futures = {key: park(parked, key, timers[key]) for key in "abc"}
    futures["b"].set_result(None)
    fired = timers["a"]
    fired.now = fired.wakes.pop(0)
    parked.timer_fired("a", fired)
    assert sorted(fired.wakes) == [15, SAFETY_POLL_MS]  # one timer for both next checks
    assert parked.next_checks() == [(15, "a"), (15, "c")]  # "b" is done: in ``ready``
    parked.unpark("c")
    assert parked.next_checks() == [(15, "a")]


def test_a_resumed_key_keeps_the_shared_timer_it_carries(elsewhere):
    parked, _ = elsewhere
    timers = {key: RecordingTimers() for key in "ab"}
    for key in "ab":
        park(parked, key, timers[key])
    parked.unpark("a")
    parked.cancel_timers("a", timers["a"])
    assert timers["a"].cancelled == [SAFETY_POLL_MS] and timers["a"].wakes == [5]


def test_a_runs_own_timer_comes_again_while_its_call_runs(elsewhere):
    parked, _ = elsewhere
    timers = RecordingTimers()
    park(parked, "a", timers)
    timers.wakes.remove(5)  # the shared timer never fires
    timers.now = SAFETY_POLL_MS
    timers.wakes.remove(SAFETY_POLL_MS)
    parked.timer_fired("a", timers)
    parked.poll_again("a", timers)
    assert sorted(timers.wakes) == [SAFETY_POLL_MS + 10, 2 * SAFETY_POLL_MS]


def test_wake_soon_arms_a_timer_unless_a_shared_one_comes_by_then(elsewhere):
    parked, _ = elsewhere
    timers = RecordingTimers()
    park(parked, "a", timers)
    parked.wake_soon("a", timers)
    assert timers.wakes == [5, SAFETY_POLL_MS]  # the shared poll at 5 comes by then
    timers.now = 5
    timers.wakes.remove(5)
    parked.timer_fired("a", timers)  # "a" is checked next at 15
    later = RecordingTimers(now=11)
    parked.wake_soon("z", later)
    assert later.wakes == []  # 16: the shared timer at 15 comes first
    timers.now = 15
    timers.wakes.remove(15)
    parked.timer_fired("a", timers)  # "a" is checked next at 35
    later.now = 16
    parked.wake_soon("z", later)
    assert later.wakes == [25]  # 21 on the grid: no shared timer comes by then


def test_new_runs_go_first_under_a_backlog_for_a_while():
    """``resume_now``: a ready run waits while every place for a call was taken within the
    last ``STARTS_FIRST_FULL_S`` and a run parked within the last ``STARTS_FIRST_QUIET_S``,
    at most ``STARTS_FIRST_AT_MOST_S``; at once when no call could start."""
    clock = Clock(100.0)
    parked, timers = make(clock, max_in_flight=2), RecordingTimers()
    first = park(parked, "a", timers)
    park(parked, "b", timers)  # the places are all taken
    assert not parked.has_free_slot()
    assert parked.resume_now(100.0, 100.0)  # no call could start: resume
    first.set_result(None)
    now = 100.0 + STARTS_FIRST_QUIET_S / 2
    assert not parked.resume_now(100.0, now)  # runs start calls: wait
    assert parked.resume_now(100.0 - STARTS_FIRST_AT_MOST_S, now)  # waited long enough
    assert parked.resume_now(100.0, 100.0 + STARTS_FIRST_QUIET_S * 1.01)  # none parked lately


def test_without_a_backlog_a_ready_run_resumes_at_once():
    clock = Clock(100.0)
    parked, timers = make(clock, max_in_flight=4), RecordingTimers()
    park(parked, "a", timers)  # the places were never all taken
    assert parked.resume_now(100.0, 100.0)


def test_a_record_waiting_for_a_place_marks_the_places_all_taken():
    """Blocking for a free place is a backlog too: new runs go first from then on."""
    clock = Clock(100.0)
    options = {"max_in_flight": 2, "long_term_memory_max_storing": 8}
    parked, timers = make(clock, **options), RecordingTimers()
    first = park(parked, "a", timers)
    park(parked, "b", timers)
    clock.now = 100.0 + 2 * STARTS_FIRST_FULL_S  # the places were taken long ago
    threading.Timer(0.05, first.set_result, [None]).start()
    parked.wait_for_free_slot()  # blocks until the call of "a" ends
    clock.now += STARTS_FIRST_QUIET_S / 4
    park(parked, "c", timers, storing=True)  # a run parks (a store: the place stays free)
    assert parked.has_free_slot()
    assert not parked.resume_now(clock.now, clock.now)
