"""The life of a run, once for every runner: ``KeyDriver``.

A runner hands the driver three kinds of callbacks for one key at a time, with that key's
state and timers: a record arrived (``on_record``), a timer the driver asked for fired
(``on_timer``), the input ended (``on_end_of_input``). The driver owns everything between:
run sequence and start, stepping the engine, parking a run whose async action awaits a
durable call and resuming it, inputs queued behind a parked run, every error policy,
backpressure, runs restored from a checkpoint, the drain at the end of input, memory
snapshots and action-log pruning. What it emits (outputs, and side outputs tagged with the
channels the runner gave it) comes back from each callback as an iterator.

The Flink dispatcher is a thin adapter from PyFlink's callbacks and keyed state to it; the
local runner drives it over dicts and a simulated clock. So an option or a policy means the
same thing in every runner, which the parity suite checks.

State protocol (``KeyState``), per key: the two memory maps, one control value
(``KeyControl``: run sequence, the run in progress, the number of queued inputs, read once
and written at most once per callback) and the list of queued inputs (touched only when
the count says it holds something). The driver reads the memory maps through a write-back
``CachedState`` per callback (kept by a parked run): each key is read at most once and each
changed key written once, when the callback ends.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, wait
from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple, Protocol

from flink_agents.api import ActionExecutionError
from flink_agents.memory import CachedState, FlatMemory, StateMap, to_dict
from flink_agents.runtime._engine import RunEngine, RunState, StepResult, Suspended
from flink_agents.runtime._records import failed_run
from flink_agents.runtime.journal import CallFuture

logger = logging.getLogger(__name__)

_STEADY_AFTER_CALLS = 8
"""Calls of an action after which its latency counts as known (see ``_Polling``)."""

_SAFETY_POLL_MS = 1000
"""With ``resume_elsewhere``: how long after it parks (and then how often) a run's own timer
wakes it, whatever the shared polls do (``KeyDriver._poll_shared``). What it is for: a
parked run restored from a checkpoint has only its own key's timers, and an input that has
gone quiet has no other callback to resume it from."""

_STARTS_FIRST_QUIET_S = 0.005
_STARTS_FIRST_AT_MOST_S = 0.05
"""How long a finished call's run may wait while new runs start calls, and how recently one
must have for them to go first (``KeyDriver.resume_now``)."""

_STARTS_FIRST_FULL_S = 1.0
"""How recently every place for a call must have been taken for new runs to go first
(``KeyDriver.resume_now``): the input fills them, so it has records waiting for them."""

_PRUNE_EVERY = 64
"""Records between two asks whether the action log is due for pruning (it is at most every
quarter of its retention period, minutes by default; asking costs a clock read)."""


class ParkedRun(NamedTuple):
    """A run parked on durable work: its state (also in the key's control value) and its
    live suspension, which is never checkpointed."""

    run: RunState
    suspension: Suspended


@dataclass
class KeyControl:
    """A key's control values, kept together in one state value."""

    sequence: int = 0
    """The number of the key's latest run."""
    run: RunState | None = None
    """The run in progress when it is parked or waits for a retry (None between runs)."""
    pending: int = 0
    """Inputs queued behind ``run``."""


class _KeyCache:
    """What the driver keeps of one key between callbacks: the control value it last wrote
    and the key's two memory maps as write-back ``CachedState``s, which know what was read
    and written before. Flink's state is still written at the end of every callback (the
    maps are flushed, so they start the next callback clean); the cache only saves reading
    it back, and making the maps again."""

    __slots__ = ("control", "end_timer", "sensory", "short_term")

    def __init__(self) -> None:
        self.control: KeyControl | None = None
        self.sensory: CachedState | None = None
        self.short_term: CachedState | None = None
        self.end_timer = False
        """This driver registered the key's end-of-input timer (it fires once, at the end)."""


def _flush(
    control: KeyControl, state: KeyState, sensory: CachedState, short_term: CachedState
) -> None:
    """Write what a callback changed to the key's state (``_drive``'s ``finally``)."""
    sensory.flush()
    short_term.flush()
    state.set_control(control)


class _CallTimes:
    """Per action, what a driver has seen of how long its durable calls take. (One object
    rather than three attributes of the driver: see ``KeyDriver``.)"""

    __slots__ = ("expected_ms", "overshoot_ms", "timed")

    def __init__(self) -> None:
        self.expected_ms: dict[str, float] = {}
        """A moving average of how long the action's calls take to finish."""
        self.timed: dict[str, int] = {}
        """How many of the action's calls ``expected_ms`` has seen (up to a few)."""
        self.overshoot_ms: dict[str, float] = {}
        """A moving average of how far past ``expected_ms`` the action's calls end."""


class _Polling:
    """How a parked run is being polled: checks so far, when its call should end, and
    whether to check once early (a call that ends at once) before that."""

    __slots__ = ("check_early", "expected_at_ms", "polls")

    def __init__(self, parked_at_ms: int, expected_ms: float | None, check_early: bool) -> None:
        self.polls = 0
        self.expected_at_ms = None if expected_ms is None else parked_at_ms + round(expected_ms)
        self.check_early = check_early or expected_ms is None


class KeyState(Protocol):
    """One key's state, as the runner keeps it (dicts locally, keyed state on Flink).
    ``batch_puts`` (optional, False if absent): the memory maps' ``put_all`` writes several
    entries at less cost than one ``put`` each."""

    sensory: StateMap
    short_term: StateMap

    def control(self) -> KeyControl | None: ...

    def set_control(self, control: KeyControl) -> None: ...

    def push_pending(self, record: Any) -> None: ...

    def pop_pending(self) -> Any:
        """The oldest queued input, removed (called only while some are queued, as its run
        starts: the key's run before it has ended)."""
        ...


class Timers(Protocol):
    """One key's timers and the runner's clock."""

    def now_ms(self) -> int: ...

    def wake_at(self, due_ms: int) -> None:
        """Call ``on_timer`` for this key at ``due_ms`` (processing time)."""
        ...

    def wake_at_end(self) -> None:
        """Call ``on_end_of_input`` for this key once the input has ended (bounded input)."""
        ...

    def cancel(self, due_ms: int) -> None:
        """Forget this key's wake-up at ``due_ms`` (only runners that resume parked runs
        from other keys' callbacks need it: see ``KeyDriver.resume_elsewhere``)."""
        ...


class KeyDriver:
    """Runs an agent's runs for any number of keys; see the module docstring.

    Args:
        engine: the run engine (plan, options, action journal).
        errors: the channel error records are emitted on, as ``(errors, record)``.
        snapshots: the channel memory snapshots are emitted on (``memory-snapshots``).
    """

    def __init__(self, engine: RunEngine, *, errors: Any, snapshots: Any) -> None:
        self.engine = engine
        self.options = engine.options
        self.errors = errors
        self.snapshots = snapshots
        self.parked: dict[Any, ParkedRun] = {}
        """Runs waiting on a durable call in this process (never checkpointed)."""
        self._caches: dict[Any, tuple[CachedState, CachedState]] = {}
        """The memory caches of parked runs (flushed; kept for their action's context)."""
        self._in_flight: set[Future[Any]] = set()
        """The futures of parked runs' durable calls that are still running: an ended call
        leaves it (``CallFuture``) before its outcome is stored and its run may resume."""
        self._storing: set[Future[Any]] = set()
        """Futures of parked runs waiting for their long-term items to be stored (bounded by
        ``long-term-memory-max-storing``, not ``max-in-flight``); guarded like ``_in_flight``."""
        self._call_ended = threading.Condition(threading.Lock())
        """Notified (on an executor thread) whenever a call leaves ``_in_flight``; guards it."""
        self._calls_ended = 0
        self._polls: dict[Any, _Polling] = {}
        self._call_times = _CallTimes()
        self._due: dict[Any, list[int]] = {}
        """Per key, the processing-time timers this driver registered that have not fired
        yet, latest first (so the next to fire is last)."""
        self._shared_polls: list[tuple[int, int, Any, _Polling | None]] = []
        """With ``resume_elsewhere``: a heap of the parked runs' next polls, ``(due_ms, tie,
        key, polling)``, served by the shared timers (``_poll_shared``); ``polling`` None is
        a wake-up for ready runs left for later (``wake_soon``)."""
        self._armed: list[int] = []
        """The shared timers registered and not yet fired, soonest first."""
        self._armed_on: dict[int, Any] = {}
        """The key each shared timer was registered on, by due time."""
        self._tie = itertools.count()
        self._parked_at = 0.0
        """When (``time.monotonic()``) a run last parked on a durable call."""
        self._full_at = -_STARTS_FIRST_FULL_S
        """When (``time.monotonic()``) every place for a call was last seen taken."""
        self._queued = 0  # inputs waiting behind parked runs (this process's estimate)
        self._until_prune = 1  # records until the next ``maybe_prune`` (the first asks)
        self._keys: dict[Any, _KeyCache] = {}
        """Recently seen keys, at most ``state-cache-keys`` of them: in the order first
        seen until there are that many, then least recently seen first (a key seen again
        moves to the end only once the cache is full, when keys are evicted: a plain dict,
        which keeps insertion order, is all the cache needs).
        Only this driver writes its keys' state (a new attempt or a restore builds a new
        driver), so what it last wrote or read is what the state holds."""
        self._keys_limit = self.options.state_cache_keys
        self.steps = 0
        """Actions completed (or replayed from the action log) by this driver."""
        self.ready: deque[tuple[Any, Any, float]] | None = None
        """With ``resume_elsewhere``: ``(key, handle, when)`` of each parked run whose call
        has finished (``when``: ``time.monotonic()`` then), appended on the executor's
        thread, oldest first."""
        self._key_handle: Callable[[], Any] | None = None
        self.metrics = engine.metrics
        self.metrics.watch(lambda: len(self.parked), lambda: len(self._in_flight))
        self.event_log = engine.event_log
        self._plain_runs = not (
            self.event_log.enabled or self.options.memory_snapshots or engine.records_all
        )
        """Whether a new run may start through ``_run_plain``: neither the event log (it
        times each action) nor memory snapshots (emitted per run) are on, nor does the
        action log record every action (``step`` makes the records)."""

    # -- callbacks -------------------------------------------------------------------------

    def on_record(self, key: Any, record: Any, state: KeyState, timers: Timers) -> Iterator[Any]:
        """A record of ``key`` arrived: start its run, or queue it behind the one in progress.
        (Not a generator itself: the common case hands back ``_drive``'s, one level less
        per record.)"""
        journal = self.engine.journal
        if journal is not None:
            self._until_prune -= 1
            if self._until_prune <= 0:
                self._until_prune = _PRUNE_EVERY
                pruned = journal.maybe_prune(self._oldest_in_flight)
                if pruned:
                    self.metrics.log_pruned(pruned)
        # ``_known`` and ``_control``, inlined for a key seen before (once per record).
        keys = self._keys
        known = keys.get(key)
        if known is None:
            known = self._known(key)  # a new key (or none: no cache)
        elif len(keys) >= self._keys_limit:
            keys[key] = keys.pop(key)  # the most recent now (``_known``)
        control = known.control if known is not None else None
        if control is None:
            control = self._control(key, state, known)
        if control.run is None:
            if self._in_flight or self._storing:
                self._respect_in_flight_limit()
            if self._plain_runs and known is not None and known.sensory is not None:
                return self._run_plain(key, record, control, state, timers, known)
            return self._drive(key, control, state, timers, record=record, known=known)
        return self._queue(key, record, control, state, timers)

    def _run_plain(
        self,
        key: Any,
        record: Any,
        control: KeyControl,
        state: KeyState,
        timers: Timers,
        known: _KeyCache,
    ) -> Iterable[Any]:
        """A new run of a key seen before, for the common run whose actions are all plain
        (``RunEngine.run_new``): what ``_drive`` does for it, without a generator. A run
        that needs more (an async action, a failure, a replay) goes on in ``_drive``, from
        where its plain actions stopped."""
        sensory, short_term = known.sensory, known.short_term
        engine = self.engine
        control.sequence += 1
        try:
            steps, outputs, run, outcome = engine.run_new(
                key, control.sequence, record, sensory, short_term
            )
        except BaseException:
            _flush(control, state, sensory, short_term)
            raise
        self.steps += steps
        if run is not None:
            if outcome is not None or not run.finished:
                control.run = run  # ``_drive`` takes it from here (and writes the control value)
                return chain(
                    outputs, self._drive(key, control, state, timers, known=known, first=outcome)
                )
            self.metrics.run_succeeded()
            engine.end(run, sensory)
        _flush(control, state, sensory, short_term)
        return outputs

    def _queue(
        self, key: Any, record: Any, control: KeyControl, state: KeyState, timers: Timers
    ) -> Iterator[Any]:
        """Queue ``record`` behind the key's run in progress (and resume that run if it can)."""
        parked = self.parked.get(key)
        state.push_pending(record)
        control.pending += 1
        self._queued += 1
        if parked is not None and parked.suspension.future.done():
            # The key's durable call is already done: resume its run now rather than at the
            # next poll; this record runs when it ends.
            self._unpark(key)
            yield from self._drive(key, control, state, timers, resume=parked)
            return
        if parked is None:
            # A run in state without a coroutine here was restored from a checkpoint, or
            # waits for a retry. Its timers may not come back with it (PyFlink's process
            # mode restores none), so its key's next record resumes it.
            if timers.now_ms() >= control.run.retry_at_ms:
                yield from self._drive(key, control, state, timers)
                return
            self._wake_at(key, control.run.retry_at_ms, timers)
            self._wake_at_end(key, timers)
        self._set_control(key, state, control)
        self._slow_down_while_queues_grow()

    def on_timer(self, key: Any, state: KeyState, timers: Timers) -> Iterator[Any]:
        """A timer of ``key`` fired: resume its parked run if its call is done, retry its
        failed action if the backoff is over, or poll again later."""
        now_ms = timers.now_ms()
        shared = self.ready is not None and self._serve_shared_polls(key, now_ms, timers)
        self._timer_fired(key, now_ms, shared)
        return self._wake(key, state, timers, draining=False)

    def on_end_of_input(self, key: Any, state: KeyState, timers: Timers) -> Iterator[Any]:
        """The input ended: finish ``key``'s run and queued inputs, waiting for their calls
        (and retry backoffs) on this thread."""
        return self._wake(key, state, timers, draining=True)

    def resume_elsewhere(self, key_handle: Callable[[], Any]) -> None:
        """Let the runner resume a parked run as soon as its call has finished, from any
        key's callback, rather than at the run's next poll (each poll is a timer: a
        callback of its own). ``key_handle`` is called when a run parks, with its key
        current, and returns what the runner needs to make that key current again; every
        finished call then appends ``(key, handle, when)`` to ``ready``, and the runner,
        with ``key`` made current, calls ``on_call_done`` for it (``resume_now`` says when).

        Since any callback then resumes every finished run, the parked runs share their
        polls (``_poll_shared``): one timer per step of the poll grid at most, registered
        on whichever key's callback schedules it. Each run also keeps a timer of its own
        (``_SAFETY_POLL_MS``: it is in Flink state, and wakes the run after a restore), which
        is cancelled when the run resumes."""
        self._key_handle = key_handle
        self.ready = deque()

    def call_done(self, key: Any) -> bool:
        """Whether ``key`` has a parked run whose call is done: false for a key in ``ready``
        whose run its own poll or a record of the key has resumed since."""
        parked = self.parked.get(key)
        return parked is not None and parked.suspension.future.done()

    def on_call_done(self, key: Any, state: KeyState, timers: Timers) -> Iterator[Any]:
        """Resume ``key``'s parked run if its call is done (``call_done``): what its poll
        would do, now; its pending polls are cancelled. The runner has made ``key``
        current."""
        if not self.call_done(key):
            return iter(())
        due = self._due.pop(key, None)
        for due_ms in due or ():
            if self._armed_on.get(due_ms) != key:  # a shared timer the key also carries
                timers.cancel(due_ms)
        return self._wake(key, state, timers, draining=False)

    # -- running ---------------------------------------------------------------------------

    def _wake(self, key: Any, state: KeyState, timers: Timers, draining: bool) -> Iterator[Any]:
        if draining:
            known = self._known(key)
            if known is not None:
                known.end_timer = False  # it fired
        parked = self.parked.get(key)
        if parked is None:
            control = self._control(key, state)
            if control.run is None:
                return
            if draining or timers.now_ms() >= control.run.retry_at_ms:
                # Restored from a checkpoint, or due for a retry: run the head action again
                # (at the drain, after the rest of its backoff, as its timer would have).
                remaining_ms = control.run.retry_at_ms - timers.now_ms()
                if draining and remaining_ms > 0:
                    time.sleep(remaining_ms / 1000)
                yield from self._drive(key, control, state, timers, draining=draining)
            else:  # an earlier timer of the key (a poll of its previous run)
                self._wake_at(key, control.run.retry_at_ms, timers)
            return
        future = parked.suspension.future
        if not future.done():
            if not draining:
                if self.ready is None:
                    self._poll_later(key, self._polls[key], timers)
                elif key not in self._due:  # its own timer fired: the shared polls go on
                    self._wake_at(key, timers.now_ms() + _SAFETY_POLL_MS, timers)
                return
            wait([future])
        self._unpark(key)
        control = self._control(key, state)
        yield from self._drive(key, control, state, timers, draining, resume=parked)

    def _drive(
        self,
        key: Any,
        control: KeyControl,
        state: KeyState,
        timers: Timers,
        draining: bool = False,
        *,
        record: Any = None,
        resume: ParkedRun | None = None,
        known: _KeyCache | bool | None = False,
        first: Suspended | ActionExecutionError | None = None,
    ) -> Iterator[Any]:
        """Run the key's run in progress (``resume``: a parked run, live, with its done
        call; else the one in state, restored or due for a retry; else a new one for
        ``record``), then its queued inputs, until all end or one parks. The control value
        is written once, at the end. (``known``: the key's cache entry, when the caller has
        it already; ``first``: what stopped ``run_plain`` on the run, to handle first.)"""
        engine = self.engine
        metrics, event_log = self.metrics, self.event_log
        logging_events = event_log.enabled
        # ``run_plain`` makes no per-step results: the event log times each action, and
        # ``action-log-record: all`` records each one, from ``step``'s results.
        plain = not (logging_events or engine.records_all)
        suspension = None
        if known is False:
            known = self._known(key)
        if resume is not None:
            run, suspension = resume
            # The parked action's context reads and writes through the caches it started with.
            sensory, short_term = self._caches.pop(key)
        else:
            if known is None or known.sensory is None:
                put_all = getattr(state, "batch_puts", False)
                sensory = CachedState(state.sensory, put_all=put_all)
                short_term = CachedState(state.short_term, put_all=put_all)
                if known is not None:
                    known.sensory, known.short_term = sensory, short_term
            else:
                sensory, short_term = known.sensory, known.short_term
            run = control.run if control.run is not None else self._start(key, control, record)
        try:
            while True:
                while run.queue or run.ready:
                    started = time.perf_counter() if logging_events else 0.0
                    outcome, first = first, None
                    if outcome is None and suspension is None and not run.ready and plain:
                        # Plain actions back to back (``run_plain``); what stops them (an
                        # async action, a replay, a failure, a suspension) is handled below
                        # as ``step``'s outcome.
                        steps, outputs, outcome = engine.run_plain(run, sensory, short_term)
                        self.steps += steps
                        yield from outputs
                        if outcome is None and not run.queue:
                            continue
                    try:
                        if outcome is None:
                            if suspension is not None:
                                outcome = engine.resume(run, suspension)
                            else:
                                outcome = engine.step(run, sensory, short_term)
                        elif isinstance(outcome, ActionExecutionError):
                            raise outcome
                        if draining:
                            outcome = engine.complete_blocking(run, outcome)
                    except ActionExecutionError as error:
                        suspension = None
                        if logging_events:
                            self._log_failed_action(run, error, started)
                        if self.options.error_policy == "fail":
                            # The job fails and Flink restores its checkpoint; a runner that
                            # goes on (the local one) must not keep the run's sensory memory.
                            engine.end(run, sensory)
                            control.run = None
                            metrics.run_failed()
                            event_log.run_finished(run.key, run.sequence, "failed", error=error)
                            raise
                        if self._retry(run, error, timers, draining):
                            metrics.action_retried()
                            if draining:
                                continue
                            control.run = run  # parked until its backoff is over
                            return
                        metrics.run_failed()
                        metrics.run_to_error_output()
                        event_log.run_finished(run.key, run.sequence, "error_output", error=error)
                        yield (
                            self.errors,
                            failed_run(
                                run.key,
                                run.input,
                                run.sequence,
                                error.action,
                                error.cause,
                                run.attempts + 1,
                            ),
                        )
                        break  # run abandoned
                    suspension = None
                    if not isinstance(outcome, StepResult):
                        self._park(run, outcome, timers)
                        self._caches[key] = (sensory, short_term)
                        control.run = run
                        return
                    self.steps += 1
                    metrics.action_completed(outcome.action, len(outcome.events), outcome.replayed)
                    if logging_events:
                        self._log_action(run, outcome, started)
                    yield from outcome.outputs
                else:
                    metrics.run_succeeded()
                    if logging_events:
                        event_log.run_finished(run.key, run.sequence, "succeeded")
                engine.end(run, sensory)
                control.run = None
                if self.options.memory_snapshots:
                    yield (
                        self.snapshots,
                        {
                            "key": run.key,
                            "run_sequence": run.sequence,
                            "short_term_memory": to_dict(FlatMemory(short_term).root()),
                        },
                    )
                if control.pending == 0:
                    return
                control.pending -= 1
                self._queued = max(0, self._queued - 1)
                run = self._start(key, control, state.pop_pending())
        finally:  # Flink's state is complete whenever this callback returns
            # (nothing to do for a map the callback did not change)
            _flush(control, state, sensory, short_term)
            if known is not None:
                known.control = control
                # (A resumed run's maps: those it parked with, which may predate the entry.)
                known.sensory, known.short_term = sensory, short_term

    # -- the per-key cache ------------------------------------------------------------------

    def _known(self, key: Any) -> _KeyCache | None:
        """The key's cache entry, made (evicting the least recent key) if new; None when
        ``state-cache-keys`` is 0."""
        limit = self._keys_limit
        if not limit:
            return None
        keys = self._keys
        known = keys.get(key)
        if known is None:
            known = keys[key] = _KeyCache()
            if len(keys) > limit:
                del keys[next(iter(keys))]
        elif len(keys) >= limit:
            keys[key] = keys.pop(key)
        return known

    def _control(
        self, key: Any, state: KeyState, known: _KeyCache | bool | None = False
    ) -> KeyControl:
        """The key's control value: the one this driver last wrote, else read from state.
        (``known``: the key's cache entry, when the caller has it already.)"""
        if known is False:
            known = self._known(key)
        if known is not None and known.control is not None:
            return known.control
        control = state.control() or KeyControl()
        if known is not None:
            known.control = control
        return control

    def _set_control(self, key: Any, state: KeyState, control: KeyControl) -> None:
        state.set_control(control)
        known = self._known(key)
        if known is not None:
            known.control = control

    def _start(self, key: Any, control: KeyControl, record: Any) -> RunState:
        control.sequence += 1
        if self.event_log.enabled:
            self.event_log.run_started(key, control.sequence, record)
        return self.engine.start(key, control.sequence, record)

    # -- the event log ------------------------------------------------------------------------

    def _log_action(self, run: RunState, outcome: StepResult, started: float) -> None:
        """One action completed (or was replayed): its line, then one per event it sent.
        A suspended action's time counts from the callback that resumed it."""
        log = self.event_log
        log.action_finished(
            run.key,
            run.sequence,
            outcome.step,
            outcome.action,
            "replayed" if outcome.replayed else "succeeded",
            duration_ms=(time.perf_counter() - started) * 1000,
        )
        for event in outcome.events:
            log.event(run.key, run.sequence, outcome.step, event, source=outcome.action)

    def _log_failed_action(
        self, run: RunState, error: ActionExecutionError, started: float
    ) -> None:
        self.event_log.action_finished(
            run.key,
            run.sequence,
            run.steps + 1,
            error.action,
            "failed",
            duration_ms=(time.perf_counter() - started) * 1000,
            error=error.cause,
        )

    def _retry(
        self, run: RunState, error: ActionExecutionError, timers: Timers, draining: bool
    ) -> bool:
        """Apply the ``retry`` or ``error-output`` policy to a failed action: True when it
        will run again (now when draining, else after a backoff timer); False to give the
        run up."""
        if self.options.error_policy == "retry" and (
            run.attempts + 1 < self.options.retry_max_attempts
        ):
            run.attempts += 1
            backoff = self.options.retry_backoff_ms(run.attempts)
            logger.info(
                "retrying action %r of key %r (run %d) in %d ms, attempt %d of %d, after %s: %s",
                error.action,
                run.key,
                run.sequence,
                backoff,
                run.attempts + 1,
                self.options.retry_max_attempts,
                type(error.cause).__name__,
                error.cause,
            )
            if draining:
                time.sleep(backoff / 1000)
                return True
            # The clock is in whole ms, rounded down: one more, so that no retry comes
            # before its backoff is over.
            run.retry_at_ms = timers.now_ms() + backoff + 1
            run.parked = True
            self._wake_at(run.key, run.retry_at_ms, timers)
            self._wake_at_end(run.key, timers)
            return True
        return False

    def _park(self, run: RunState, suspension: Suspended, timers: Timers) -> None:
        self.parked[run.key] = ParkedRun(run, suspension)
        future, action = suspension.future, suspension.action
        if getattr(suspension, "storing", False):
            # Timed apart from the action's calls: a store takes a batch's time, not a call's.
            action = f"{action} (storing)"
            in_flight = self._storing
        else:
            in_flight = self._in_flight
        with self._call_ended:
            in_flight.add(future)
        started = self._parked_at = time.monotonic()
        if not self.has_free_slot():
            self._full_at = started
        times = self._call_times
        expected, timed, overshoot = times.expected_ms, times.timed, times.overshoot_ms
        ready = self.ready
        key, handle = run.key, None if ready is None else self._key_handle()

        # The call's place among max-in-flight is free once the call has ended: with an
        # action log (``CallFuture``) that is before its outcome is stored and the future
        # done (2-5 ms earlier at 256 in flight: about a point of the rate there).
        ends_apart = type(future) is CallFuture

        def release(future: Future[Any]) -> None:
            with self._call_ended:
                in_flight.discard(future)
                self._calls_ended += 1
                self._call_ended.notify()

        def done(future: Future[Any]) -> None:  # on the executor's thread
            now = time.monotonic()
            if ready is not None:  # before the operator may wake (just below) and look
                ready.append((key, handle, now))
            if not ends_apart:
                release(future)
            took_ms = (now - started) * 1000
            estimate = expected.get(action)
            # Down at once, up by a quarter of the difference: an estimate that rarely lies
            # after a call's end, so waiting for it seldom delays a resume.
            if estimate is None or took_ms < estimate:
                expected[action] = took_ms
            else:
                expected[action] = estimate + (took_ms - estimate) / 4
            if estimate is not None:
                past = max(0.0, took_ms - estimate)
                average = overshoot.get(action, past)
                overshoot[action] = average + (past - average) / 8
            if timed.get(action, 0) < _STEADY_AFTER_CALLS:
                timed[action] = timed.get(action, 0) + 1

        if ends_apart:
            future.add_ended_callback(release)
        future.add_done_callback(done)
        run.parked = True
        polling = _Polling(
            timers.now_ms(),
            self._first_check_ms(action),
            # Once the action has shown its latency, a call that ends within the first
            # interval would be a first: skip that check (a callback per run).
            check_early=self._call_times.timed.get(action, 0) < _STEADY_AFTER_CALLS,
        )
        self._polls[run.key] = polling
        if ready is None:
            self._poll_later(run.key, polling, timers)
        else:
            self._poll_shared(run.key, polling, timers)
            self._wake_at(run.key, timers.now_ms() + _SAFETY_POLL_MS, timers)
        self._wake_at_end(run.key, timers)

    def _first_check_ms(self, action: str) -> float | None:
        """When, after it parks, to check a run of ``action`` first, if its calls have shown
        how long they take: the earliest they have recently ended (``expected_ms``) plus
        twice how far past it they end on average, so that a steady action's runs are
        mostly resumed by that one check rather than by the backoff step after it (each
        check is a timer, a Python callback); the margin is at most a twentieth of the
        expected time (or one poll interval), so an action of varied latency keeps
        resuming its quick calls early."""
        expected = self._call_times.expected_ms.get(action)
        if expected is None:
            return None
        past = self._call_times.overshoot_ms.get(action)
        if not past:
            return expected
        return expected + min(2 * past, max(self.options.async_poll_interval_ms, expected / 20))

    def _unpark(self, key: Any) -> None:
        del self.parked[key]
        self._polls.pop(key, None)

    def _poll_later(self, key: Any, polling: _Polling, timers: Timers) -> None:
        """Check a parked run again later. Every timer that fires costs a Python call, and
        hundreds of parked runs polling every few ms add up, so:

        - without an estimate of the call's duration: a backoff that doubles from
          ``async-poll-interval-ms`` up to ``async-poll-max-interval-ms``;
        - with one (the action's recent calls took that long, see ``_park``): one check
          after the first interval (a call that ended early; not once the action's calls
          have shown a steady latency), then one when the call is expected to end, then
          the backoff from its first interval. A call of steady latency is resumed right
          when it ends, after one or two checks rather than one per backoff step.

        Checks fall on a grid of ``async-poll-interval-ms`` (see ``_wake_at``).
        """
        due, at_expected = self._next_poll(polling, timers.now_ms())
        if not self._wake_at(key, due, timers):
            return  # an earlier timer of the key comes first: decide again then
        self._polled(polling, at_expected)

    def _next_poll(self, polling: _Polling, now: int) -> tuple[int, bool]:
        """When to check a parked run next (``_poll_later``'s schedule), and whether that is
        the check at its expected end."""
        options = self.options
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
    def _polled(polling: _Polling, at_expected: bool) -> None:
        """A check is scheduled: the backoff goes on from it."""
        if at_expected:
            polling.expected_at_ms = None
            polling.polls = 0
        else:
            polling.polls += 1

    def _poll_shared(self, key: Any, polling: _Polling, timers: Timers) -> None:
        """``_poll_later`` for a runner that resumes parked runs from any key's callback
        (``resume_elsewhere``): any timer that fires resumes every run whose call is done,
        so the parked runs share their polls. Each run's next check goes into one schedule
        (``_shared_polls``), and a timer is registered, on the key of the callback at hand,
        only when no shared timer comes by then: at most one per step of the grid,
        whatever the number of parked runs, where one timer per run fired (256 runs parked
        together in the first 75 ms of a job made some 800 timer callbacks in its first
        300 ms, each a Python call between records: ``bench/RESULTS.md``). When a shared
        timer fires, ``_serve_shared_polls`` checks every run due by then and schedules the
        next checks of those still running. Each run keeps one timer of its own, at
        ``_SAFETY_POLL_MS`` (see there)."""
        self._schedule_shared(key, polling, timers.now_ms())
        self._arm_shared(key, timers)

    def _schedule_shared(self, key: Any, polling: _Polling, now_ms: int) -> None:
        """Put the next check of ``key``'s parked run in the shared schedule."""
        due, at_expected = self._next_poll(polling, now_ms)
        self._polled(polling, at_expected)
        heapq.heappush(self._shared_polls, (due, next(self._tie), key, polling))

    def wake_soon(self, key: Any, timers: Timers) -> None:
        """Have a timer fire within ``async-poll-interval-ms``, from the callback of ``key``
        at hand (with ``resume_elsewhere``): the runner left ready runs for later and the
        input may go quiet."""
        due = timers.now_ms() + self.options.async_poll_interval_ms
        if self._armed and self._armed[0] <= due:
            return  # a shared timer comes by then
        heapq.heappush(self._shared_polls, (due, next(self._tie), key, None))
        self._arm_shared(key, timers)

    def _arm_shared(self, key: Any, timers: Timers) -> None:
        """Register a shared timer on ``key`` for the soonest scheduled check, unless one
        comes by then."""
        polls = self._shared_polls
        if not polls:
            return
        due_ms = self._on_grid(polls[0][0])
        armed = self._armed
        if armed and armed[0] <= due_ms:
            return
        armed.insert(0, due_ms)
        self._armed_on[due_ms] = key
        timers.wake_at(due_ms)

    def _serve_shared_polls(self, key: Any, now_ms: int, timers: Timers) -> bool:
        """A timer of ``key`` fired (with ``resume_elsewhere``): forget the shared timers
        due by now, check every run whose check is due (one whose call is done is in
        ``ready``, for the runner; one still running gets its next check) and arm the
        shared timer of the next. Whether a shared timer registered on ``key`` was due."""
        armed, armed_on = self._armed, self._armed_on
        # A shared timer due within the grid step counts as fired: were the clocks to
        # disagree, the next check must not wait on a timer that is gone.
        grid = self.options.async_poll_interval_ms
        shared = False
        while armed and armed[0] < now_ms + grid:
            if armed_on.pop(armed.pop(0)) == key:
                shared = True
        polls, parked = self._shared_polls, self.parked
        while polls and polls[0][0] < now_ms + grid:
            _, _, polled, polling = heapq.heappop(polls)
            if polling is None or self._polls.get(polled) is not polling:
                continue  # a wake-up, or the run resumed (and maybe parked again) since
            entry = parked.get(polled)
            if entry is None or entry.suspension.future.done():
                continue  # in ``ready`` (or gone)
            self._schedule_shared(polled, polling, now_ms)
        self._arm_shared(key, timers)
        return shared

    def _wake_at(self, key: Any, due_ms: int, timers: Timers) -> bool:
        """Have ``on_timer`` called for ``key`` at ``due_ms`` or earlier; False when a timer
        of the key already registered comes by then (nothing registered).

        PyFlink fires a key's timers through Flink's timer service, which hands the
        operator one mail per distinct timestamp: at one timestamp per parked run, the
        mails queued behind the input and polls fired up to hundreds of ms late
        (``bench/RESULTS.md``). So due times are rounded up to a multiple of
        ``async-poll-interval-ms``: the polls of every key due in one interval fire
        together. And a key gets no second timer while one comes sooner (the poll of a run
        resumed by a record, which its next run then inherits)."""
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

    def _on_grid(self, due_ms: int) -> int:
        """``due_ms`` rounded up to a multiple of ``async-poll-interval-ms`` (``_wake_at``)."""
        grid = self.options.async_poll_interval_ms
        return -(-due_ms // grid) * grid

    def _timer_fired(self, key: Any, now_ms: int, shared: bool = False) -> None:
        """Forget the key's timers that have fired: those due by now, else (a clock that
        disagrees, or a runner that calls ``on_timer`` unasked) the next one, unless what
        fired was a shared timer registered on the key (``shared``)."""
        due = self._due.get(key)
        if due is None:
            return
        if due[-1] > now_ms and not shared:
            due.pop()
        while due and due[-1] <= now_ms:
            due.pop()
        if not due:
            del self._due[key]

    def _wake_at_end(self, key: Any, timers: Timers) -> None:
        """Have ``on_end_of_input`` called for ``key`` at the end of input (once per key:
        each registration is a call into the JVM on Flink)."""
        known = self._known(key)
        if known is None or not known.end_timer:
            timers.wake_at_end()
            if known is not None:
                known.end_timer = True

    def _oldest_in_flight(self) -> int | None:
        """When the oldest parked action of this driver started (its partial calls in the
        action log must outlive any pruning)."""
        started = [parked.suspension.oldest_call_ms for parked in self.parked.values()]
        return min((ms for ms in started if ms is not None), default=None)

    def _slow_down_while_queues_grow(self) -> None:
        """Backpressure for inputs queued behind parked runs: past ``max-in-flight``, wait
        for a durable call to finish before taking the next record. Without it a bounded
        input is read at once and its queued runs are left for the final drain, which
        finishes them one at a time."""
        # Parked runs whose call is done count too, until a timer resumes them: counting
        # only running calls let queues grow past the bound while resumes lagged.
        # Runs parked only until their items are stored have a bound of their own; the
        # inputs queued behind any parked run count toward max-in-flight, as before.
        storing = len(self._storing)
        if (
            len(self.parked) - storing + self._queued < self.options.max_in_flight
            and storing < self.options.long_term_memory_max_storing
        ):
            return
        with self._call_ended:
            if self._in_flight or self._storing:
                ended = self._calls_ended
                while self._calls_ended == ended:
                    self._call_ended.wait()

    def has_free_slot(self) -> bool:
        """Whether a new run could start a durable call now (``max-in-flight`` and
        ``long-term-memory-max-storing`` not reached)."""
        return (
            len(self._in_flight) < self.options.max_in_flight
            and len(self._storing) < self.options.long_term_memory_max_storing
        )

    def resume_now(self, when: float, now: float) -> bool:
        """Whether a callback resumes a ready run whose call finished at ``when``
        (``time.monotonic()``; ``now`` likewise) rather than leave it for a later callback:
        yes while no new run could start a call, once no run has parked for
        ``_STARTS_FIRST_QUIET_S`` (runs are not starting calls), once it has waited
        ``_STARTS_FIRST_AT_MOST_S``, and unless every place for a call was taken within the
        last ``_STARTS_FIRST_FULL_S`` (the input has records waiting for places).

        Under a backlog of input new runs come first: each resume is a callback's worth of
        work that keeps the calls' places empty, and when many calls end together (runs
        started together end together), resuming them all first left up to two thirds of
        the places empty for tens of ms at a time. Without one (the input never fills the
        places) a new run starts its call as soon as it arrives anyway, and holding ready
        runs back only delayed them: records every 5 ms with calls of 50 ms waited 51 ms to
        resume rather than 2 (``bench/RESULTS.md``)."""
        return (
            not self.has_free_slot()
            or now - self._parked_at >= _STARTS_FIRST_QUIET_S
            or now - when >= _STARTS_FIRST_AT_MOST_S
            or now - self._full_at >= _STARTS_FIRST_FULL_S
        )

    def _respect_in_flight_limit(self) -> None:
        """Block (backpressure) while too many durable calls are running. A condition the
        calls' done-callbacks notify, rather than ``wait`` on the futures: that costs a lock
        per future in flight, every time (hundreds at a large ``max-in-flight``)."""
        if self.has_free_slot():
            return
        self._full_at = time.monotonic()
        with self._call_ended:
            while not self.has_free_slot():
                self._call_ended.wait()
