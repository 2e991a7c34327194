"""The Flink dispatcher: one ``KeyedProcessFunction`` running an agent plan per key.

Keyed state, per key:
    ``sensory`` / ``short_term``  MapState[str, pickled]: flattened memory, the same
                                  ``FlatMemory`` code as the local runner, over MapState.
    ``run_sequence``              ValueState: the number of the key's latest run.
    ``run``                       ValueState: the ``RunState`` of the run in progress.
    ``pending_inputs``            ListState: inputs that arrived while a run was going.

A run executes synchronously inside ``process_element`` until it ends or an async action
awaits a durable call. Then the run is parked: its ``RunState`` goes to state, the live
coroutine stays in ``self._parked`` (never checkpointed), and two timers are set: a
processing-time poll that resumes it once the call is done, and an event-time timer at
``DRAIN_TIMESTAMP`` that only the final watermark of a bounded input reaches, which finishes
every parked run before the job ends. After a restore, a parked run has no coroutine: its
timer re-runs the interrupted action from the start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, OutputTag, RuntimeContext, TimeDomain
from pyflink.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

from flink_agents._shipping import ShippedByName, import_lock
from flink_agents.api._errors import ActionExecutionError
from flink_agents.memory import FlatMemory, to_dict
from flink_agents.plan import bind_plan, plan_from_json
from flink_agents.runtime._engine import RunEngine, RunState, Suspension
from flink_agents.runtime._journal import ActionJournal
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime._records import failed_run
from flink_agents.runtime.action_log import open_action_log

DRAIN_TIMESTAMP = 2**62
ERROR_TAG = OutputTag("agent-errors", Types.PICKLED_BYTE_ARRAY())
MEMORY_TAG = OutputTag("agent-memory", Types.PICKLED_BYTE_ARRAY())


class AgentDispatcher(ShippedByName, KeyedProcessFunction):
    """Executes an agent plan (given as JSON) on a keyed stream.

    Pickles by name (``flink_agents._shipping``), and binds its plan under the worker's
    import lock: operators are built on several threads at once after a restore.
    """

    def __init__(
        self, plan_json: str, options: AgentOptions, job_id: str, action_log_url: str | None
    ) -> None:
        self._plan_json = plan_json
        self._options = options.model_dump()
        self._job_id = job_id
        self._action_log_url = action_log_url
        self._engine: RunEngine | None = None
        self._journal: ActionJournal | None = None
        self._parked: dict[Any, tuple[RunState, Suspension]] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def open(self, runtime_context: RuntimeContext) -> None:
        self.options = AgentOptions(**self._options)
        if self._action_log_url is not None:
            # Records can exist for this job after a failover (attempt > 0) or when the
            # user pinned the job name across submissions; otherwise skip every lookup.
            attempt = _attempt_number(runtime_context)
            replay = attempt != 0 or self.options.action_log_job is not None
            self._journal = ActionJournal(
                open_action_log(self._action_log_url),
                self._job_id,
                replay=replay,
                retention_ms=self.options.action_log_retention_ms,
            )
        with import_lock:  # binding imports the plan's modules
            bound = bind_plan(plan_from_json(self._plan_json))
        self._engine = RunEngine(
            bound,
            max_steps=self.options.max_steps_per_run,
            async_threads=self.options.num_async_threads,
            journal=self._journal,
            options=self.options,
            # An embedded vector store is locked by one process: one directory per subtask.
            long_term_subdirectory=f"subtask-{_subtask_index(runtime_context)}",
        )
        pickled = Types.PICKLED_BYTE_ARRAY()
        self._sensory = runtime_context.get_map_state(
            MapStateDescriptor("sensory", Types.STRING(), pickled)
        )
        self._short_term = runtime_context.get_map_state(
            MapStateDescriptor("short_term", Types.STRING(), pickled)
        )
        self._sequence = runtime_context.get_state(
            ValueStateDescriptor("run_sequence", Types.LONG())
        )
        self._run = runtime_context.get_state(ValueStateDescriptor("run", pickled))
        self._pending = runtime_context.get_list_state(
            ListStateDescriptor("pending_inputs", pickled)
        )
        self._parked = {}
        self._in_flight: set[Future[Any]] = set()
        self._polls: dict[Any, int] = {}
        self._queued = 0  # inputs waiting behind parked runs (this process's estimate)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
        if self._journal is not None:
            self._journal.log.close()

    # -- Flink callbacks -------------------------------------------------------------------

    def process_element(
        self, keyed: tuple[Any, Any], ctx: KeyedProcessFunction.Context
    ) -> Iterator[Any]:
        value = keyed[1]  # (key, record): the builder took the key before keying
        if self._journal is not None:
            self._journal.maybe_prune(self._oldest_in_flight)
        key = ctx.get_current_key()
        parked = self._parked.get(key)
        if parked is not None and parked[1].future.done():
            # The key's durable call is already done: resume its run now rather than at the
            # next poll; this record queues behind it and runs when it ends.
            del self._parked[key]
            self._polls.pop(key, None)
            self._pending.add(value)
            self._queued += 1
            yield from self._drive(parked[0], ctx, False, parked[1])
            return
        run = self._run.value()
        if run is not None:
            self._pending.add(value)
            self._queued += 1
            if parked is None:
                # A run in state without a coroutine here was restored from a checkpoint
                # (or waits for a retry). Its timers may not come back with it: PyFlink was
                # seen to restore a parked run without them, which left the key stuck
                # forever. Its next input resumes it instead of waiting for a timer.
                now = ctx.timer_service().current_processing_time()
                if now >= run.retry_at_ms:
                    yield from self._drive(run, ctx, draining=False)
                    return
                self._register_timers(ctx, run.retry_at_ms)
            self._slow_down_while_queues_grow()
            return
        self._respect_in_flight_limit()
        yield from self._drive(self._start(key, value), ctx, draining=False)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        key = ctx.get_current_key()
        draining = ctx.time_domain() == TimeDomain.EVENT_TIME and timestamp >= DRAIN_TIMESTAMP
        parked = self._parked.get(key)
        if parked is None:
            run = self._run.value()
            now = ctx.timer_service().current_processing_time()
            if run is not None and (draining or now >= run.retry_at_ms):
                # Restored from a checkpoint, or due for a retry: run the head action again.
                yield from self._drive(run, ctx, draining)
            return
        run, suspension = parked
        if not suspension.future.done():
            if not draining:
                polls = self._polls.get(key, 0) + 1
                self._polls[key] = polls
                self._poll_later(ctx, polls)
                return
            wait([suspension.future])
        del self._parked[key]
        self._polls.pop(key, None)
        yield from self._drive(run, ctx, draining, suspension)

    # -- running ---------------------------------------------------------------------------

    def _start(self, key: Any, record: Any) -> RunState:
        sequence = (self._sequence.value() or 0) + 1
        self._sequence.update(sequence)
        return self._engine.start(key, sequence, record)

    def _drive(
        self,
        run: RunState,
        ctx: Any,
        draining: bool,
        suspension: Suspension | None = None,
    ) -> Iterator[Any]:
        """Run ``run`` and then the key's pending inputs until all end or one parks."""
        engine = self._engine
        pending_possible = False
        while True:
            while not run.finished:
                try:
                    if suspension is not None:
                        outcome = engine.resume(run, suspension)
                    else:
                        outcome = engine.step(run, self._sensory, self._short_term)
                    if draining:
                        outcome = engine.complete_blocking(run, outcome)
                except ActionExecutionError as error:
                    suspension = None
                    handled = yield from self._on_failure(run, error, ctx, draining)
                    if handled == "parked":
                        return
                    if handled == "retry-now":
                        continue
                    break  # run abandoned
                suspension = None
                if isinstance(outcome, Suspension):
                    self._park(run, outcome, ctx)
                    return
                yield from outcome.outputs
            self._engine.end(run, self._sensory)
            if run.parked:
                self._run.clear()
            if self.options.memory_snapshots:
                yield (
                    MEMORY_TAG,
                    {
                        "key": run.key,
                        "run_sequence": run.sequence,
                        "short_term_memory": to_dict(FlatMemory(self._short_term).root()),
                    },
                )
            # Inputs queue only behind a parked run: without one, no need to read the list.
            pending_possible = pending_possible or run.parked
            record = self._take_pending() if pending_possible else None
            if record is None:
                return
            run = self._start(run.key, record)

    def _on_failure(
        self, run: RunState, error: ActionExecutionError, ctx: Any, draining: bool
    ) -> Iterator[Any]:
        policy = self.options.error_policy
        if policy == "retry" and run.attempts + 1 < self.options.retry_max_attempts:
            run.attempts += 1
            backoff = self.options.retry_backoff_ms(run.attempts)
            if draining:
                time.sleep(backoff / 1000)
                return "retry-now"
            now = ctx.timer_service().current_processing_time()
            run.retry_at_ms = now + backoff
            run.parked = True
            self._run.update(run)
            self._register_timers(ctx, run.retry_at_ms)
            return "parked"
        if policy == "fail":
            raise error
        yield (
            ERROR_TAG,
            failed_run(
                run.key, run.input, run.sequence, error.action, error.cause, run.attempts + 1
            ),
        )
        return "abandoned"

    def _park(self, run: RunState, suspension: Suspension, ctx: Any) -> None:
        self._parked[run.key] = (run, suspension)
        self._in_flight.add(suspension.future)
        suspension.future.add_done_callback(self._in_flight.discard)
        run.parked = True
        self._run.update(run)
        self._poll_later(ctx)
        ctx.timer_service().register_event_time_timer(DRAIN_TIMESTAMP)

    @staticmethod
    def _register_timers(ctx: Any, due_ms: int) -> None:
        """A processing-time timer at ``due_ms`` and the drain timer for the current key."""
        ctx.timer_service().register_processing_time_timer(due_ms)
        ctx.timer_service().register_event_time_timer(DRAIN_TIMESTAMP)

    def _oldest_in_flight(self) -> int | None:
        """When the oldest parked action of this subtask started (its partial calls in the
        action log must outlive any pruning)."""
        started = [
            s.context.recorder.started_ms
            for _, s in self._parked.values()
            if s.context.recorder is not None
        ]
        return min(started, default=None)

    def _poll_later(self, ctx: Any, polls: int = 0) -> None:
        """Check a parked run again later, backing off exponentially: every timer that
        fires costs a Python call, and hundreds of runs polling every few ms add up."""
        interval = min(
            self.options.async_poll_max_interval_ms,
            self.options.async_poll_interval_ms * 2**polls,
        )
        now = ctx.timer_service().current_processing_time()
        ctx.timer_service().register_processing_time_timer(now + interval)

    def _take_pending(self) -> Any:
        pending = list(self._pending.get() or [])
        if not pending:
            return None
        self._queued = max(0, self._queued - 1)
        if len(pending) == 1:
            self._pending.clear()
        else:
            self._pending.update(pending[1:])
        return pending[0]

    def _slow_down_while_queues_grow(self) -> None:
        """Backpressure for inputs queued behind parked runs: past ``max-in-flight``, wait
        for a durable call to finish before taking the next record. Without it a bounded
        input is read at once and its queued runs are left for the final drain, which
        finishes them one at a time."""
        if self._in_flight and len(self._in_flight) + self._queued >= self.options.max_in_flight:
            wait(list(self._in_flight), return_when=FIRST_COMPLETED)

    def _respect_in_flight_limit(self) -> None:
        """Block (backpressure) while too many durable calls are running."""
        while len(self._in_flight) >= self.options.max_in_flight:
            wait(list(self._in_flight), return_when=FIRST_COMPLETED)


def _attempt_number(runtime_context: RuntimeContext) -> int | None:
    """The task's attempt number, or None where PyFlink cannot tell: its thread mode raises
    AttributeError (then replay lookups stay on, which is only slower)."""
    try:
        return runtime_context.get_attempt_number()
    except AttributeError:
        return None


def _subtask_index(runtime_context: RuntimeContext) -> int:
    try:
        return runtime_context.get_index_of_this_subtask()
    except AttributeError:  # not seen, but the same thread-mode context backs it
        return 0
