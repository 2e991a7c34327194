"""The local runner: the ``KeyDriver`` in-process, over dicts and a simulated clock.

It is a Flink runner without a JVM: the same driver runs the same runs with the same
options and error policies, its state is what Flink would keep per key, and async actions
of different keys overlap on the bounded executor while the runs of one key stay in order.
Timers live in a heap; the clock is the wall clock plus an offset that jumps forward when
the runner would only wait for a timer (a retry's backoff costs no time here).

What the runs emit is reported in input order (``InputOrder``): the emissions of each
input's run in the order it made them, runs in the order of their inputs, however their
async calls, long-term writes and retries made them overlap. So a test can assert a whole
list, and the same input gives the same list every time.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any

from flink_agents._ids import new_job_name
from flink_agents.api import (
    AgentBuilder,
    AgentsExecutionEnvironment,
    Event,
    FlinkAgentsError,
    ForgetKey,
)
from flink_agents.api.internal import KeySelector
from flink_agents.memory import CachedState, DictState, FlatMemory, to_dict
from flink_agents.plan import AgentPlan, bind_plan, to_plan
from flink_agents.runtime._driver import Emission, KeyControl, KeyDriver
from flink_agents.runtime._engine import RunEngine
from flink_agents.runtime._erasure import forget_input, keyed_input
from flink_agents.runtime._event_log import configured_event_log
from flink_agents.runtime._input_order import InputOrder
from flink_agents.runtime._keys import key_function
from flink_agents.runtime._metrics import AgentMetrics
from flink_agents.runtime._options import AgentOptions, load_options
from flink_agents.runtime._records import (
    BadRecord,
    rejected,
    signal_event,
    signal_type,
)
from flink_agents.runtime._scheduling import NEVER_MS, is_queued_due, signal_input
from flink_agents.runtime.action_log import open_action_log
from flink_agents.runtime.journal import ActionJournal


class _Channel:
    """A side channel of the local runner's driver, as an ``OutputTag`` is on Flink: the
    driver emits ``(channel, record)`` on it. An object of its own, so that no output of an
    agent (a pair starting with the string "errors", say) is ever taken for one."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<channel {self.name}>"


ERRORS = _Channel("errors")
SNAPSHOTS = _Channel("memory-snapshots")


@dataclass
class LocalKeyState:
    """What Flink keeps per key, in dicts: the ``KeyState`` of the local runner."""

    sensory: DictState = field(default_factory=DictState)
    short_term: DictState = field(default_factory=DictState)
    stored_control: KeyControl | None = None
    pending: deque[Any] = field(default_factory=deque)
    origins: deque[int] = field(default_factory=deque)
    """The input positions (``InputOrder``) of the key's run in progress, first, then of its
    queued inputs: where what they emit is reported. The local runner's own bookkeeping,
    kept with the queue so that a snapshot restores both."""
    ended: list[int] = field(default_factory=list)
    """Positions whose run ended during the callback at hand, a queued input's run starting
    after it (``pop_pending``); the runner closes them when the callback returns."""
    admit: Callable[[], int] | None = field(default=None, repr=False, compare=False)
    """The runner's ``InputOrder.admit``: a due scheduled event the driver queues behind the
    key's run takes its place in the input when it comes due (not kept in a snapshot)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> LocalKeyState:
        return LocalKeyState(
            **{
                f.name: copy.deepcopy(getattr(self, f.name), memo)
                for f in fields(self)
                if f.name != "admit"
            }
        )

    @property
    def in_progress(self) -> bool:
        """Whether the key has a run in progress (parked, or waiting for a retry)."""
        return self.stored_control is not None and self.stored_control.run is not None

    def control(self, short_term: CachedState) -> KeyControl | None:
        # A copy, as Flink state hands out: the driver must write back what it changes.
        # (Kept apart from the memory here, whatever the key: ``short_term`` is not used.)
        return _copied(self.stored_control)

    def set_control(self, control: KeyControl, short_term: CachedState) -> None:
        # A key forgotten (``ForgetKey``) with nothing queued keeps no control value, as on
        # Flink (``_FlinkKeyState.set_control``).
        self.stored_control = (
            None if control.sequence == 0 and control == _FORGOTTEN else _copied(control)
        )

    @property
    def empty(self) -> bool:
        """Whether the key holds nothing (never ran, or was forgotten)."""
        return (
            self.stored_control is None
            and not self.pending
            and not self.origins
            and not self.sensory
            and not self.short_term
        )

    def push_pending(self, record: Any) -> None:
        if self.admit is not None and is_queued_due(record):
            self.origins.append(self.admit())  # (an input's was given when it was fed)
        self.pending.append(record)

    def pop_pending(self) -> Any:
        # The driver starts the oldest queued input's run, so the run before it has ended:
        # what the key emits from here on belongs to the next position.
        if self.origins:
            self.ended.append(self.origins.popleft())
        return self.pending.popleft()


_FORGOTTEN = KeyControl()


def _copied(control: KeyControl | None) -> KeyControl | None:
    """A shallow copy of ``control``, made by its constructor (``copy.copy`` goes through
    ``__reduce_ex__``: see ``bench/RESULTS.md``)."""
    if control is None:
        return None
    return KeyControl(
        control.sequence,
        control.run,
        control.pending,
        control.scheduled,
        control.waiting,
        control.forgets,
        control.active_ms,
        control.cleanup_ms,
    )


@dataclass
class LocalSnapshot:
    """The local runner's state at one point: see ``LocalRunner.snapshot``."""

    states: dict[Any, LocalKeyState]

    @property
    def sequence(self) -> dict[Any, int]:
        return {k: s.stored_control.sequence for k, s in self.states.items() if s.stored_control}

    @property
    def sensory(self) -> dict[Any, DictState]:
        return {k: s.sensory for k, s in self.states.items()}

    @property
    def short_term(self) -> dict[Any, DictState]:
        return {k: s.short_term for k, s in self.states.items()}


class _LocalTimers:
    """``Timers`` of one key on the runner's heap and clock."""

    __slots__ = ("key", "runner")

    def __init__(self, runner: LocalRunner, key: Any) -> None:
        self.runner = runner
        self.key = key

    def now_ms(self) -> int:
        return self.runner.now_ms()

    def wake_at(self, due_ms: int) -> None:
        heapq.heappush(self.runner._timers, (due_ms, next(self.runner._tie), self.key))

    def wake_at_end(self) -> None:
        self.runner._at_end.add(self.key)

    def cancel(self, due_ms: int) -> None:
        timers = self.runner._timers
        kept = [t for t in timers if not (t[0] == due_ms and t[2] == self.key)]
        if len(kept) < len(timers):
            timers[:] = kept
            heapq.heapify(timers)

    def cancel_end(self) -> None:
        self.runner._at_end.discard(self.key)


class LocalRunner:
    """Runs an agent in this process; runs of a key are sequential, keys overlap.

    ``run(key, record)`` runs one record to its end (with every run it queued, and the runs
    of the records fed before it); ``feed`` hands a record over without waiting for async
    actions, and ``finish`` ends the input. Each returns the outputs released meanwhile, in
    input order: the outputs of each record's run in the order it emitted them, runs in the
    order their records were fed (a retry, or a run resumed after its call, keeps its
    record's place), however the runs of different keys overlapped. A run still waiting
    holds back the outputs of later records' runs until it ends, so the outputs of all the
    calls together, like ``keyed_outputs``, are the same list however long the calls took.
    Failed runs given up under the error policy and rejected input are in ``errors``, memory
    snapshots in ``memory_snapshots``, in the same order. (The event log, a record of what
    happened when, is written as it happens.)

    Raises (from ``run``, ``feed`` and ``finish``):
        ActionExecutionError: an action raised under the ``fail`` policy; the run is
            abandoned, the memory writes of the actions that completed before it stay.
    """

    def __init__(
        self,
        agent: Any,
        *,
        max_steps: int | None = None,
        journal: ActionJournal | None = None,
        options: AgentOptions | None = None,
    ) -> None:
        self.plan: AgentPlan = to_plan(agent)
        options = options or AgentOptions()
        if max_steps is not None:
            options = options.model_copy(update={"max_steps_per_run": max_steps})
        self.options = options
        self.engine = RunEngine(
            bind_plan(self.plan),
            options,
            journal=journal,
            event_log=configured_event_log(
                options, "local", journal.job if journal is not None else "local"
            ),
        )
        self.driver = KeyDriver(self.engine, errors=ERRORS, snapshots=SNAPSHOTS)
        self._states: dict[Any, LocalKeyState] = {}
        self._timers: list[tuple[int, int, Any]] = []
        self._tie = itertools.count()
        self._at_end: set[Any] = set()
        self._clock_offset_ms = 0
        self._ready: deque[Any] = deque()  # keys whose durable call finished
        self._watched: set[int] = set()
        self._order = InputOrder()
        self._unreturned: list[Any] = []
        """Outputs released and not yet returned by ``run``, ``feed`` or ``finish``."""
        self.keyed_outputs: list[tuple[Any, Any]] = []
        self.outputs_per_key: Counter[Any] = Counter()
        self.errors: list[dict[str, Any]] = []
        self.memory_snapshots: list[dict[str, Any]] = []

    # -- input -----------------------------------------------------------------------------

    def run(self, key: Any, record: Any) -> list[Any]:
        """One record of ``key``, run to its end; returns the outputs released meanwhile:
        this record's (those of a run given up under the error policy included, as on
        Flink), after those of the records fed before it, whose runs it waits for too. (A
        run restored from a snapshot waits for its key's next record or ``finish``: until
        then it holds back what later records' runs emit.)"""
        try:
            position = self._feed(key, record)
            self._settle(lambda: self._order.released(position))
        finally:
            self._release()
        return self._returned()

    def signal(self, key: Any, event: Event) -> list[Any]:
        """A signal for ``key`` (what ``with_signals`` delivers on Flink), run to its end as
        ``run`` runs a record: the key's run waiting for its type (``ctx.wait_for``) takes
        it as its answer, or, with none, it starts a run of the actions that listen to it.
        Returns the outputs released meanwhile."""
        if not isinstance(event, Event):
            raise FlinkAgentsError(f"a signal is an Event, got {type(event).__name__}")
        return self.run(key, signal_input(event))

    def forget(self, key: Any, request_id: str | None = None) -> list[Any]:
        """Erase ``key`` (what a ``ForgetKey`` record does on Flink) once its run in
        progress and the inputs fed before have ended; returns the outputs released
        meanwhile."""
        return self.run(key, forget_input(ForgetKey(key, request_id=request_id)))

    def feed(self, key: Any, record: Any) -> list[Any]:
        """Hand one record of ``key`` to the driver without waiting for async actions;
        returns the outputs released meanwhile (of this and of earlier records' runs)."""
        try:
            self._feed(key, record)
            self._wake_ready()
        finally:
            self._release()
        return self._returned()

    def reject(self, error: dict[str, Any]) -> None:
        """An input that never reaches the agent (its key could not be taken): its
        ``rejected`` error record, at its place in the input, whatever the error policy."""
        position = self._order.admit()
        self._order.add(position, (None, Emission(ERRORS, error)))
        self._order.close(position)
        self.metrics.input_rejected()
        self._release()

    def finish(self) -> list[Any]:
        """End the input: run every parked run, retry and queued input to its end; returns
        the outputs released meanwhile (all that were held back)."""
        driver = self.driver
        # As on Flink, whose processing-time timers stop with the input, scheduled events
        # fire at ``on_end_of_input`` from here on, not as the clock jumps to them.
        driver.input_ended = True
        try:
            self._settle(lambda: False)
            # Runs no timer finished (restored ones), and keys with scheduled events.
            for key in sorted(self._at_end, key=repr):
                self._call(key, driver.on_end_of_input(key, *self._of(key)))
            self._at_end.clear()
        finally:
            driver.input_ended = False
            self._release(self._order.flush())
        return self._returned()

    def close(self) -> None:
        """Close the runner: durable calls in flight end and are recorded, resources close,
        the action log writes what it queued and traces export what they queued."""
        self.engine.close()

    def advance_time(self, delta: timedelta) -> list[Any]:
        """Move the simulated clock ``delta`` forward, as if that much time passed without
        input: it stops at each timer due by then, which fires (a scheduled event starts its
        run), and the runs it started end before it goes on. Returns the outputs released
        meanwhile. So a test of a three-day follow-up runs at once:
        ``runner.advance_time(timedelta(days=3))``."""
        target_ms = self.now_ms() + delta // timedelta(milliseconds=1)
        try:
            while self._timers and self._timers[0][0] <= target_ms:
                self._jump_to(self._timers[0][0])
                self._settle(lambda: not self.driver.parked)
            self._jump_to(target_ms)
        finally:
            self._release()
        return self._returned()

    def _feed(self, key: Any, record: Any) -> int:
        """Hand ``record`` to the driver; its position in the input."""
        position = self._order.admit()
        state = self._state(key)
        if state.in_progress:
            state.origins.append(position)  # queued behind the run in progress
        else:
            # Starts now (ahead of inputs an action failing under ``fail`` left queued).
            state.origins.appendleft(position)
        self._call(key, self.driver.on_record(key, record, *self._of(key)))
        return position

    def _settle(self, done: Callable[[], bool]) -> None:
        """Resume parked runs as their calls finish and fire timers (the clock jumping over
        a retry's backoff) until ``done()``, or until no run waits for either."""
        while True:
            self._wake_ready()
            self._release()
            if done():
                return
            parked = self.driver.parked
            if parked:
                wait(parked.futures(), return_when=FIRST_COMPLETED)
                for key in parked.keys_done():
                    self._call(key, self.driver.on_timer(key, *self._of(key)))
                continue
            if not self._timers:
                return
            self._jump_to(self._timers[0][0])

    # -- state -----------------------------------------------------------------------------

    def snapshot(self) -> LocalSnapshot:
        """A copy of what Flink would checkpoint: per key, memory, sequence, the run in
        progress and queued inputs."""
        return LocalSnapshot(copy.deepcopy(self._states))

    def restore(self, snapshot: LocalSnapshot) -> None:
        """Go back to ``snapshot``, as Flink restores state after a failure: runs that were
        parked in this process are forgotten (the action log, outside the state, keeps
        what happened since), and what they emitted is released. The restored runs and
        queued inputs take the next places in the input, in their old order."""
        self._states = copy.deepcopy(snapshot.states)
        self.driver = KeyDriver(self.engine, errors=ERRORS, snapshots=SNAPSHOTS)
        self._timers.clear()
        self._ready.clear()
        self._release(self._order.flush())
        old = sorted({p for state in self._states.values() for p in state.origins})
        new = {position: self._order.admit() for position in old}
        for key, state in self._states.items():
            state.origins = deque(new[p] for p in state.origins)
            state.admit = self._order.admit
            control = state.stored_control
            expected = (control.run is not None) + control.pending if control else 0
            while len(state.origins) < expected:  # a state made by hand
                state.origins.append(self._order.admit())
            # Flink restores timers with state (in thread mode): the scheduled events' and
            # the sleeping runs' too.
            if control is not None and (control.scheduled or control.waiting):
                timers = _LocalTimers(self, key)
                for entry in (*control.scheduled, *control.waiting):
                    if entry.due_ms != NEVER_MS:  # (a wait without a timeout has no timer)
                        timers.wake_at(entry.due_ms)
                timers.wake_at_end()
            if control is not None and control.cleanup_ms is not None:  # (memory's expiry)
                _LocalTimers(self, key).wake_at(control.cleanup_ms)

    @property
    def metrics(self) -> AgentMetrics:
        """The run lifecycle's metrics and the actions' custom ones, in memory."""
        return self.engine.metrics

    @property
    def steps(self) -> int:
        """Actions completed since the runner started (or was restored)."""
        return self.driver.steps

    @property
    def keys(self) -> list[Any]:
        return list(self._states)

    def runs(self, key: Any) -> int:
        state = self._states.get(key)
        return state.stored_control.sequence if state and state.stored_control else 0

    def short_term_memory(self, key: Any) -> dict[str, Any]:
        """A nested-dict snapshot of ``key``'s short-term memory."""
        state = self._states.get(key)
        return {} if state is None else to_dict(FlatMemory(state.short_term).root())

    def sensory_memory(self, key: Any) -> dict[str, Any]:
        """A snapshot of ``key``'s sensory memory (empty between runs)."""
        state = self._states.get(key)
        return {} if state is None else to_dict(FlatMemory(state.sensory).root())

    # -- the clock and the driver's callbacks ----------------------------------------------

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self._clock_offset_ms

    def _jump_to(self, due_ms: int) -> None:
        """Move the clock to ``due_ms`` (never back) and fire the timers due by then."""
        self._clock_offset_ms += max(0, due_ms - self.now_ms())
        self._fire_due()

    def _fire_due(self) -> None:
        now = self.now_ms()
        while self._timers and self._timers[0][0] <= now:
            _, _, key = heapq.heappop(self._timers)
            state = self._state(key)
            if not state.in_progress:
                # A scheduled event may start a run now: its place in the input (closed
                # empty if it does not), as ``_feed`` gives a record's.
                state.origins.appendleft(self._order.admit())
            self._call(key, self.driver.on_timer(key, *self._of(key)))

    def _wake_ready(self) -> None:
        """Resume the runs whose durable call finished, and fire due timers."""
        self._fire_due()
        while self._ready:
            key = self._ready.popleft()
            if self.driver.parked.call_done(key):
                self._call(key, self.driver.on_timer(key, *self._of(key)))

    def _state(self, key: Any) -> LocalKeyState:
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = LocalKeyState(admit=self._order.admit)
        return state

    def _of(self, key: Any) -> tuple[LocalKeyState, _LocalTimers]:
        return self._state(key), _LocalTimers(self, key)

    def _call(self, key: Any, emitted: Iterator[Any]) -> None:
        """Consume one callback's emissions, each held at the position of the run that made
        it (``LocalKeyState.origins``); close the positions whose runs ended."""
        state = self._state(key)
        origins, order = state.origins, self._order
        try:
            for item in emitted:
                if not origins:  # a run no input of this runner started (a state made by hand)
                    origins.append(order.admit())
                order.add(origins[0], (key, item))
        finally:
            for position in state.ended:
                order.close(position)
            state.ended.clear()
            if origins and not state.in_progress:
                order.close(origins.popleft())
            if state.stored_control is None and state.empty:
                del self._states[key]  # forgotten (``ForgetKey``): nothing of it is kept
                self.driver.state_dropped(key)
            else:
                self._watch(key)

    def _release(self, items: list[Any] | None = None) -> None:
        """Report what the order releases (or ``items``, released already): outputs to
        ``keyed_outputs`` and the outputs to return, errors and snapshots to their lists."""
        for key, item in self._order.release() if items is None else items:
            if type(item) is Emission:
                if item.channel is ERRORS:
                    self.errors.append(item.value)
                else:
                    self.memory_snapshots.append(item.value)
            else:
                self.keyed_outputs.append((key, item))
                self.outputs_per_key[key] += 1
                self._unreturned.append(item)

    def _returned(self) -> list[Any]:
        """The outputs released since the last call returned them."""
        outputs, self._unreturned = self._unreturned, []
        return outputs

    def _watch(self, key: Any) -> None:
        """Have ``key``'s durable call, if it parked on one, mark the key ready when done."""
        parked = self.driver.parked.get(key)
        if parked is None or id(parked.future) in self._watched:
            return
        future = parked.future
        self._watched.add(id(future))

        def ready(_: Any) -> None:
            self._watched.discard(id(future))
            self._ready.append(key)

        future.add_done_callback(ready)


class LocalAgentBuilder(AgentBuilder):
    """``from_list(...).apply(agent)`` on the local runner."""

    def __init__(
        self,
        records: Iterable[Any],
        key_selector: KeySelector,
        options: AgentOptions,
        keyed_signals: list[tuple[Any, Event]] | None = None,
        *,
        keyed: bool = False,
    ) -> None:
        self._records = records
        self._options = options
        self._keyed = keyed
        """Whether records come as ``(key, record)`` pairs (``from_keyed_list``)."""
        self._key_of = key_function(key_selector)
        self._signals: list[tuple[Iterable[Any], Callable[[Any], Any], type | None]] = []
        self._keyed_signals = keyed_signals if keyed_signals is not None else []
        """The environment's ``signal(key, event)``s (its list: those given before this
        input runs count)."""
        self.runner: LocalRunner | None = None
        self._ran = False
        self._failed = False

    def apply(self, agent: Any) -> LocalAgentBuilder:
        if self.runner is not None:
            raise FlinkAgentsError("an agent is already applied to this input")
        self.runner = LocalRunner(
            agent, journal=local_journal(self._options), options=self._options
        )
        return self

    def with_signals(
        self,
        signals: Iterable[Any],
        key_selector: KeySelector = None,
        event_type: type | None = None,
    ) -> LocalAgentBuilder:
        """Signals for the agent's keys (see ``AgentBuilder.with_signals``), fed after the
        input's records, in order, before the input ends (so a wait still unanswered then
        times out at the end of input, as on Flink)."""
        if self._ran:
            raise FlinkAgentsError("this input already ran: add signals before its outputs")
        self._signals.append((signals, key_function(key_selector), signal_type(event_type)))
        return self

    def to_keyed_list(self) -> list[tuple[Any, Any]]:
        """Run every record and return ``(key, output)`` pairs in input order: the outputs
        of each record's run in the order it emitted them, runs in the order of their
        records. Runs of different keys still overlap (one waiting on an async call or a
        long-term write does not hold up the others); only the report waits for the
        earlier records' runs, so the list is the same from run to run."""
        runner = self._run()
        return list(runner.keyed_outputs)

    def to_list(self) -> list[Any]:
        return [output for _, output in self.to_keyed_list()]

    def error_stream(self) -> list[dict[str, Any]]:
        """Input that never reached the agent (``rejected``: its key could not be taken) and
        runs given up under the ``error-output`` or ``retry`` policy (``failed_run``), as
        the Flink runner's ``error_stream()`` emits them, in input order (as ``to_list``:
        a run given up after retries keeps its record's place). Runs the input if it has
        not run yet."""
        return list(self._run().errors)

    def memory_stream(self) -> list[dict[str, Any]]:
        """With the ``memory_snapshots`` option: after every run, a dict with ``key``,
        ``run_sequence`` and ``short_term_memory`` (a nested-dict snapshot), in input order
        (as ``to_list``)."""
        if not self._options.memory_snapshots:
            raise FlinkAgentsError("memory snapshots are off: pass memory_snapshots=True")
        return list(self._run().memory_snapshots)

    def _run(self) -> LocalRunner:
        runner = self.runner
        if runner is None:
            raise FlinkAgentsError("apply(agent) before asking for outputs")
        if self._failed:
            raise FlinkAgentsError(
                "this input already ran and failed; build a new one with from_list(...)"
            )
        if self._ran:
            return runner
        try:
            for record in self._records:
                if self._keyed:
                    runner.feed(*record)
                    continue
                try:
                    key, value = keyed_input(self._key_of, record)
                except BadRecord as error:  # bad input, whatever the error policy
                    runner.reject(rejected(str(error), input=record))
                    continue
                runner.feed(key, value)
            for signals, key_of, event_type in self._signals:
                for record in signals:
                    try:
                        key, value = keyed_input(key_of, record)
                        if value is record:  # (not a ForgetKey)
                            value = signal_input(signal_event(record, event_type))
                    except BadRecord as error:
                        runner.reject(rejected(str(error), input=record))
                        continue
                    runner.feed(key, value)
            for key, event in self._keyed_signals:
                runner.feed(key, signal_input(event))
            runner.finish()
        except BaseException:
            self._failed = True
            raise
        finally:  # async calls end, compactions finish and the vector store is released
            runner.engine.close()
            from rich.console import Console  # (only here: a Flink operator never needs it)

            Console(stderr=True).print(runner.metrics.render(f"{runner.plan.name}: metrics"))
        self._ran = True
        return runner

    def metrics(self) -> dict[str, Any]:
        """Every metric's value by dotted name (``numOfActionsExecuted``,
        ``action.<name>.numOfActionsExecuted``, custom metrics, ...), after running the
        input if it has not run yet; the run prints them as a table on stderr too."""
        return self._run().metrics.snapshot()


class LocalExecutionEnvironment(AgentsExecutionEnvironment):
    """Runs agents in this process, without a JVM: for trying out, tests and debugging.

    Args:
        **options: agent options, as for the Flink runner (those about Flink are ignored).
    """

    def __init__(self, **options: Any) -> None:
        self.options: AgentOptions = load_options(options)
        self._signals: list[tuple[Any, Event]] = []

    def from_list(self, records: Iterable[Any], key_selector: KeySelector = None) -> AgentBuilder:
        return LocalAgentBuilder(records, key_selector, self.options, self._signals)

    def from_keyed_list(self, pairs: Iterable[tuple[Any, Any]]) -> AgentBuilder:
        """Use ``(key, record)`` pairs as the input: each record runs under its key, as a
        keyed Flink stream's would (for inputs whose key is not a function of the record).
        ``pairs`` is read when the input runs."""
        checked = (_pair(item) for item in pairs)  # (a list's iterator sees later items)
        return LocalAgentBuilder(checked, None, self.options, self._signals, keyed=True)

    def signal(self, key: Any, event: Event) -> None:
        """A signal for ``key`` (``ctx.wait_for``; see ``AgentBuilder.with_signals``): each
        input of this environment that has not run yet gets it after its records and its
        own signals, in the order given, before its input ends (so a run waiting for it
        takes it; with none, it starts a run of the actions listening to its type)."""
        if not isinstance(event, Event):
            raise FlinkAgentsError(f"a signal is an Event, got {type(event).__name__}")
        try:
            hash(key)
        except TypeError:
            raise FlinkAgentsError(f"key {key!r:.100} is not hashable") from None
        self._signals.append((key, event))

    def from_table(self, table: Any, key_selector: KeySelector = None) -> AgentBuilder:
        raise FlinkAgentsError(
            "from_table needs the Flink runner: get_execution_environment(env, t_env) with the "
            "StreamExecutionEnvironment and StreamTableEnvironment of your job. The local runner "
            "reads Python records: from_list(rows) with each row a dict of column -> value is "
            "what the agent would see"
        )


def _pair(item: Any) -> tuple[Any, Any]:
    if not (isinstance(item, tuple) and len(item) == 2):
        raise FlinkAgentsError(f"from_keyed_list takes (key, record) pairs, got {item!r:.100}")
    try:
        hash(item[0])
    except TypeError:
        raise FlinkAgentsError(f"key {item[0]!r:.100} is not hashable") from None
    return item


def local_journal(options: AgentOptions) -> ActionJournal | None:
    """The local runner's action journal: the configured ``action-log`` (a local run then
    replays an earlier one when ``action-log-job`` names it), in memory when none is set,
    and none for ``action-log: none``.

    In memory by default so that the local runner behaves as a Flink job does with its
    default log: an action retried after a durable call gets the call's recorded result
    instead of making it again, and a result the log cannot store fails the same way.
    """
    url = options.action_log_url(embedded_default=False)
    if url is None:
        if options.action_log is not None:  # "none"
            return None
        url = "memory://"
    job = options.action_log_job or new_job_name()
    return ActionJournal(
        open_action_log(url),
        job,
        retention_ms=options.action_log_retention_ms,
        generated_name=job != options.action_log_job,
    )
