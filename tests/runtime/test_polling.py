"""When the driver checks a parked run again: a backoff from ``async-poll-interval-ms``, plus
one check when the call is expected to end, learned from the action's earlier calls.

The driver runs over a key state of dicts and timers that only record what was asked: the
clock is set by the test, so the schedule is exact (no timing assertion on real time)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import wait

import pytest

from flink_agents.api import ForgetKey
from flink_agents.plan import bind_plan, to_plan
from flink_agents.runtime._driver import KeyDriver
from flink_agents.runtime._engine import RunEngine
from flink_agents.runtime._erasure import forget_input
from flink_agents.runtime._local import LocalKeyState
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime._parking import SAFETY_POLL_MS
from tests.runtime.held_agents import (
    RELEASE,
    HeldAgent,
    RecordingTimers,
    ScheduleOrHoldAgent,
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
            wait([driver.parked.get(key).future])
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
        assert 0 < driver.parked.latency.of("call").expected_ms < 10_000
    finally:
        release_all()
        driver.engine.close()


def test_the_expected_end_is_checked_between_backoff_steps_then_the_backoff_restarts():
    driver = make_driver(async_poll_interval_ms=5, async_poll_max_interval_ms=50)
    driver.parked.latency.assume("call", 200.0)  # as if the action's calls took 200 ms
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
    driver.parked.latency.assume("call", 200.0)
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
    # A steady latency (eight calls): no early check.
    driver.parked.latency.assume("call", 400.0, overshoot_ms=overshoot, calls=8)
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
    latency = driver.parked.latency
    latency.assume("call", 1.0)
    state, timers = LocalKeyState(), RecordingTimers()
    RELEASE["f"] = threading.Event()
    try:
        list(driver.on_record("k", "f", state, timers))
        time.sleep(0.02)  # the call takes at least 20 ms: at least 19 past the estimate
        RELEASE["f"].set()
        wait([driver.parked.get("k").future])
        # Its done-callback comes after.
        until(lambda: latency.of("call").overshoot_ms is not None)
        assert latency.of("call").overshoot_ms >= 19
        # At most one poll interval past the (updated) estimate, at this short a latency.
        assert latency.first_check_ms("call", 5) == latency.of("call").expected_ms + 5
    finally:
        release_all()
        driver.engine.close()


def test_a_runner_resuming_elsewhere_is_told_which_finished_call_to_resume():
    """``resume_elsewhere``: a finished call puts its key (and the handle the runner gave
    when the run parked, and when it finished) in ``ready``; ``on_call_done`` then resumes
    the run and cancels its own timer, and does nothing for a run resumed already. Its first
    poll is a shared timer, which it leaves in place (another run may count on it)."""
    driver = make_driver(async_poll_interval_ms=5, async_poll_max_interval_ms=50)
    handles = iter(["handle-1", "handle-2"])
    driver.parked.resume_elsewhere(lambda: next(handles))
    state, timers = LocalKeyState(), RecordingTimers()
    RELEASE["g"] = threading.Event()
    try:
        list(driver.on_record("k", "g", state, timers))
        ready = driver.parked.ready
        assert timers.wakes == [5, SAFETY_MS] and not ready
        RELEASE["g"].set()
        wait([driver.parked.get("k").future])
        until(lambda: ready)  # its done-callback comes after
        [first] = ready
        assert (first.key, first.handle) == ("k", "handle-1")
        assert first.when <= time.monotonic()
        ready.popleft()
        assert list(driver.on_call_done("k", state, timers)) == ["G"]
        assert timers.cancelled == [SAFETY_MS] and timers.wakes == [5] and not driver.parked
        assert list(driver.on_call_done("k", state, timers)) == []  # nothing parked now
    finally:
        release_all()
        driver.engine.close()


def test_a_resumed_run_leaves_the_timer_its_key_has_at_the_same_time_for_another_purpose():
    """Flink keeps one timer per key and time: a parked run's safety poll due when the
    key's scheduled event is stays registered when the run resumes elsewhere, and the
    event fires on time. (Cancelling the poll cancelled the
    event's timer too, and it fired only with the key's next callback.)"""
    engine = RunEngine(
        bind_plan(to_plan(ScheduleOrHoldAgent)),
        AgentOptions(async_poll_interval_ms=5, async_poll_max_interval_ms=50),
    )
    driver = KeyDriver(engine, errors="errors", snapshots="snapshots")
    driver.parked.resume_elsewhere(lambda: None)
    state, timers = LocalKeyState(), RecordingTimers()
    RELEASE["g"] = threading.Event()
    try:
        assert list(driver.on_record("k", "schedule", state, timers)) == []
        assert timers.wakes == [SAFETY_MS]  # the Ping's, one second ahead
        list(driver.on_record("k", "g", state, timers))
        assert timers.wakes == [SAFETY_MS, 5, SAFETY_MS]  # the run's shared and own polls
        RELEASE["g"].set()
        wait([driver.parked.get("k").future])
        until(lambda: driver.parked.ready)
        driver.parked.ready.popleft()
        assert list(driver.on_call_done("k", state, timers)) == ["G"]
        assert timers.cancelled == []  # its own poll is the Ping's timer too: kept
        timers.now = SAFETY_MS
        assert list(driver.on_timer("k", state, timers)) == ["ping"]
    finally:
        release_all()
        driver.engine.close()


# -- shared polls (``resume_elsewhere``) ----------------------------------------------------

SAFETY_MS = SAFETY_POLL_MS


def park_all(driver: KeyDriver, keys: str, now: int = 0) -> dict[str, RecordingTimers]:
    """A record of each of ``keys`` at ``now``, each parking on its held call; each key's
    timers (on one clock the test moves)."""
    timers = {}
    for key in keys:
        RELEASE[key] = threading.Event()
        timers[key] = RecordingTimers(now=now)
        list(driver.on_record(key, key, LocalKeyState(), timers[key]))
    assert set(driver.parked) == set(keys)
    return timers


@pytest.fixture
def elsewhere():
    """A driver whose runner resumes finished calls from any key's callback."""
    made = make_driver(async_poll_interval_ms=5, async_poll_max_interval_ms=50)
    made.parked.resume_elsewhere(lambda: None)
    yield made
    release_all()
    made.engine.close()


def test_runs_parked_together_share_one_poll_timer_and_keep_one_of_their_own(elsewhere):
    """Without ``resume_elsewhere`` every parked run has a poll timer of its own (the 256 runs
    of a job's first wave made some 800 timer callbacks); with it, the first key's callback
    registers the one timer their first check needs, and each key only its safety timer."""
    timers = park_all(elsewhere, "abcdef")
    assert timers["a"].wakes == [5, SAFETY_MS]
    assert all(timers[key].wakes == [SAFETY_MS] for key in "bcdef")


def test_a_shared_timer_checks_every_run_due_and_arms_the_next_check_once(elsewhere):
    """The shared timer fires on key "a"; the runs whose calls are done are left to the
    runner (in ``ready``), the others get their next check on the backoff, all behind one
    new timer, registered on the key of the callback at hand."""
    timers = park_all(elsewhere, "abcd")
    for key in "bd":
        RELEASE[key].set()
        wait([elsewhere.parked.get(key).future])
    ready = elsewhere.parked.ready
    until(lambda: len(ready) == 2)
    fired = timers["a"]
    fired.now = fired.wakes.pop(0)  # the shared timer at 5
    assert list(elsewhere.on_timer("a", LocalKeyState(), fired)) == []
    assert sorted(fired.wakes) == [15, SAFETY_MS]  # 5 + 10: the backoff's next step
    assert all(timers[key].wakes == [SAFETY_MS] for key in "bcd")
    assert sorted(run.key for run in ready) == ["b", "d"]
    assert sorted(elsewhere.parked.next_checks()) == [(15, "a"), (15, "c")]


def test_a_runs_own_timer_keeps_it_alive_when_no_shared_poll_comes(elsewhere):
    """No shared timer fires (as after a restore, or had one been lost), then the run's own
    does while its call still runs: the run gets another, a safety interval later, and
    the shared checks due by then are served (one next check, one shared timer)."""
    timers = park_all(elsewhere, "a")["a"]
    timers.wakes.remove(5)  # the shared timer never fires
    timers.now = SAFETY_MS
    timers.wakes.remove(SAFETY_MS)
    list(elsewhere.on_timer("a", LocalKeyState(), timers))
    assert "a" in elsewhere.parked
    assert sorted(timers.wakes) == [SAFETY_MS + 10, 2 * SAFETY_MS]
    assert elsewhere.parked.next_checks() == [(SAFETY_MS + 10, "a")]


def test_a_shared_timer_of_a_resumed_key_is_not_cancelled(elsewhere):
    """Key "a" carries the shared timer; when its run resumes, only its own timer is
    cancelled: the shared one still serves "b"."""
    timers = park_all(elsewhere, "ab")
    RELEASE["a"].set()
    wait([elsewhere.parked.get("a").future])
    until(lambda: elsewhere.parked.ready)
    assert list(elsewhere.on_call_done("a", LocalKeyState(), timers["a"])) == ["A"]
    assert timers["a"].cancelled == [SAFETY_MS] and timers["a"].wakes == [5]


def test_ready_runs_left_for_later_get_a_timer_within_the_poll_interval(elsewhere):
    """``wake_soon``: a timer within ``async-poll-interval-ms`` from the callback at hand,
    unless a shared one comes by then."""
    timers = park_all(elsewhere, "a")["a"]  # its shared poll at 5
    elsewhere.parked.wake_soon("a", timers)
    assert timers.wakes == [5, SAFETY_MS]  # the shared poll comes by then
    timers.now = 5
    timers.wakes.remove(5)
    list(elsewhere.on_timer("a", LocalKeyState(), timers))  # next shared check at 15
    later = RecordingTimers(now=6)
    elsewhere.parked.wake_soon("z", later)
    assert later.wakes == []  # 6 + 5 = 11, on the grid 15: the shared timer armed already
    later.now = 11
    elsewhere.parked.wake_soon("z", later)
    assert later.wakes == []  # 16: the shared timer at 15 comes first
    later.now = 15
    later_key = RecordingTimers(now=15)
    list(elsewhere.on_timer("a", LocalKeyState(), later_key))  # the timer at 15 fires
    later.now = 16
    elsewhere.parked.wake_soon("z", later)
    assert later.wakes == [25]  # 21 on the grid: no shared timer comes by then


def test_a_forgotten_key_keeps_no_timer_its_runs_polls_left(elsewhere):
    """A run resumed by the shared timer on its own key leaves its safety timer (it fires
    within a second and finds nothing); once the key is erased (``ForgetKey``) no timer of
    it is left: each holds the key in Flink state. (A savepoint taken within that second
    held the forgotten key, in the timer.)"""
    timers = park_all(elsewhere, "a")["a"]
    RELEASE["a"].set()
    wait([elsewhere.parked.get("a").future])
    timers.now = timers.wakes.pop(0)  # the shared timer at 5, on "a"
    assert list(elsewhere.on_timer("a", LocalKeyState(), timers)) == ["A"]
    assert timers.wakes == [SAFETY_MS]
    erased = elsewhere.on_record("a", forget_input(ForgetKey("a")), LocalKeyState(), timers)
    assert list(erased) == []
    assert timers.wakes == [] and timers.ends_cancelled == 1


def test_a_forgotten_key_gives_up_the_shared_timer_it_carries(elsewhere):
    """The shared timer on the erased key is cancelled too; the next check of another key's
    run is armed again when that run's own timer fires (``SAFETY_POLL_MS`` at the latest),
    on its key."""
    timers = park_all(elsewhere, "ab")
    RELEASE["a"].set()
    wait([elsewhere.parked.get("a").future])
    until(lambda: elsewhere.parked.ready)
    assert list(elsewhere.on_call_done("a", LocalKeyState(), timers["a"])) == ["A"]
    assert timers["a"].wakes == [5]  # the shared timer, which "b" counts on
    erased = elsewhere.on_record("a", forget_input(ForgetKey("a")), LocalKeyState(), timers["a"])
    assert list(erased) == []
    assert timers["a"].wakes == [] and timers["b"].wakes == [SAFETY_MS]
    assert elsewhere.parked.next_checks() == [(5, "b")]
    fired = timers["b"]
    fired.now = fired.wakes.pop(0)
    assert list(elsewhere.on_timer("b", LocalKeyState(), fired)) == []  # "b" still runs
    assert sorted(fired.wakes) == [SAFETY_MS + 10, 2 * SAFETY_MS]
    assert elsewhere.parked.next_checks() == [(SAFETY_MS + 10, "b")]


def test_a_timer_of_a_key_that_holds_nothing_registers_no_shared_poll_on_it(elsewhere):
    """A timer of an erased key that this process did not know of (one restored from a
    checkpoint taken before the erasure) fires while another key's run is parked: it
    serves the shared checks due, but the next shared timer is not registered on the
    erased key (it would hold the key in Flink state again); the parked run's own timer
    registers it, on its key."""
    timers = park_all(elsewhere, "b")["b"]
    timers.now = timers.wakes.pop(0)  # the shared timer at 5: "b" still runs
    assert list(elsewhere.on_timer("b", LocalKeyState(), timers)) == []
    assert sorted(timers.wakes) == [15, SAFETY_MS]
    stray = RecordingTimers(now=16)
    assert list(elsewhere.on_timer("a", LocalKeyState(), stray)) == []
    assert stray.wakes == []
    [(next_check, _)] = elsewhere.parked.next_checks()
    timers.wakes.remove(15)  # the shared timer at 15, on "b" (counted as fired at 16)
    timers.now = 15
    assert list(elsewhere.on_timer("b", LocalKeyState(), timers)) == []
    assert -(-next_check // 5) * 5 in timers.wakes  # the next check's timer, on the grid
