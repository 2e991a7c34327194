"""Runs parked on durable work, and the policies around them: ``ParkedRuns``.

A run whose async action awaits a durable call (or the storing of its long-term items) is
parked: the key's control value holds the run, and this process keeps its live suspension
(``ParkedRun``) until the call is done and the driver resumes it. ``ParkedRuns`` keeps those
runs and owns every policy about them:

- polling: when each run is checked again (a backoff from ``async-poll-interval-ms``,
  sharpened by how long the action's recent calls took, ``_latency.CallLatency``), on a grid
  of that interval, and shared between the runs when the runner resumes finished calls from any
  key's callback (``resume_elsewhere``);
- bounds and backpressure: at most ``max-in-flight`` durable calls and
  ``long-term-memory-max-storing`` stores at once, the runner's thread blocking while they
  are taken (``wait_for_free_slot``, ``slow_down_while_queues_grow``);
- for a runner resuming elsewhere, whether a finished call's run resumes now or lets new
  runs start their calls first (``resume_now``).

It registers timers through the runner's ``Timers`` and never runs an action: the driver
(``KeyDriver``) parks runs here and resumes them. Everything runs on the runner's thread but
the callbacks ``park`` adds to a call's future, which run on the executor's threads: they
append to ``ready``, free the call's place and update the latency estimates.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, NamedTuple

from flink_agents.memory import CachedState
from flink_agents.runtime._engine import RunState, Suspended
from flink_agents.runtime._latency import CallLatency
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime.journal import CallFuture

if TYPE_CHECKING:
    from flink_agents.runtime._driver import Timers

logger = logging.getLogger(__name__)

SAFETY_POLL_MS = 1000
"""With ``resume_elsewhere``: how long after it parks (and then how often) a run's own timer
wakes it, whatever the shared polls do. What it is for: a parked run restored from a
checkpoint has only its own key's timers, and an input that has gone quiet has no other
callback to resume it from."""

STALL_REPORT_S = 60.0
"""How long the runner's thread blocks on the bounds (``wait_for_free_slot``,
``slow_down_while_queues_grow``) before it logs what it waits for, and again each time."""

STARTS_FIRST_QUIET_S = 0.005
STARTS_FIRST_AT_MOST_S = 0.05
"""How long a finished call's run may wait while new runs start calls, and how recently one
must have for them to go first (``ParkedRuns.resume_now``)."""

STARTS_FIRST_FULL_S = 1.0
"""How recently every place for a call must have been taken for new runs to go first
(``ParkedRuns.resume_now``): the input fills them, so it has records waiting for them."""


class Polling:
    """How a parked run is being polled: checks so far, when its call should end, and
    whether to check once early (a call that ends at once) before that."""

    __slots__ = ("check_early", "expected_at_ms", "polls")

    def __init__(self, parked_at_ms: int, expected_ms: float | None, check_early: bool) -> None:
        self.polls = 0
        self.expected_at_ms = None if expected_ms is None else parked_at_ms + round(expected_ms)
        self.check_early = check_early or expected_ms is None


class ParkedRun(NamedTuple):
    """A run parked on durable work in this process (never checkpointed: the key's control
    value holds ``run``, and a restored run starts its action again)."""

    run: RunState
    suspension: Suspended
    """Its live suspension: the coroutine and the future of the call it awaits."""
    sensory: CachedState
    short_term: CachedState
    """The memory caches the parked action's context reads and writes through (flushed)."""
    polling: Polling

    @property
    def future(self) -> Future[Any]:
        """The durable call (or store) the run waits for."""
        return self.suspension.future


class ReadyRun(NamedTuple):
    """A parked run whose call has finished (with ``resume_elsewhere``)."""

    key: Any
    handle: Any
    """What the runner gave, with the key current, to make the key current again."""
    when: float
    """When the call finished (``time.monotonic()``)."""


class _SharedPoll(NamedTuple):
    """An entry of the shared poll schedule, ordered by ``due_ms`` (``tie`` is unique)."""

    due_ms: int
    tie: int
    key: Any
    polling: Polling | None
    """The run's polling when it was scheduled; None for a wake-up (``wake_soon``)."""


class ParkedRuns:
    """The runs parked in this process, their polls and the bounds on their calls; see the
    module docstring.

    Args:
        options: the agent's options (poll intervals, ``max-in-flight``,
            ``long-term-memory-max-storing``).
        clock: the monotonic clock the backlog rules read (``resume_now``).
    """

    def __init__(self, options: AgentOptions, clock: Callable[[], float] = time.monotonic) -> None:
        self._options = options
        self._clock = clock
        self._runs: dict[Any, ParkedRun] = {}
        self.latency = CallLatency()
        """What each action's calls have shown of their duration."""
        self._in_flight: set[Future[Any]] = set()
        """The futures of parked runs' durable calls that are still running: an ended call
        leaves it (``CallFuture``) before its outcome is stored and its run may resume."""
        self._storing: set[Future[Any]] = set()
        """Futures of parked runs waiting for their long-term items to be stored (bounded by
        ``long-term-memory-max-storing``, not ``max-in-flight``); guarded like ``_in_flight``."""
        self._call_ended = threading.Condition(threading.Lock())
        """Notified (on an executor thread) whenever a call leaves ``_in_flight``; guards it."""
        self._calls_ended = 0
        self._queued = 0  # inputs waiting behind parked runs (this process's estimate)
        self._parked_at = 0.0
        """When (``clock``) a run last parked on a durable call."""
        self._full_at = -STARTS_FIRST_FULL_S
        """When (``clock``) every place for a call was last seen taken."""
        self._due: dict[Any, list[int]] = {}
        """Per key, the processing-time timers registered here that have not fired yet,
        latest first (so the next to fire is last)."""
        self._shared_polls: list[_SharedPoll] = []
        """With ``resume_elsewhere``: a heap of the parked runs' next polls, served by the
        shared timers (``_serve_shared_polls``)."""
        self._armed: list[int] = []
        """The shared timers registered and not yet fired, soonest first."""
        self._armed_on: dict[int, Any] = {}
        """The key each shared timer was registered on, by due time."""
        self._tie = itertools.count()
        self._key_handle: Callable[[], Any] | None = None
        self.ready: deque[ReadyRun] | None = None
        """With ``resume_elsewhere``: each parked run whose call has finished, appended on
        the executor's thread, oldest first; the runner takes them from the left."""

    # -- the runs -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._runs)

    def __contains__(self, key: Any) -> bool:
        return key in self._runs

    def __iter__(self) -> Iterator[Any]:
        """The keys of the parked runs."""
        return iter(self._runs)

    def get(self, key: Any) -> ParkedRun | None:
        """``key``'s parked run, if it has one here."""
        return self._runs.get(key)

    def call_done(self, key: Any) -> bool:
        """Whether ``key`` has a parked run whose call is done (false for a key in ``ready``
        whose run its own poll or a record of the key has resumed since)."""
        parked = self._runs.get(key)
        return parked is not None and parked.suspension.future.done()

    def futures(self) -> list[Future[Any]]:
        """The futures the parked runs wait for."""
        return [parked.suspension.future for parked in self._runs.values()]

    def keys_done(self) -> list[Any]:
        """The keys whose parked run's call is done."""
        return [key for key, parked in self._runs.items() if parked.suspension.future.done()]

    def calls_in_flight(self) -> int:
        """How many parked runs' durable calls are running."""
        return len(self._in_flight)

    def oldest_call_ms(self) -> int | None:
        """When the oldest parked action started (its partial calls in the action log must
        outlive any pruning)."""
        started = [parked.suspension.oldest_call_ms for parked in self._runs.values()]
        return min((ms for ms in started if ms is not None), default=None)

    def park(
        self,
        run: RunState,
        suspension: Suspended,
        sensory: CachedState,
        short_term: CachedState,
        timers: Timers,
    ) -> None:
        """Keep ``run``, suspended on ``suspension``'s future, until the driver resumes it
        (``unpark``): its call takes a place among the bounds until it ends, and its first
        check is scheduled."""
        future, action = suspension.future, suspension.action
        if getattr(suspension, "storing", False):
            # Timed apart from the action's calls: a store takes a batch's time, not a call's.
            action = f"{action} (storing)"
            in_flight = self._storing
        else:
            in_flight = self._in_flight
        with self._call_ended:
            in_flight.add(future)
        clock = self._clock
        started = self._parked_at = clock()
        if not self.has_free_slot():
            self._full_at = started
        learn, ready = self.latency.learn, self.ready
        key, handle = run.key, None if ready is None else self._key_handle()

        # The call's place among max-in-flight is free once the call has ended: with an
        # action log (``CallFuture``) that is before its outcome is stored and the future
        # done, so the next call starts while the log writes.
        ends_apart = type(future) is CallFuture

        def release(future: Future[Any]) -> None:
            with self._call_ended:
                in_flight.discard(future)
                self._calls_ended += 1
                self._call_ended.notify()

        def done(future: Future[Any]) -> None:  # on the executor's thread
            now = clock()
            if ready is not None:  # before the operator may wake (just below) and look
                ready.append(ReadyRun(key, handle, now))
            if not ends_apart:
                release(future)
            learn(action, (now - started) * 1000)

        if ends_apart:
            future.add_ended_callback(release)
        future.add_done_callback(done)
        run.parked = True
        polling = Polling(
            timers.now_ms(),
            self.latency.first_check_ms(action, self._options.async_poll_interval_ms),
            # Once the action has shown its latency, a call that ends within the first
            # interval would be a first: skip that check (a callback per run).
            check_early=not self.latency.steady(action),
        )
        self._runs[key] = ParkedRun(run, suspension, sensory, short_term, polling)
        if ready is None:
            self._poll_later(key, polling, timers)
        else:
            self._poll_shared(key, polling, timers)
            self.wake_at(key, timers.now_ms() + SAFETY_POLL_MS, timers)

    def unpark(self, key: Any) -> ParkedRun:
        """Forget ``key``'s parked run (the driver resumes it); its timers stay registered."""
        return self._runs.pop(key)

    # -- timers ------------------------------------------------------------------------------

    def wake_at(self, key: Any, due_ms: int, timers: Timers) -> bool:
        """Have ``on_timer`` called for ``key`` at ``due_ms`` or earlier; False when a timer
        of the key already registered comes by then (nothing registered).

        PyFlink fires a key's timers through Flink's timer service, which hands the
        operator one mail per distinct timestamp: at one timestamp per parked run, the
        mails queue behind the input and polls fire late (``bench/RESULTS.md``). So due
        times are rounded up to a multiple of ``async-poll-interval-ms``: the polls of
        every key due in one interval fire together. And a key gets no second timer while
        one comes sooner (the poll of a run resumed by a record, which its next run then
        inherits)."""
        due_ms = self._on_grid(due_ms)
        due = self._due.get(key)
        if due is None:
            self._due[key] = [due_ms]
        elif due[-1] <= due_ms:
            return False
        else:
            due.append(due_ms)
        timers.wake_at(due_ms)
        return True

    def timer_fired(self, key: Any, timers: Timers, arm: bool = True) -> None:
        """A timer of ``key`` fired (the driver's ``on_timer``): serve the shared polls due
        (with ``resume_elsewhere``), and forget the key's timers that have fired: those
        due by now, else (a clock that disagrees, or a runner that calls ``on_timer``
        unasked) the next one, unless what fired was a shared timer registered on the
        key. ``arm``: whether the next shared timer may be registered on ``key`` (not on a
        key that holds nothing: a timer would hold it in Flink state; the next check then
        waits for another key's timer, each parked run's own at ``SAFETY_POLL_MS`` the
        latest)."""
        now_ms = timers.now_ms()
        shared = self.ready is not None and self._serve_shared_polls(key, now_ms, timers, arm)
        due = self._due.get(key)
        if due is None:
            return
        if due[-1] > now_ms and not shared:
            due.pop()
        while due and due[-1] <= now_ms:
            due.pop()
        if not due:
            del self._due[key]

    def poll_again(self, key: Any, timers: Timers) -> None:
        """``key``'s parked run was checked and its call still runs: schedule its next
        check (with ``resume_elsewhere``, the shared polls go on; its own timer comes
        again if it was what fired)."""
        if self.ready is None:
            self._poll_later(key, self._runs[key].polling, timers)
        elif key not in self._due:
            self.wake_at(key, timers.now_ms() + SAFETY_POLL_MS, timers)

    def cancel_timers(self, key: Any, timers: Timers, keep: Collection[int] = ()) -> None:
        """Cancel ``key``'s pending timers (its run resumes from another key's callback),
        but a shared timer registered on it (another run may count on that one) and those
        at a time in ``keep``: Flink keeps one timer per key and time, which a scheduled
        event, a sleep or an expiry check of the key may need too."""
        for due_ms in self._due.pop(key, None) or ():
            if self._armed_on.get(due_ms) != key and due_ms not in keep:
                timers.cancel(due_ms)

    def forget_key(self, key: Any) -> set[int]:
        """``key`` is erased (``ForgetKey``; no run of it is parked): forget the timers its
        runs' polls left on it, shared ones registered on it too, and return their due
        times, for the driver to cancel (each timer holds the key in Flink state). The
        shared checks a cancelled timer was for are armed again by the next run that parks
        or the next timer that fires: each parked run's own, ``SAFETY_POLL_MS`` at the
        latest."""
        due = set(self._due.pop(key, None) or ())
        for due_ms, armed_on in list(self._armed_on.items()):
            if armed_on == key:
                del self._armed_on[due_ms]
                self._armed.remove(due_ms)
                due.add(due_ms)
        return due

    def _on_grid(self, due_ms: int) -> int:
        """``due_ms`` rounded up to a multiple of ``async-poll-interval-ms`` (``wake_at``)."""
        grid = self._options.async_poll_interval_ms
        return -(-due_ms // grid) * grid

    # -- one run's polls ----------------------------------------------------------------------

    def _poll_later(self, key: Any, polling: Polling, timers: Timers) -> None:
        """Check a parked run again later. Every timer that fires costs a Python call, and
        many parked runs polling at short intervals add up, so:

        - without an estimate of the call's duration: a backoff that doubles from
          ``async-poll-interval-ms`` up to ``async-poll-max-interval-ms``;
        - with one (the action's recent calls took that long, ``CallLatency``): one check
          after the first interval (a call that ended early; not once the action's calls
          have shown a steady latency), then one when the call is expected to end, then
          the backoff from its first interval. A call of steady latency is resumed right
          when it ends, after one or two checks rather than one per backoff step.

        Checks fall on a grid of ``async-poll-interval-ms`` (see ``wake_at``).
        """
        due, at_expected = self._next_poll(polling, timers.now_ms())
        if not self.wake_at(key, due, timers):
            return  # an earlier timer of the key comes first: decide again then
        self._polled(polling, at_expected)

    def _next_poll(self, polling: Polling, now: int) -> tuple[int, bool]:
        """When to check a parked run next (``_poll_later``'s schedule), and whether that is
        the check at its expected end."""
        options = self._options
        interval = min(
            options.async_poll_max_interval_ms,
            options.async_poll_interval_ms * 2**polling.polls,
        )
        due = now + interval
        expected = polling.expected_at_ms
        if expected is not None and now < expected and (polling.polls or not polling.check_early):
            due = expected  # skip the backoff steps before the expected end
        at_expected = expected is not None and now < expected <= due
        if at_expected:
            due = expected
        return due, at_expected

    @staticmethod
    def _polled(polling: Polling, at_expected: bool) -> None:
        """A check is scheduled: the backoff goes on from it."""
        if at_expected:
            polling.expected_at_ms = None
            polling.polls = 0
        else:
            polling.polls += 1

    # -- shared polls (``resume_elsewhere``) ------------------------------------------------

    def resume_elsewhere(self, key_handle: Callable[[], Any]) -> None:
        """Let the runner resume a parked run as soon as its call has finished, from any
        key's callback, rather than at the run's next poll (each poll is a timer: a
        callback of its own). ``key_handle`` is called when a run parks, with its key
        current, and returns what the runner needs to make that key current again; every
        finished call then appends a ``ReadyRun`` to ``ready``, and the runner, with its
        key made current, calls the driver's ``on_call_done`` for it (``resume_now`` says
        when).

        Since any callback then resumes every finished run, the parked runs share their
        polls (``_poll_shared``): one timer per step of the poll grid at most, registered
        on whichever key's callback schedules it. Each run also keeps a timer of its own
        (``SAFETY_POLL_MS``: it is in Flink state, and wakes the run after a restore),
        which is cancelled when the run resumes (``cancel_timers``)."""
        self._key_handle = key_handle
        self.ready = deque()

    def wake_soon(self, key: Any, timers: Timers) -> None:
        """Have a timer fire within ``async-poll-interval-ms``, from the callback of ``key``
        at hand (with ``resume_elsewhere``): the runner left ready runs for later and the
        input may go quiet."""
        due = timers.now_ms() + self._options.async_poll_interval_ms
        if self._armed and self._armed[0] <= due:
            return  # a shared timer comes by then
        heapq.heappush(self._shared_polls, _SharedPoll(due, next(self._tie), key, None))
        self._arm_shared(key, timers)

    def next_checks(self) -> list[tuple[int, Any]]:
        """The shared schedule: ``(due_ms, key)`` of each parked run's next check (before
        rounding to the grid), soonest first."""
        runs = self._runs
        live = [
            poll
            for poll in self._shared_polls
            if poll.polling is not None
            and (parked := runs.get(poll.key)) is not None
            and parked.polling is poll.polling
        ]
        return [(poll.due_ms, poll.key) for poll in sorted(live)]

    def _poll_shared(self, key: Any, polling: Polling, timers: Timers) -> None:
        """``_poll_later`` for a runner that resumes parked runs from any key's callback:
        any timer that fires resumes every run whose call is done, so the parked runs
        share their polls. Each run's next check goes into one schedule
        (``_shared_polls``), and a timer is registered, on the key of the callback at hand,
        only when no shared timer comes by then: at most one per step of the grid,
        whatever the number of parked runs, where one timer per run fired
        (``bench/RESULTS.md``). When a shared timer fires, ``_serve_shared_polls`` checks
        every run due by then and schedules the next checks of those still running. Each
        run keeps one timer of its own, at ``SAFETY_POLL_MS`` (see there)."""
        self._schedule_shared(key, polling, timers.now_ms())
        self._arm_shared(key, timers)

    def _schedule_shared(self, key: Any, polling: Polling, now_ms: int) -> None:
        """Put the next check of ``key``'s parked run in the shared schedule."""
        due, at_expected = self._next_poll(polling, now_ms)
        self._polled(polling, at_expected)
        heapq.heappush(self._shared_polls, _SharedPoll(due, next(self._tie), key, polling))

    def _arm_shared(self, key: Any, timers: Timers) -> None:
        """Register a shared timer on ``key`` for the soonest scheduled check, unless one
        comes by then."""
        polls = self._shared_polls
        if not polls:
            return
        due_ms = self._on_grid(polls[0].due_ms)
        armed = self._armed
        if armed and armed[0] <= due_ms:
            return
        armed.insert(0, due_ms)
        self._armed_on[due_ms] = key
        timers.wake_at(due_ms)

    def _serve_shared_polls(self, key: Any, now_ms: int, timers: Timers, arm: bool) -> bool:
        """A timer of ``key`` fired: forget the shared timers due by now, check every run
        whose check is due (one whose call is done is in ``ready``, for the runner; one
        still running gets its next check) and arm the shared timer of the next on ``key``
        (if ``arm``). Whether a shared timer registered on ``key`` was due."""
        armed, armed_on = self._armed, self._armed_on
        # A shared timer due within the grid step counts as fired: were the clocks to
        # disagree, the next check must not wait on a timer that is gone.
        grid = self._options.async_poll_interval_ms
        shared = False
        while armed and armed[0] < now_ms + grid:
            if armed_on.pop(armed.pop(0)) == key:
                shared = True
        polls, runs = self._shared_polls, self._runs
        while polls and polls[0].due_ms < now_ms + grid:
            poll = heapq.heappop(polls)
            if poll.polling is None:
                continue  # a wake-up
            parked = runs.get(poll.key)
            if parked is None or parked.polling is not poll.polling:
                continue  # the run resumed (and maybe parked again) since
            if parked.suspension.future.done():
                continue  # in ``ready``
            self._schedule_shared(poll.key, poll.polling, now_ms)
        if arm:
            self._arm_shared(key, timers)
        return shared

    # -- bounds and backpressure ---------------------------------------------------------------

    def has_free_slot(self) -> bool:
        """Whether a new run could start a durable call now (``max-in-flight`` and
        ``long-term-memory-max-storing`` not reached)."""
        return (
            len(self._in_flight) < self._options.max_in_flight
            and len(self._storing) < self._options.long_term_memory_max_storing
        )

    def wait_for_free_slot(self) -> None:
        """Block (backpressure) while too many durable calls are running, before a new run
        starts. A condition the calls' callbacks notify, rather than ``wait`` on the
        futures: that costs a lock per future in flight, every time."""
        if not (self._in_flight or self._storing) or self.has_free_slot():
            return
        self._full_at = self._clock()
        with self._call_ended:
            while not self.has_free_slot():
                if not self._call_ended.wait(STALL_REPORT_S):
                    self._report_stall("a place for a call")

    def input_queued(self) -> None:
        """An input was queued behind a parked run (``slow_down_while_queues_grow``)."""
        self._queued += 1

    def queued_input_started(self) -> None:
        """An input queued behind a run has started its own."""
        self._queued = max(0, self._queued - 1)

    def slow_down_while_queues_grow(self) -> None:
        """Backpressure for inputs queued behind parked runs: past ``max-in-flight``, wait
        for a durable call to finish before taking the next record. Without it a bounded
        input is read at once and its queued runs are left for the final drain, which
        finishes them one at a time."""
        # Parked runs whose call is done count too, until a timer resumes them: counting
        # only running calls let queues grow past the bound while resumes lagged.
        # Runs parked only until their items are stored have a bound of their own; the
        # inputs queued behind any parked run count toward max-in-flight.
        storing = len(self._storing)
        if (
            len(self._runs) - storing + self._queued < self._options.max_in_flight
            and storing < self._options.long_term_memory_max_storing
        ):
            return
        with self._call_ended:
            if self._in_flight or self._storing:
                ended = self._calls_ended
                while self._calls_ended == ended:
                    if not self._call_ended.wait(STALL_REPORT_S):
                        self._report_stall("a call to end")

    def _report_stall(self, awaited: str) -> None:
        """The runner's thread has waited ``STALL_REPORT_S`` more for ``awaited``: log what
        is in flight. A future there whose call has ended missed its release (a bug: the
        thread would wait for it forever); it is released here, and logged as an error.
        Under ``_call_ended``."""
        missed = 0
        for in_flight in (self._in_flight, self._storing):
            for future in list(in_flight):
                if future.done() or (type(future) is CallFuture and future.ended):
                    in_flight.discard(future)
                    missed += 1
        if missed:
            self._calls_ended += 1
            logger.error(
                "%d durable call(s) that had ended still held a place among the bounds; released",
                missed,
            )
        logger.warning(
            "the runner's thread has waited another %.0f s for %s: %d durable call(s) and %d"
            " store(s) running (max-in-flight %d), %d parked run(s), %d input(s) queued"
            " behind them",
            STALL_REPORT_S,
            awaited,
            len(self._in_flight),
            len(self._storing),
            self._options.max_in_flight,
            len(self._runs),
            self._queued,
        )

    def resume_now(self, when: float, now: float) -> bool:
        """Whether a callback resumes a ready run whose call finished at ``when`` (``clock``;
        ``now`` likewise) rather than leave it for a later callback: yes while no new run
        could start a call, once no run has parked for ``STARTS_FIRST_QUIET_S`` (runs are
        not starting calls), once it has waited ``STARTS_FIRST_AT_MOST_S``, and unless
        every place for a call was taken within the last ``STARTS_FIRST_FULL_S`` (the input
        has records waiting for places).

        Under a backlog of input new runs come first: each resume is a callback's worth of
        work that keeps the calls' places empty, and when many calls end together (runs
        started together end together), resuming them all first left many of the places
        empty. Without one (the input never fills the places) a new run starts its call as
        soon as it arrives anyway, and holding ready runs back only delayed them
        (``bench/RESULTS.md``)."""
        return (
            not self.has_free_slot()
            or now - self._parked_at >= STARTS_FIRST_QUIET_S
            or now - when >= STARTS_FIRST_AT_MOST_S
            or now - self._full_at >= STARTS_FIRST_FULL_S
        )
