"""The life of a run, once for every runner: ``KeyDriver``.

A runner hands the driver three kinds of callbacks for one key at a time, with that key's
state and timers: a record arrived (``on_record``), a timer the driver asked for fired
(``on_timer``), the input ended (``on_end_of_input``). The driver owns everything between:
run sequence and start, stepping the engine, parking a run whose async action awaits a
durable call and resuming it, inputs queued behind a parked run, every error policy,
backpressure, runs restored from a checkpoint, the drain at the end of input, memory
snapshots and action-log pruning. Parked runs, their polls, the bounds on their calls and
the backpressure those make are one object it holds, ``ParkedRuns`` (``runtime/_parking.py``).
What it emits (outputs, and side outputs tagged with the channels the runner gave it) comes
back from each callback as an iterator.

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

import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from concurrent.futures import wait
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from flink_agents.api import ActionExecutionError, EventScheduled, MemoryType
from flink_agents.memory import CachedState, FlatMemory, StateMap, to_dict
from flink_agents.runtime._engine import Done, Outcome, Parked, RunEngine, RunState, StepResult
from flink_agents.runtime._erasure import forget_request_of
from flink_agents.runtime._parking import ParkedRun, ParkedRuns
from flink_agents.runtime._records import failed_run
from flink_agents.runtime._run_state import Suspension, Wake
from flink_agents.runtime._scheduling import (
    Schedules,
    WaitingRun,
    answer_waiting,
    due_event_of,
    due_input,
    is_tagged_input,
    next_due_ms,
    resume_waiting,
    signal_of,
    take_all_due,
    timer_times,
    wake_input,
    woken_sequence,
)

logger = logging.getLogger(__name__)

_PRUNE_EVERY = 64
"""Records between two asks whether the action log is due for pruning (it is at most every
quarter of its retention period, minutes by default; asking costs a clock read)."""


@dataclass
class KeyControl:
    """A key's control values, kept together in one state value."""

    sequence: int = 0
    """The number of the key's latest run."""
    run: RunState | None = None
    """The run in progress when it is parked or waits for a retry (None between runs)."""
    pending: int = 0
    """Inputs queued behind ``run``."""
    scheduled: tuple[EventScheduled, ...] = ()
    """The key's pending scheduled events (``ctx.schedule``), soonest first."""
    waiting: tuple[WaitingRun, ...] = ()
    """The key's runs set aside while an action sleeps (``ctx.sleep``), soonest first."""
    forgets: int = 0
    """``ForgetKey`` requests among the queued inputs: until their turn, the key's scheduled
    events and waiting runs do not fire (the erasure drops them: they are not queued
    behind it)."""
    active_ms: int | None = None
    """With ``short-term-memory-ttl``: when a callback of the key last ran a run."""
    cleanup_ms: int | None = None
    """With ``short-term-memory-ttl``: when the key's pending expiry check is due (its
    timer; at most one at a time)."""
    apart: bool = field(default=False, compare=False, repr=False)
    """Where the runner last kept this value, not a part of it: True, apart from the key's
    memory (on Flink: the ``control`` ValueState); False, nowhere yet or with the
    short-term memory's root (``KeyState.set_control``)."""

    @property
    def idle(self) -> bool:
        """Nothing of the key is in progress, queued, waiting or scheduled."""
        return self.run is None and not (self.pending or self.scheduled or self.waiting)


class _KeyCache:
    """What the driver keeps of one key between callbacks: the control value it last wrote
    and the key's two memory maps as write-back ``CachedState``s, which know what was read
    and written before. Flink's state is still written at the end of every callback (the
    maps are flushed, so they start the next callback clean); the cache only saves reading
    it back, and making the maps again. (A record of a key the cache leaves out runs with
    an entry of its own that the driver drops when the callback ends: ``_admit``.)"""

    __slots__ = ("control", "end_timer", "roots", "sensory", "short_term")

    def __init__(self) -> None:
        self.control: KeyControl | None = None
        self.sensory: CachedState | None = None
        self.short_term: CachedState | None = None
        self.roots: tuple[Any, Any] = (None, None)
        """The maps' memory roots, kept for the next callback: a ``CachedState`` holds its
        root only weakly (``CachedState.memory_root``), so that a key leaving the cache
        frees its maps at once."""
        self.end_timer = False
        """This driver registered the key's end-of-input timer (it fires once, at the end)."""


class _Sightings:
    """Keys seen lately that the per-key cache did not take: the last ``size`` to ``2 x
    size`` of them, in two generations of sets (the newer is started afresh, the older
    dropped, each time the newer holds ``size``), so that remembering a key costs a set's
    add and no key is remembered for long."""

    __slots__ = ("_newer", "_older", "_size")

    def __init__(self, size: int) -> None:
        self._size = max(1, size)
        self._newer: set[Any] = set()
        self._older: set[Any] = set()

    def seen_again(self, key: Any) -> bool:
        """Whether ``key`` is among the keys seen lately; remembers it if not."""
        if key in self._newer or key in self._older:
            return True
        newer = self._newer
        newer.add(key)
        if len(newer) >= self._size:
            self._older, self._newer = newer, set()
        return False

    def __len__(self) -> int:
        return len(self._newer) + len(self._older)


def _other_timers(control: KeyControl) -> set[int]:
    """The times of the key's timers that are not its parked run's polls: its scheduled
    events', its waiting runs' (not yet queued) and its expiry check's."""
    times = timer_times(control)
    if control.cleanup_ms is not None:
        times.add(control.cleanup_ms)
    return times


def _maps(state: KeyState) -> tuple[CachedState, CachedState]:
    """New write-back caches over the key's sensory and short-term memory maps."""
    put_all = getattr(state, "batch_puts", False)
    return (
        CachedState(state.sensory, put_all=put_all, kind=MemoryType.SENSORY),
        CachedState(state.short_term, put_all=put_all),
    )


def _make_maps(known: _KeyCache, state: KeyState) -> None:
    known.sensory, known.short_term = _maps(state)


def _short_term(known: _KeyCache | None, state: KeyState) -> CachedState:
    """The key's short-term map: its cache entry's (made if it has none), else a new one."""
    if known is None:
        return _maps(state)[1]
    if known.sensory is None:
        _make_maps(known, state)
    return known.short_term


def _flush(
    control: KeyControl, state: KeyState, sensory: CachedState, short_term: CachedState
) -> None:
    """Write what a callback changed to the key's state (``_drive``'s ``finally``). The
    control value first: the runner may keep it with the short-term memory's root, which
    that map's flush then writes."""
    sensory.flush()
    state.set_control(control, short_term)
    short_term.flush()


class KeyState(Protocol):
    """One key's state, as the runner keeps it (dicts locally, keyed state on Flink).
    ``batch_puts`` (optional, False if absent): the memory maps' ``put_all`` writes several
    entries at less cost than one ``put`` each."""

    sensory: StateMap
    short_term: StateMap

    def control(self, short_term: CachedState) -> KeyControl | None:
        """The key's control value (None: none), read from state; ``short_term``, the
        key's short-term memory over ``self.short_term``, where the runner may keep it."""
        ...

    def set_control(self, control: KeyControl, short_term: CachedState) -> None:
        """Keep ``control`` as the key's control value, in state or in ``short_term`` for
        the flush that follows (Flink: an idle key's run sequence with its root's marker)."""
        ...

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
        """Forget this key's wake-up at ``due_ms`` (if it has one)."""
        ...

    def cancel_end(self) -> None:
        """Forget this key's call at the end of input (``wake_at_end``), if it has one."""
        ...


class Emission(NamedTuple):
    """A record the driver emits on one of the runner's side channels (error records,
    memory snapshots) rather than as an output. The runner gave the driver its channels:
    PyFlink ``OutputTag``s on Flink, which route a ``(tag, value)`` tuple, as this is, to
    the tag's side output as it stands."""

    channel: Any
    value: Any


class KeyDriver:
    """Runs an agent's runs for any number of keys; see the module docstring.

    Args:
        engine: the run engine (plan, options, action journal).
        errors: the channel error records are emitted on, as ``Emission(errors, record)``.
        snapshots: the channel memory snapshots are emitted on (``memory-snapshots``).
    """

    def __init__(self, engine: RunEngine, *, errors: Any, snapshots: Any) -> None:
        self.engine = engine
        self.options = engine.options
        self.errors = errors
        self.snapshots = snapshots
        self.parked = ParkedRuns(self.options)
        """Runs waiting on durable work in this process (never checkpointed), their polls
        and the bounds on their calls."""
        self._until_prune = 1  # records until the next ``maybe_prune`` (the first asks)
        self._keys: OrderedDict[Any, _KeyCache] = OrderedDict()
        """Recently seen keys, at most ``state-cache-keys`` of them: in the order first
        seen until there are that many, then least recently seen first (a key seen again
        moves to the end only once the cache is full, when keys are evicted; a record's
        key enters a full cache only if seen lately: ``_admit``). An
        ``OrderedDict``: a plain dict's first entry, once many were deleted before it, is
        found by scanning their empty slots, which made each eviction cost microseconds
        when every key of many misses the cache (issue 45).
        Only this driver writes its keys' state (a new attempt or a restore builds a new
        driver), so what it last wrote or read is what the state holds; a runner that
        drops a key's state objects says so (``state_dropped``)."""
        self._keys_limit = self.options.state_cache_keys
        self._sightings = _Sightings(self._keys_limit // 4)
        """Keys seen lately that a full cache did not take (``_admit``)."""
        self.steps = 0
        """Actions completed (or replayed from the action log) by this driver."""
        self.metrics = engine.metrics
        self.metrics.watch(self.parked.__len__, self.parked.calls_in_flight)
        self.event_log = engine.event_log
        self.schedules = Schedules(engine.listens, self._scheduled_at_end, self.metrics)
        """The scheduled events of the key served now (``ctx.schedule``)."""
        engine.serve_schedules(self.schedules)
        self._sleeping_since: dict[tuple[Any, int], int] = {}
        """When the actions of the runs set aside in this process (by key and run sequence)
        began recording their durable calls: the action log keeps those calls while they
        sleep (``_oldest_call_ms``), so that they are not made again when they wake."""
        self._ttl_ms = self.options.short_term_memory_ttl_ms()
        """``short-term-memory-ttl`` (None: memory never expires)."""
        self.input_ended = False
        """Whether the input has ended (the first ``on_end_of_input``, or the local runner's
        ``finish``, whose timers go on firing): scheduled events then fire only at
        ``on_end_of_input``, as on Flink, whose processing-time timers stop with the input,
        and register no end-of-input timer (on Flink one registered while the end's timers
        fire would fire at once, again and again)."""
        self.tracer = engine.tracer
        self._plain_runs = not (
            engine.observed or self.options.memory_snapshots or engine.records_all
        )
        """Whether a new run may start through ``_run_plain``: neither the event log nor
        tracing (they time each action) nor memory snapshots (emitted per run) are on, nor
        does the action log record every action (``step`` makes the records)."""

    def state_dropped(self, key: Any) -> None:
        """The runner dropped ``key``'s state, nothing in it (a forgotten key, in the local
        runner, which keeps a state object a key): what this driver cached of the key
        went with it, its maps over the dropped object's. (On Flink, a key's state is read
        through the operator's handles, the same for every key: nothing to drop.)"""
        self._keys.pop(key, None)

    # -- callbacks -------------------------------------------------------------------------

    def on_record(self, key: Any, record: Any, state: KeyState, timers: Timers) -> Iterator[Any]:
        """A record of ``key`` arrived (an input, or a signal: ``signal_input``): start its
        run, or queue it behind the one in progress.
        (Not a generator itself: the common case hands back ``_drive``'s, one level less
        per record.)"""
        journal = self.engine.journal
        if journal is not None:
            self._until_prune -= 1
            if self._until_prune <= 0:
                self._until_prune = _PRUNE_EVERY
                pruned = journal.maybe_prune(self._oldest_call_ms)
                if pruned:
                    self.metrics.log_pruned(pruned)
        # ``_known`` and ``_control``, inlined for a key seen before (once per record).
        keys = self._keys
        known = keys.get(key)
        if known is None:
            known = self._admit(key)  # cached now, or for this callback only
        elif len(keys) >= self._keys_limit:
            keys.move_to_end(key)  # the most recent now (``_known``)
        control = known.control
        if control is None:
            control = self._control(key, state, known, timers)
        if control.run is None:
            if control.active_ms is not None:  # (``short-term-memory-ttl``)
                if self._ttl_ms is None:  # turned off since: the key is written as before
                    control.active_ms = control.cleanup_ms = None
                else:
                    self._expire_if_idle(key, control, state, timers.now_ms())
            self.parked.wait_for_free_slot()
            if self._plain_runs and (type(record) is not tuple or not is_tagged_input(record)):
                if known.sensory is None:
                    _make_maps(known, state)
                return self._run_plain(key, record, control, state, timers, known)
            return self._drive(key, control, state, timers, record=record, known=known)
        return self._queue(key, record, control, state, timers, known)

    def _run_plain(
        self,
        key: Any,
        record: Any,
        control: KeyControl,
        state: KeyState,
        timers: Timers,
        known: _KeyCache,
    ) -> Iterable[Any]:
        """A new run of the key whose maps ``known`` holds, for the common run whose
        actions are all plain
        (``RunEngine.begin``): what ``_drive`` does for it, without a generator. A run
        that needs more (an async action, a failure, a replay) goes on in ``_drive``, from
        where its plain actions stopped."""
        sensory, short_term = known.sensory, known.short_term
        engine = self.engine
        schedules = self.schedules  # the key served (an action may schedule)
        schedules.key, schedules.control, schedules.timers = key, control, timers
        control.sequence += 1
        try:
            outcome = engine.begin(key, control.sequence, record, sensory, short_term)
        except BaseException:
            _flush(control, state, sensory, short_term)
            raise
        run = outcome.run
        if run is not None and (type(outcome) is not Done or not run.finished):
            control.run = run  # ``_drive`` takes it from here (and writes the control value)
            return self._drive(key, control, state, timers, known=known, first=outcome)
        self.steps += outcome.steps
        if run is not None:
            engine.finish(run, sensory)
        if self._ttl_ms is not None:
            self._ran(control, timers)
        if known.roots[0] is None:  # a new entry: keep its roots (``_KeyCache.roots``)
            known.roots = (sensory.memory_root, short_term.memory_root)
        _flush(control, state, sensory, short_term)
        return outcome.outputs

    def _queue(
        self,
        key: Any,
        record: Any,
        control: KeyControl,
        state: KeyState,
        timers: Timers,
        known: _KeyCache,
    ) -> Iterator[Any]:
        """Queue ``record`` behind the key's run in progress (and resume that run if it can)."""
        parked = self.parked.get(key)
        state.push_pending(record)
        control.pending += 1
        if type(record) is tuple and forget_request_of(record) is not None:
            control.forgets += 1
        self.parked.input_queued()
        if parked is not None and parked.future.done():
            # The key's durable call is already done: resume its run now rather than at the
            # next poll; this record runs when it ends.
            self.parked.unpark(key)
            yield from self._drive(key, control, state, timers, resume=parked, known=known)
            return
        if parked is None:
            # A run in state without a coroutine here was restored from a checkpoint, or
            # waits for a retry. Its timers may not come back with it (PyFlink's process
            # mode restores none), so its key's next record resumes it.
            if timers.now_ms() >= control.run.retry_at_ms:
                yield from self._drive(key, control, state, timers, known=known)
                return
            self.parked.wake_at(key, control.run.retry_at_ms, timers)
            self._wake_at_end(key, timers)
        self._set_control(key, state, control)
        self.parked.slow_down_while_queues_grow()

    def on_timer(self, key: Any, state: KeyState, timers: Timers) -> Iterator[Any]:
        """A timer of ``key`` fired: start a run for each of its scheduled events now due
        (queued behind the key's run in progress, if it has one), resume its parked run if
        its call is done, retry its failed action if the backoff is over, or poll again
        later."""
        control = self._control(key, state)
        # A key that holds nothing (erased after this timer was set, as one restored from a
        # checkpoint may have been) is not given a shared poll's timer.
        self.parked.timer_fired(key, timers, arm=control.sequence != 0 or not control.idle)
        if control.cleanup_ms is not None and timers.now_ms() >= control.cleanup_ms:
            self._check_expiry(key, control, state, timers)
        if (control.scheduled or control.waiting) and not (self.input_ended or control.forgets):
            due = take_all_due(control, timers.now_ms())
            if due:
                return self._fire(key, due, control, state, timers)
        return self._wake(key, state, timers, draining=False)

    def _fire(
        self,
        key: Any,
        due: list[EventScheduled | WaitingRun],
        control: KeyControl,
        state: KeyState,
        timers: Timers,
        draining: bool = False,
    ) -> Iterator[Any]:
        """Start a run for each of ``due`` (taken from ``control``), in order: the first now
        if the key has no run in progress, the others queued as inputs are (a scheduled
        event starts a new run; a waiting run resumes)."""
        events = sum(type(entry) is EventScheduled for entry in due)
        if events:
            self.metrics.scheduled_events_fired(events)
        idle = control.run is None
        for entry in due[1:] if idle else due:
            state.push_pending(_queued(entry))
            control.pending += 1
        if idle:
            yield from self._drive(key, control, state, timers, draining, record=_queued(due[0]))
            return
        self._set_control(key, state, control)
        if not draining:
            yield from self._wake(key, state, timers, draining=False)

    def on_end_of_input(self, key: Any, state: KeyState, timers: Timers) -> Iterator[Any]:
        """The input ended: finish ``key``'s run and queued inputs, waiting for their calls
        (and retry backoffs) on this thread; then run its scheduled events, as if the time of
        the last one pending now had come (``_fire_at_end``)."""
        self.input_ended = True
        yield from self._wake(key, state, timers, draining=True)
        control = self._control(key, state)
        if control.scheduled or control.waiting:
            yield from self._fire_at_end(key, control, state, timers)

    def _fire_at_end(
        self, key: Any, control: KeyControl, state: KeyState, timers: Timers
    ) -> Iterator[Any]:
        """The end of input moves the key's clock to the due time of its last scheduled
        event or waiting run: every one due by then fires (or resumes), in order, and those
        its runs schedule or sleep until within that time too (a run scheduling after a
        delay counts from its event's due time); any due beyond it stays pending (and is
        logged). So a bounded input ends with the key's follow-ups run (on every runner
        alike), and an agent that schedules again from each scheduled run, or sleeps in a
        loop, does not run forever."""
        last = [control.scheduled[-1]] if control.scheduled else []
        timed = [entry for entry in control.waiting if entry.wake_ms is not None]
        if not timed and not last:
            self._log_left_at_end(key, control)
            return
        horizon = max(entry.due_ms for entry in (*timed, *last))
        schedules = self.schedules
        try:
            while (due_ms := next_due_ms(control)) is not None and due_ms <= horizon:
                due = take_all_due(control, due_ms)
                # A run of the event schedules from its due time, not from the end of input
                # (nor from the local runner's clock, which may have jumped past it).
                schedules.clock_ms = due_ms
                yield from self._fire(key, due, control, state, timers, draining=True)
                if control.run is not None or control.pending:  # (queued behind the first)
                    yield from self._wake(key, state, timers, draining=True)
        finally:
            schedules.clock_ms = None
        self._log_left_at_end(key, control)

    @staticmethod
    def _log_left_at_end(key: Any, control: KeyControl) -> None:
        """Log what of the key's scheduled events and waiting runs the end of input left."""
        if control.scheduled or control.waiting:
            logger.info(
                "key %r: %d scheduled event(s) and %d waiting run(s) are due after the end of "
                "the input, or wait for a signal without a timeout, and did not fire (the "
                "first due at %s ms)",
                key,
                len(control.scheduled),
                len(control.waiting),
                next_due_ms(control),
            )

    def on_call_done(self, key: Any, state: KeyState, timers: Timers) -> Iterator[Any]:
        """Resume ``key``'s parked run if its call is done (``ParkedRuns.call_done``), for a
        runner that resumes runs from other keys' callbacks (``ParkedRuns.resume_elsewhere``):
        what its poll would do, now; its pending polls are cancelled. The runner has made
        ``key`` current."""
        if not self.parked.call_done(key):
            return iter(())
        self.parked.cancel_timers(key, timers, keep=_other_timers(self._control(key, state)))
        return self._wake(key, state, timers, draining=False)

    # -- running ---------------------------------------------------------------------------

    def _wake(self, key: Any, state: KeyState, timers: Timers, draining: bool) -> Iterator[Any]:
        if draining:
            known = self._keys.get(key)
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
                self.parked.wake_at(key, control.run.retry_at_ms, timers)
            return
        future = parked.future
        if not future.done():
            if not draining:
                self.parked.poll_again(key, timers)
                return
            wait([future])
        self.parked.unpark(key)
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
        first: Outcome | None = None,
    ) -> Iterator[Any]:
        """Run the key's run in progress (``resume``: a parked run, live, with its done
        call; else the one in state, restored or due for a retry; else a new one for
        ``record``), then its queued inputs, until all end or one parks. The control value
        is written once, at the end. (``known``: the key's cache entry, when the caller has
        it already; ``first``: how far ``RunEngine.begin`` took the run, to handle first.)"""
        engine = self.engine
        metrics, event_log = self.metrics, self.event_log
        logging_events = event_log.enabled
        suspension = None
        schedules = self.schedules  # the key served (an action may schedule)
        schedules.key, schedules.control, schedules.timers = key, control, timers
        if known is False:
            known = self._known(key)
        if resume is not None:
            run, suspension = resume.run, resume.suspension
            # The parked action's context reads and writes through the caches it started with.
            sensory, short_term = resume.sensory, resume.short_term
        else:
            if known is None:
                sensory, short_term = _maps(state)
            else:
                if known.sensory is None:
                    _make_maps(known, state)
                sensory, short_term = known.sensory, known.short_term
            if control.run is not None:
                run = control.run
            else:
                run = self._start(key, control, record, state, timers, sensory, short_term)
        try:
            while run is not None:  # (None: a forget request with nothing queued behind it)
                set_aside = False
                while run.queue or run.ready:
                    started = time.perf_counter() if logging_events else 0.0
                    outcome, first = first, None
                    if outcome is None:
                        outcome = engine.advance(run, sensory, short_term, suspension, draining)
                    suspension = None
                    self.steps += outcome.steps
                    kind = type(outcome)
                    if kind is Done:
                        result = outcome.result
                        if result is not None:  # the reference path's step
                            metrics.action_completed(
                                result.action, len(result.events), result.replayed
                            )
                            if logging_events:
                                self._log_action(run, result, started)
                        yield from outcome.outputs
                        continue
                    yield from outcome.outputs  # of the actions before it stopped
                    if kind is Parked and type(outcome.suspension.future) is Wake:
                        self._set_aside(run, outcome.suspension, sensory, control, timers)
                        set_aside = True
                        break
                    if kind is Parked:
                        self.parked.park(run, outcome.suspension, sensory, short_term, timers)
                        self._wake_at_end(run.key, timers)
                        control.run = run
                        return
                    error = outcome.error
                    if logging_events:
                        self._log_failed_action(run, error, started)
                    if self.options.error_policy == "fail":
                        # The job fails and Flink restores its checkpoint; a runner that
                        # goes on (the local one) must not keep the run's sensory memory.
                        engine.end(run, sensory)
                        control.run = None
                        metrics.run_failed()
                        event_log.run_finished(run.key, run.sequence, "failed", error=error)
                        raise error
                    if self._retry(run, error, timers, draining):
                        metrics.action_retried()
                        if draining:
                            continue
                        control.run = run  # parked until its backoff is over
                        return
                    metrics.run_failed()
                    metrics.run_to_error_output()
                    event_log.run_finished(run.key, run.sequence, "error_output", error=error)
                    self._trace_run(run, "error_output", error.cause)
                    yield Emission(
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
                    engine.end(run, sensory)  # abandoned
                    break
                else:
                    if logging_events:
                        event_log.run_finished(run.key, run.sequence, "succeeded")
                    self._trace_run(run, "succeeded")
                    engine.finish(run, sensory)
                control.run = None
                if self.options.memory_snapshots and not set_aside:
                    yield Emission(
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
                self.parked.queued_input_started()
                run = self._start(
                    key, control, state.pop_pending(), state, timers, sensory, short_term
                )
        finally:  # Flink's state is complete whenever this callback returns
            # (nothing to do for a map the callback did not change)
            if self._ttl_ms is not None:
                self._ran(control, timers)
            if known is not None:  # (before the flush, which lets go of them)
                known.roots = (sensory.memory_root, short_term.memory_root)
            _flush(control, state, sensory, short_term)
            if known is not None:
                known.control = control
                # (A resumed run's maps: those it parked with, which may predate the entry.)
                known.sensory, known.short_term = sensory, short_term

    # -- the per-key cache ------------------------------------------------------------------

    def _admit(self, key: Any) -> _KeyCache:
        """The entry for a record of a key not in the cache: cached while the cache has
        room; once it is full, only if the key was seen lately (``_Sightings``: among the
        last ``state-cache-keys / 4`` to ``/ 2`` keys left out), evicting the least recent
        key; otherwise an entry for this callback only. So keys that each come back rarely
        (many more of them than the cache holds, in turn or at random) leave the cache as it
        is rather than each evicting a key that may come back sooner: least-recently-used
        alone keeps none of them when they come round in turn (issue 45). Admission is
        decided here only, once per record: the other lookups of a record's callback use
        the entry it returns, or ``self._keys`` as it is."""
        keys = self._keys
        limit = self._keys_limit
        if len(keys) < limit:
            known = keys[key] = _KeyCache()
        elif limit and self._sightings.seen_again(key):
            known = keys[key] = _KeyCache()
            keys.popitem(last=False)
        else:
            known = _KeyCache()
        return known

    def _known(self, key: Any) -> _KeyCache | None:
        """The key's cache entry, made (evicting the least recent key) if new; None when
        ``state-cache-keys`` is 0. (For callbacks other than a record's, which are few:
        their keys have timers, and are cached at once.)"""
        limit = self._keys_limit
        if not limit:
            return None
        keys = self._keys
        known = keys.get(key)
        if known is None:
            known = keys[key] = _KeyCache()
            if len(keys) > limit:
                keys.popitem(last=False)
        elif len(keys) >= limit:
            keys.move_to_end(key)
        return known

    def _control(
        self,
        key: Any,
        state: KeyState,
        known: _KeyCache | bool | None = False,
        timers: Timers | None = None,
    ) -> KeyControl:
        """The key's control value: the one this driver last wrote, else read from state.
        (``known``: the key's cache entry, when the caller has it already.)

        Read from state with ``timers`` (a record's callback), a key whose scheduled event
        is overdue gets a timer now, and its end-of-input timer again: after a restore in
        PyFlink's process mode, which restores keyed state but fires no timer of a Python
        operator, its events then fire once the key is seen again (or at the end of input).
        Elsewhere the overdue event's own timer is about to fire; the one added finds
        nothing due."""
        if known is False:
            known = self._known(key)
        if known is not None and known.control is not None:
            return known.control
        control = state.control(_short_term(known, state)) or KeyControl()
        if known is not None:
            known.control = control
        if control.cleanup_ms is not None and timers is not None:
            timers.wake_at(control.cleanup_ms)  # (process mode restores no timer)
        if (control.scheduled or control.waiting) and timers is not None and not self.input_ended:
            now_ms = timers.now_ms()
            due_ms = next_due_ms(control)
            if due_ms is not None and due_ms <= now_ms:
                timers.wake_at(now_ms)
            self._wake_at_end(key, timers)
        return control

    def _set_control(self, key: Any, state: KeyState, control: KeyControl) -> None:
        """Write ``control`` outside a run's flush (between a callback's runs, the key's
        maps have nothing else to write)."""
        known = self._keys.get(key)
        short_term = _short_term(known, state)
        state.set_control(control, short_term)
        short_term.flush()
        if known is not None:
            known.control = control

    def _start(
        self,
        key: Any,
        control: KeyControl,
        record: Any,
        state: KeyState,
        timers: Timers,
        sensory: CachedState,
        short_term: CachedState,
    ) -> RunState | None:
        """The run to go on with: a new one for an input record, a due scheduled event or a
        signal no run waits for; or a waiting run that woke (``wake_input``) or that a
        signal answers (``answer_waiting``), its sensory memory put back. A forget request
        erases the key (``_forget``) and the next queued input goes on (None: none is)."""
        woken = woken_sequence(record)
        if woken is not None:
            entry = resume_waiting(control, woken)
            if entry.signal is not None:
                self.metrics.wait_timed_out()
            return self._resume_waiting(key, entry, sensory)
        due = due_event_of(record)
        if due is None and type(record) is tuple:
            signal = signal_of(record)
            if signal is not None:
                entry = answer_waiting(control, signal)
                self.metrics.signal_received(answered=entry is not None)
                if entry is not None:
                    if self.event_log.enabled:
                        self.event_log.event(key, entry.run.sequence, None, signal, "signal")
                    return self._resume_waiting(key, entry, sensory)
                due = signal  # no run waits for it: a run of its own, as a due event
            else:
                request = forget_request_of(record)
                if request is not None:
                    self._forget(key, request, control, state, timers, sensory, short_term)
                    if not control.pending:
                        return None
                    control.pending -= 1
                    self.parked.queued_input_started()
                    next_record = state.pop_pending()
                    return self._start(
                        key, control, next_record, state, timers, sensory, short_term
                    )
        control.sequence += 1
        if self.tracer is not None:
            self.tracer.run_started(key, control.sequence)
        if due is not None:  # a scheduled event, due
            if self.event_log.enabled:
                self.event_log.run_started(key, control.sequence, due)
            return self.engine.start_due(key, control.sequence, due)
        if self.event_log.enabled:
            self.event_log.run_started(key, control.sequence, record)
        return self.engine.start(key, control.sequence, record)

    def _forget(
        self,
        key: Any,
        request: dict[str, Any],
        control: KeyControl,
        state: KeyState,
        timers: Timers,
        sensory: CachedState,
        short_term: CachedState,
    ) -> None:
        """Erase ``key`` (its ``ForgetKey``'s turn came: no run of it is in progress, the
        inputs queued behind the request stay): its memory, scheduled events and waiting
        runs, its timers (its runs' polls' too: each timer holds the key), then what it left
        outside Flink state (``RunEngine.forget``); the event log confirms it without naming
        the key. Its control value starts afresh (run sequence 0, removed from state with
        nothing queued: ``KeyState.set_control``)."""
        due = self.parked.forget_key(key)  # (a set: Flink keeps one timer per key and time)
        due.update(entry.due_ms for entry in control.scheduled)
        for entry in control.waiting:
            self._sleeping_since.pop((key, entry.run.sequence), None)
            if entry.wake_ms is not None and not entry.queued:
                due.add(entry.wake_ms)
        if control.cleanup_ms is not None:
            due.add(control.cleanup_ms)
        for due_ms in due:
            timers.cancel(due_ms)
        removed = {
            "scheduled_events": len(control.scheduled),
            "waiting_runs": len(control.waiting),
        }
        sensory.clear()
        short_term.clear()
        control.sequence = 0
        control.scheduled = control.waiting = ()
        control.forgets = max(0, control.forgets - 1)
        control.active_ms = control.cleanup_ms = None
        if not control.pending:
            timers.cancel_end()
        # What this driver kept of the key goes too (the caller's entry, if it holds one,
        # is no longer the key's: the next callback reads the key's state afresh).
        self._keys.pop(key, None)
        removed.update(self.engine.forget(key))
        self.metrics.key_forgotten()
        self.event_log.key_forgotten(key, request.get("request_id"), removed)
        logger.info(
            "forgot a key on request %r: removed %s",
            request.get("request_id"),
            ", ".join(f"{count} {what}" for what, count in removed.items()),
        )

    # -- short-term-memory-ttl -----------------------------------------------------------------

    def _ran(self, control: KeyControl, timers: Timers) -> None:
        """A callback ran runs of the key: it was active now. Once it is idle, its expiry
        check is due when the TTL has passed (one timer at a time: an earlier one finds the
        key active since, and sets the next). A forgotten key is left alone: it keeps no
        state."""
        if control.sequence == 0:
            return
        now_ms = control.active_ms = timers.now_ms()
        if control.cleanup_ms is None and control.idle:
            control.cleanup_ms = now_ms + self._ttl_ms
            timers.wake_at(control.cleanup_ms)

    def _check_expiry(self, key: Any, control: KeyControl, state: KeyState, timers: Timers) -> None:
        """The key's expiry check is due (its timer fired, ``_ran``): expire its memory if it
        has been idle for the TTL, else check again when it will have been (a key not idle
        now gets its check when its runs end)."""
        control.cleanup_ms = None
        if self._ttl_ms is None:  # the option was turned off since the check was set
            control.active_ms = None
            self._set_control(key, state, control)
            return
        now_ms = timers.now_ms()
        active = control.idle and control.active_ms is not None
        if active and not self._expire_if_idle(key, control, state, now_ms):
            control.cleanup_ms = control.active_ms + self._ttl_ms
            timers.wake_at(control.cleanup_ms)
        self._set_control(key, state, control)

    def _expire_if_idle(self, key: Any, control: KeyControl, state: KeyState, now_ms: int) -> bool:
        """Clear the key's short-term memory, whole, if the key has been idle for the TTL
        (``short-term-memory-ttl``): between callbacks nothing changes, so a key idle now
        was idle since its last active callback. Whether it expired."""
        if not control.idle or now_ms - control.active_ms < self._ttl_ms:
            return False
        state.short_term.clear()
        known = self._keys.get(key)
        if known is not None:  # what the caches learned of the maps is stale
            known.sensory = known.short_term = None
        idle_since_ms, control.active_ms = control.active_ms, None
        self.metrics.short_term_memory_expired()
        self.event_log.memory_expired(key, control.sequence, idle_since_ms)
        return True

    def _resume_waiting(self, key: Any, entry: WaitingRun, sensory: StateMap) -> RunState:
        """The run set aside as ``entry`` (taken from the key's waiting runs), its sensory
        memory put back."""
        self._sleeping_since.pop((key, entry.run.sequence), None)
        for flat_key, stored in entry.sensory:
            sensory.put(flat_key, stored)
        self.metrics.run_woken()
        return entry.run

    # -- the event log and traces ---------------------------------------------------------------

    def _trace_run(self, run: RunState, outcome: str, error: BaseException | None = None) -> None:
        """Export ``run``'s root span (with tracing on): it ended with ``outcome``."""
        if self.tracer is not None:
            self.tracer.run_finished(run.key, run.sequence, outcome, run.input, error)

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
            self.parked.wake_at(run.key, run.retry_at_ms, timers)
            self._wake_at_end(run.key, timers)
            return True
        return False

    def _set_aside(
        self,
        run: RunState,
        suspension: Suspension,
        sensory: CachedState,
        control: KeyControl,
        timers: Timers,
    ) -> None:
        """Set ``run`` aside until its action's sleep ends: its action stops (it runs again
        from its start when the run wakes, its sleeps then ending at once: ``RunState.wakes``)
        and the run, with its sensory memory, moves to the key's waiting runs, so the key
        is free for its next input."""
        suspension.coroutine.close()
        wake_ms, signal = suspension.future.wake_ms, suspension.future.signal
        if suspension.oldest_call_ms is not None:
            self._sleeping_since[run.key, run.sequence] = suspension.oldest_call_ms
        entries: tuple[tuple[str, Any], ...] = ()
        if run.sensory_written:  # (a suffix is "" for the root, ".a.b" below it)
            subtree = FlatMemory(sensory).iter_subtree("")
            entries = tuple((suffix[1:], stored) for suffix, stored in subtree)
            sensory.clear()
        run.parked = True
        if self.event_log.enabled:
            self.event_log.action_finished(
                run.key,
                run.sequence,
                run.steps + 1,
                suspension.action,
                "sleeping" if signal is None else "waiting",
                until_ms=wake_ms,
                signal=None if signal is None else signal.__name__,
            )
        entry = WaitingRun(wake_ms, run, entries, signal=signal)
        control.waiting = tuple(sorted((*control.waiting, entry), key=_due_ms))
        if wake_ms is not None:
            timers.wake_at(wake_ms)
        self._scheduled_at_end(run.key, timers)
        self.metrics.run_set_aside(waits=signal is not None)

    def _oldest_call_ms(self) -> int | None:
        """When the oldest action whose recorded calls must outlive pruning began: a parked
        one's, or a sleeping one's (of a run set aside in this process: after a restore,
        the calls of a run that sleeps longer than the log's retention may be pruned, and
        made again when it wakes; ``docs/waiting.md``)."""
        oldest = self.parked.oldest_call_ms()
        if self._sleeping_since:
            sleeping = min(self._sleeping_since.values())
            oldest = sleeping if oldest is None else min(oldest, sleeping)
        return oldest

    def _scheduled_at_end(self, key: Any, timers: Timers) -> None:
        """A key scheduled an event: have ``on_end_of_input`` called for it, unless the input
        has ended (then its ``on_end_of_input`` is under way: ``_fire_at_end``)."""
        if not self.input_ended:
            self._wake_at_end(key, timers)

    def _wake_at_end(self, key: Any, timers: Timers) -> None:
        """Have ``on_end_of_input`` called for ``key`` at the end of input (once per key:
        each registration is a call into the JVM on Flink; a key not cached registers
        again, which Flink takes as the same timer)."""
        known = self._keys.get(key)
        if known is None or not known.end_timer:
            timers.wake_at_end()
            if known is not None:
                known.end_timer = True


def _due_ms(entry: EventScheduled | WaitingRun) -> int:
    return entry.due_ms


def _queued(entry: EventScheduled | WaitingRun) -> tuple[str, int, dict[str, Any]]:
    """A due scheduled event or waiting run as it waits in the key's queue of inputs."""
    return due_input(entry) if type(entry) is EventScheduled else wake_input(entry)
