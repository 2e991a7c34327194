"""The run engine: executes one run of one key, one action at a time.

Shared by every runner. It holds no per-key state of its own: the runner keeps each key's
``RunState`` and memory maps (dicts locally, Flink keyed state in the dispatcher) and
calls ``start``, then ``step`` until ``finished``, then ``end``. Everything it keeps in
``RunState`` is picklable so a runner can park a run in state between steps.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Coroutine, Sequence
from concurrent.futures import Future, InvalidStateError, wait
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from flink_agents._ids import input_event_id, key_text, new_job_name
from flink_agents.api import ActionExecutionError, Event, FlinkAgentsError, InputEvent
from flink_agents.api.internal import input_event
from flink_agents.memory import CachedState, MemoryDelta, StateMap, apply_rebased, rebase_points
from flink_agents.plan import BoundAction, BoundPlan
from flink_agents.runtime._call_threads import CallThreads
from flink_agents.runtime._context import (
    NO_CHANGE,
    ActionContext,
    ActionServices,
    DirectActionContext,
)
from flink_agents.runtime._event_log import EventLog
from flink_agents.runtime._long_term import LongTermProvider
from flink_agents.runtime._metrics import AgentMetrics
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime._resources import ResourceCache
from flink_agents.runtime.action_log import (
    ActionLogError,
    ActionRecord,
    UnstorableValueError,
)
from flink_agents.runtime.journal import ActionJournal, CallRecorder, Lookup

if TYPE_CHECKING:  # (it imports asyncio: see ``_get_call_loop``)
    from flink_agents.runtime._call_loop import CallLoop

logger = logging.getLogger(__name__)

_ONLY_DURABLE_AWAITS = (
    "an async action may only await ctx.durable_execute_async(...): runners park the run "
    "between awaits and have no asyncio event loop"
)


@dataclass
class PendingAction:
    """An action to run for an event, queued in the order events were sent."""

    action: str
    event: Event


# What stopped ``RunEngine._plain_actions`` (see there).
_FOR_STEP, _FAILED, _UNUSUAL = object(), object(), object()


@dataclass
class RunState:
    """Where a run is: its identity and the actions still to run."""

    key: Any
    sequence: int
    input: Any
    queue: deque[PendingAction] = field(default_factory=deque)
    steps: int = 0
    attempts: int = 0
    """Failed attempts of the action at the head of the queue (for the retry policy)."""
    retry_at_ms: int = 0
    """Processing time before which a failed head action is not retried."""
    sensory_written: bool = False
    """Whether an action of this run changed sensory memory (else there is nothing to clear)."""
    parked: bool = False
    """Whether the run was ever kept in state (so the runner has state to clean up)."""
    settled: dict[int, tuple[MemoryDelta, MemoryDelta, Sequence[Event], bool]] | None = None
    """The members of a failed fan-out group at the head of the queue that completed, by
    position: a retry runs only the others again (they still commit in plan order)."""
    ready: list[StepResult] = field(default_factory=list)
    """Results of a fan-out group's later members, already applied, that ``step``
    returns one at a time (empty whenever the run is parked or checkpointed)."""

    @property
    def finished(self) -> bool:
        return not self.queue and not self.ready


def _unpickle_run(*values: Any) -> RunState:
    """A parked run as release 0.1.0 pickled it into Flink state: checkpoints of that release
    name this function, so it stays here (``runtime/_persisted.py`` reads it)."""
    from flink_agents.runtime._persisted import run_of_v010

    return run_of_v010(values)


@dataclass
class SubRunState(RunState):
    """A sub-run: another agent's run inside an action (``ctx.run_agent``). Its actions are
    recorded under the calling action's run and step (see ``runtime/_sub_run.py``)."""

    parent: Any = None
    """The calling action's context (sub-runs live in its coroutine, never in state)."""
    parent_step: int = 0
    namespace: str = ""
    """The prefix of its actions' names in the action log."""


class StepResult(NamedTuple):
    """What one completed action did: the unit the action log records. (A named tuple:
    one is made per step, on the hot path.)"""

    action: str
    step: int
    sensory: MemoryDelta
    short_term: MemoryDelta
    events: tuple[Event, ...]
    outputs: tuple[Any, ...]
    replayed: bool = False
    """Whether the action was skipped and its effects re-applied from the action log."""


@dataclass
class Suspension:
    """An ``async def`` action waiting on durable work submitted to the executor.

    The runner resumes it with ``RunEngine.resume`` once ``future`` is done, on the thread
    that owns the memory maps. It holds a live coroutine, so it is never checkpointed: after
    a restore the action runs again from its start.
    """

    action: str
    context: ActionContext
    coroutine: Coroutine[Any, Any, Any]
    future: Future[Any]
    storing: bool = False
    """The action's function has returned; it waits for its long-term items to be stored
    (``_complete``), not for a durable call."""

    @property
    def oldest_call_ms(self) -> int | None:
        """When the action's recorder started (its recorded calls must outlive pruning)."""
        recorder = self.context.recorder
        return None if recorder is None else recorder.started_ms


class _Member:
    """One action of a fan-out group: running, awaiting a call, or settled (with its
    result or its failure)."""

    __slots__ = ("action", "context", "coroutine", "failure", "future", "result")

    def __init__(self, action: BoundAction) -> None:
        self.action = action
        self.context: ActionContext | None = None
        self.coroutine: Coroutine[Any, Any, Any] | None = None
        self.future: Future[Any] | None = None
        """The durable call it awaits (None once settled)."""
        self.result: tuple[MemoryDelta, MemoryDelta, Sequence[Event], bool] | None = None
        """Sensory and short-term deltas, sent events, and whether they were replayed."""
        self.failure: ActionExecutionError | None = None


@dataclass
class GroupSuspension:
    """A fan-out group (async actions listening to one event, run side by side) with at
    least one member awaiting a durable call. ``future`` is done once any awaited call is
    done; the runner then resumes it with ``RunEngine.resume``, like a ``Suspension``."""

    members: list[_Member]
    maps: tuple[StateMap, StateMap]
    future: Future[None]

    @property
    def action(self) -> str:
        """The group's name (its members', in plan order): runners key their estimates
        of how long a suspension lasts by it."""
        return "+".join(member.action.name for member in self.members)

    @property
    def oldest_call_ms(self) -> int | None:
        started = [
            m.context.recorder.started_ms
            for m in self.members
            if m.context is not None and m.context.recorder is not None
        ]
        return min(started, default=None)


Suspended = Suspension | GroupSuspension
StepOutcome = StepResult | Suspended


class RunEngine:
    """Runs the actions of a bound plan.

    Args:
        plan: the bound plan.
        options: the agent options; the engine reads ``max-steps-per-run`` (actions one run
            may execute before it is stopped as a runaway loop), ``num-async-threads`` (the
            executor of ``durable_execute_async`` calls) and the long-term memory options.
        journal: the action log to record completed actions and durable calls in, and to
            replay them from (None: nothing is recorded).
        job_id: the job this engine runs for, the same in every attempt and subtask (the
            Flink dispatcher's); without an action log, the ids of long-term items derive
            from it, so an action that runs again after a restore overwrites its items.
            None: a fresh id per engine (the local runner).
        parent: the engine whose actions run this plan as a sub-agent: its options,
            journal, executor, long-term memory, metrics and event log are shared (the
            other arguments but the plan are then ignored).
        metrics: where the run lifecycle counts (``AgentMetrics``; a new one if None).
        event_log: where runs, events and actions are logged (off if None).
    """

    def __init__(
        self,
        plan: BoundPlan,
        options: AgentOptions | None = None,
        *,
        journal: ActionJournal | None = None,
        job_id: str | None = None,
        parent: RunEngine | None = None,
        metrics: AgentMetrics | None = None,
        event_log: EventLog | None = None,
    ) -> None:
        self.plan = plan
        self._parent = parent
        self.resources = ResourceCache(plan)
        if parent is not None:
            self.options, self.journal = parent.options, parent.journal
            self.long_term = parent.long_term
            self._engine_id = parent._engine_id
            self.metrics, self.event_log = parent.metrics, parent.event_log
        else:
            self.options = options or AgentOptions()
            self.journal = journal
            self.metrics = metrics if metrics is not None else AgentMetrics()
            self.event_log = event_log if event_log is not None else EventLog(None, "off")
            self.long_term = LongTermProvider(self.options, self.resources)
            """Long-term memory and knowledge, opened when an action first uses them."""
            self.long_term.observer = self.metrics
            # Without an action log, ids of long-term items derive from the job (the
            # subtasks of one job run disjoint keys; a restored attempt repeats them) or,
            # without one, from this engine (another process's runs must not overwrite
            # them; a retry repeats them).
            self._engine_id = job_id or new_job_name()
        self.max_steps = self.options.max_steps_per_run
        self.records_all = self.journal is not None and self.options.action_log_record == "all"
        """Whether every completed action is recorded (``action-log-record: all``), not
        only those a restore needs: every action then takes ``step``'s path, which makes
        the deltas a record holds (``run_plain`` and ``run_new`` hand their runs to it)."""
        self._executor: CallThreads | None = None
        self._call_loop: CallLoop | None = None
        self._sub_runs: Any = None
        self._actions = {a.name: a for a in plan.actions}
        self._input_actions = plan.actions_for(InputEvent)
        """The actions a run starts with (its ``InputEvent``'s), in plan order."""
        self._configs = {
            a.name: MappingProxyType({**plan.plan.config, **a.config}) for a in plan.actions
        }
        self._parallel = frozenset(
            a.name
            for a in plan.actions
            if self.options.parallel_actions and inspect.iscoroutinefunction(a.function)
        )
        """The ``async def`` actions, which run side by side with the ``async def``
        actions next to them listening to the same event (``parallel-actions``)."""
        # Made once: every action context shares it (``_context``).
        self._services = ActionServices(
            self.resources,
            self._get_executor,
            # Made by an action's first durable call: most actions make none.
            self._new_recorder if self.journal is not None else None,
            long_term=self.long_term,
            # The identity of its id minter, computed only if the action writes outside
            # Flink (long-term memory, knowledge, external ids): off the hot path.
            identity=self._writer_identity,
            sub_runs=self.sub_runs,
            metrics=self.metrics,
            call_loop=self._get_call_loop,
        )

    @property
    def executor(self) -> CallThreads:
        return self._get_executor()

    def _get_executor(self) -> CallThreads:
        """The executor of durable calls (the parent's for a sub-agent), made on first use."""
        if self._parent is not None:
            return self._parent.executor
        if self._executor is None:
            self._executor = CallThreads(
                max_workers=self.options.num_async_threads,
                thread_name_prefix="flink-agents-async",
            )
        return self._executor

    def _get_call_loop(self) -> CallLoop:
        """The event loop of ``async def`` durable functions (the parent's for a
        sub-agent), started by the first such call."""
        if self._parent is not None:
            return self._parent._get_call_loop()
        if self._call_loop is None:
            # Imported here: it imports asyncio, which a run without ``async def`` durable
            # calls never needs (about 40 ms of a Flink operator's start).
            from flink_agents.runtime._call_loop import CallLoop

            self._call_loop = CallLoop()
        return self._call_loop

    def start_async_threads(self) -> None:
        """Start all ``num-async-threads`` threads of the executor now, when the plan has
        ``async def`` actions of its own or resources (which the built-in ``async def``
        chat, tool and retrieval actions use); else nothing: such a plan makes no async call.

        ``ThreadPoolExecutor`` starts one thread per ``submit`` until it has them all, and
        ``Thread.start`` waits for the new thread to run. In PyFlink's thread mode the new
        thread must win the GIL from the operator and the upstream task first: that took
        about 1.5 ms per thread, on the operator's thread, so the first burst of records
        started its calls at a fraction of the usual rate (``bench/RESULTS.md``). The
        dispatcher calls this when it opens in thread mode, before any record arrives.
        """
        own = {spec.name for spec in self.plan.plan.actions}
        if not self.plan.resources and not any(
            a.is_async for a in self.plan.actions if a.name in own
        ):
            return
        executor = self.executor
        release = threading.Event()
        # Each task blocks until all are submitted, so no thread is idle and every submit
        # starts a new one; then they all return and wait for calls.
        for _ in range(self.options.num_async_threads):
            executor.submit(release.wait)
        release.set()

    def close(self, wait_s: float | None = None) -> None:
        """Drain the call loop and stop the executor (waiting for running calls, which
        record their results), let compactions finish, close the resources (an MCP server's
        session, an async client on the loop), stop the loop, then write the journal's
        queued records and close its log.

        ``wait_s`` bounds the wait for calls, compactions and stores in all (None: until they
        end). A call still running then is given up, its outcome not recorded (a restore
        makes it again): the loop cancels its coroutine; an executor thread runs it to its
        end and then ends.

        Raises:
            ActionLogError: the journal could not write its queued records.
        """
        deadline = None if wait_s is None else time.monotonic() + wait_s

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        if self._sub_runs is not None:
            self._sub_runs.close()
        if self._parent is not None:  # the executor, store and journal are the parent's
            self.resources.close()
            return
        loop, self._call_loop = self._call_loop, None
        if loop is not None:
            loop.drain(left())  # its calls end and are recorded first
        if self._executor is not None:
            running = self._executor.stop(left())
            self._executor = None
            if running:
                logger.warning(
                    "%d durable calls still running after %.1f s were given up; their"
                    " outcomes are not recorded",
                    running,
                    wait_s,
                )
        try:
            if deadline is None:
                self.long_term.close()
            else:
                self.long_term.close(left())
        finally:
            try:
                # Before the loop stops: an async client made on it closes on it.
                self.resources.close()
                self.event_log.metrics(self.metrics.snapshot())
                self.event_log.close()
            finally:
                try:
                    if loop is not None:
                        loop.close(left())
                finally:
                    if self.journal is not None:
                        self.journal.close()

    def sub_runs(self) -> Any:
        """The engines of the sub-agents this engine's actions run (``SubRuns``)."""
        if self._sub_runs is None:
            from flink_agents.runtime._sub_run import SubRuns  # it builds on this module

            self._sub_runs = SubRuns(self)
        return self._sub_runs

    def enqueue(self, run: RunState, event: Event) -> None:
        """Queue ``event``'s listeners in ``run`` (a sub-run's input)."""
        self._enqueue(run, event)

    @staticmethod
    def _identity_of(run: RunState, step: int, action: str) -> tuple[int, str]:
        """The step and action name an execution is recorded under: its own, or for a
        sub-run's action, the calling action's step and a name within it."""
        if type(run) is SubRunState:
            return run.parent_step, f"{run.namespace}{step}:{action}"
        return step, action

    def _writer_identity(
        self, key: Any, sequence: int, step: int, action: str, lookup: Lookup | None = None
    ) -> tuple[Any, ...]:
        """What long-term items an action writes derive their ids from: its action-log
        identity (``lookup``'s, when the journal was asked for the execution), or without
        a log this engine's id (a retry repeats it, another process does not) with the key,
        run, step and action."""
        if self.journal is not None:
            if lookup is not None:
                identity = lookup.identity
            else:
                identity = self.journal.identity(key, sequence, step, action)
            # Its fields in order, read one by one: ``dataclasses.astuple`` copies
            # recursively (``bench/RESULTS.md``).
            return (
                identity.job,
                identity.key,
                identity.run_sequence,
                identity.step,
                identity.action,
            )
        return (self._engine_id, key_text(key), sequence, step, action)

    def _new_recorder(
        self, key: Any, sequence: int, step: int, action: str, retried: bool, lookup: Lookup | None
    ) -> CallRecorder:
        """The durable-call recorder of one action execution (its recorded calls loaded
        when an earlier execution may have made some), from what the journal answered for
        it (``lookup``), asked here for a context made without asking (the plain lane).

        Raises:
            ActionLogError: the log failed.
        """
        if lookup is None:
            lookup = self.journal.lookup(key, sequence, step, action)
        return self.journal.recorder(lookup, look_up=retried)

    def start(self, key: Any, sequence: int, record: Any) -> RunState:
        """A new run for ``record``: its ``InputEvent`` queued for the input actions."""
        run = RunState(key=key, sequence=sequence, input=record)
        self._enqueue(run, self._input_event(key, sequence, record))
        return run

    def _input_event(self, key: Any, sequence: int, record: Any) -> InputEvent:
        """The input event of a new run (counted, with the run, in the metrics)."""
        self.metrics.run_started(1)  # and its input event processed
        if self.journal is None:
            return input_event(record)
        # A replayed input must carry the same event id.
        return input_event(record, input_event_id(self.journal.job, key, sequence))

    def step(self, run: RunState, sensory: StateMap, short_term: StateMap) -> StepOutcome:
        """Run the next queued action (with the ``async def`` actions queued right behind
        it for the same event, when it is one: a fan-out group, see ``_start_group``).

        Returns a ``StepResult`` when the action completed (its effects are then applied to
        the two maps), or a suspension when an ``async def`` action awaits durable work.

        Raises:
            ActionExecutionError: the action raised; nothing it did was applied, and the
                pending action stays at the head of the queue.
        """
        if run.ready:
            return run.ready.pop(0)
        pending = run.queue[0]
        action = self._actions[pending.action]
        if run.steps >= self.max_steps:
            raise self._failure(
                run,
                action,
                FlinkAgentsError(
                    f"the run exceeded {self.max_steps} steps; is an action sending events "
                    "in a loop? (raise max_steps if this is intended)"
                ),
            )
        if pending.action in self._parallel:
            group = self._fan_out(run)
            if len(group) > 1:
                return self._start_group(run, group, sensory, short_term)
        step = run.steps + 1
        lookup = None
        if self.journal is not None:
            lookup = self._lookup(run, step, action)
            if lookup.record is not None:
                return self._replay(run, lookup.record, sensory, short_term)
        context = self._context(run, action, step, sensory, short_term, lookup)
        try:
            result = action.function(pending.event, context)
        except Exception as error:
            raise self._failure(run, action, error, context) from error
        if result is not None and inspect.iscoroutine(result):
            return self._advance(run, action, context, result, None, None)
        return self._complete(run, action, context)

    def run_new(
        self, key: Any, sequence: int, record: Any, sensory: StateMap, short_term: StateMap
    ) -> tuple[int, list[Any], RunState | None, Suspended | ActionExecutionError | None]:
        """``start`` a run for ``record`` and ``run_plain`` it, without making the run's
        state unless something stops its plain actions: the common run, whose actions are
        all plain, ends here (its sensory memory cleared, counted as succeeded).

        Returns:
            How many actions completed, their outputs (in order), and either None, None
            (the run ended) or the run with what stopped it, as ``run_plain`` returns it
            (``step`` takes the run from there).

        Raises:
            ActionLogError: the action log failed (the job fails).
        """
        journal = self.journal
        if journal is None:
            self.metrics.run_started(1)  # ``_input_event``, inlined
            event = input_event(record)
        else:
            journal.check()
            # ``step`` replays the run's records, or records every action (``records_all``).
            if self.records_all or journal.may_replay(key, sequence):
                return 0, [], self.start(key, sequence, record), None
            event = self._input_event(key, sequence, record)
        inputs = self._input_actions
        queue = [(inputs[0], event)] if len(inputs) == 1 else [(a, event) for a in inputs]
        done, outputs, written, stop = self._plain_actions(
            key, sequence, queue, 0, False, sensory, short_term
        )
        if stop is None:
            self.metrics.run_succeeded()
            if written:
                sensory.clear()
            return done, outputs, None, None
        run = RunState(key=key, sequence=sequence, input=record)
        self._caught_up(run, queue, done, written)
        more, sent, outcome = self._plain_stopped(run, stop, sensory, short_term)
        return done + more, outputs + sent, run, outcome

    def run_plain(
        self, run: RunState, sensory: StateMap, short_term: StateMap
    ) -> tuple[int, list[Any], Suspended | ActionExecutionError | None]:
        """Run the plain actions at the head of the queue back to back, as ``step`` would
        one at a time, for the common run that makes no durable call and writes nothing
        outside Flink state: each action's buffered writes go straight into the maps, its
        events into the queue, without the per-step results ``step`` makes.

        Stops at an ``async def`` action, at the run's step budget, and before any action
        when the action log may hold the run's records (``step`` replays them) or is to
        record every action (``records_all``: ``step`` makes the records); a plain
        action that turns out to need more (a durable call, a write outside Flink, a
        coroutine returned) completes through ``step``'s own path.

        Returns:
            How many actions completed, the outputs they sent (in order), and what stopped
            the run short of its next action: None (the queue is empty or its head is for
            ``step``), a suspension (to park the run, as ``step`` returns it), or the
            ``ActionExecutionError`` of a failed action (nothing of it applied; the actions
            before it were).

        Raises:
            ActionLogError: the action log failed (the job fails).
        """
        if type(run) is not RunState or run.ready:
            return 0, [], None
        journal = self.journal
        if journal is not None:
            journal.check()
            if self.records_all or journal.may_replay(run.key, run.sequence):
                return 0, [], None
        actions = self._actions
        queue = [(actions[pending.action], pending.event) for pending in run.queue]
        done, outputs, written, stop = self._plain_actions(
            run.key, run.sequence, queue, run.steps, run.attempts > 0, sensory, short_term
        )
        if done:
            self._caught_up(run, queue, done, written)
        if stop is None:
            return done, outputs, None
        more, sent, outcome = self._plain_stopped(run, stop, sensory, short_term)
        return done + more, outputs + sent, outcome

    def _plain_actions(
        self,
        key: Any,
        sequence: int,
        queue: list[tuple[BoundAction, Event]],
        steps: int,
        retried: bool,
        sensory: StateMap,
        short_term: StateMap,
    ) -> tuple[int, list[Any], bool, tuple[Any, ...] | None]:
        """The loop of ``run_plain``: run the plain actions of ``queue`` (``(action,
        event)`` pairs, appended to as they send events) from its head, each as ``step``
        would (its buffered writes applied to the maps, its events queued), until the queue
        is done or its next action is for ``step``: an ``async def`` one, one past the step
        budget (``steps`` taken before), one that failed or turned out to need more.
        (``retried``: whether the head action failed before.)

        Returns:
            How many actions completed (the first that many of ``queue``), their outputs,
            whether they wrote sensory memory, and what stopped the loop, for
            ``_plain_stopped``: None (the queue is done), ``(_FOR_STEP,)`` (the next
            action is for ``step``), ``(_FAILED, context, error)`` or
            ``(_UNUSUAL, context, result)`` (an action that needs ``step``'s path).
        """
        configs, services, max_steps = self._configs, self._services, self.max_steps
        routes, route, metrics = self.plan.routes, self.plan.route, self.metrics
        # Over the driver's caches, writes go straight into the maps, undone on failure.
        direct = type(sensory) is CachedState and type(short_term) is CachedState
        make_context = DirectActionContext if direct else ActionContext
        outputs: list[Any] = []
        written = False
        done = 0
        while done < len(queue):
            action, event = queue[done]
            if action.is_async or steps + done >= max_steps:
                return done, outputs, written, (_FOR_STEP,)
            name = action.name
            context = make_context(
                key,
                sensory,
                short_term,
                configs[name],
                services,
                (sequence, steps + done + 1, name),
                retried,
            )
            retried = False
            function = action.function
            try:
                result = function(event, context)
            except Exception as error:
                return done, outputs, written, (_FAILED, context, error)
            except BaseException:
                if type(context) is DirectActionContext:  # (not turned into an ordinary one)
                    context.rollback()
                raise
            if (
                (result is not None and inspect.iscoroutine(result))
                or context.recorder is not None
                or context.wrote_outside
                or context.infrastructure_error is not None
            ):
                return done, outputs, written, (_UNUSUAL, context, result)
            if context.apply_writes():
                written = True
            done += 1
            sent = context.sent
            for sent_event in sent:
                kind = type(sent_event)
                listeners, is_output = routes.get(kind) or route(kind)
                if is_output:
                    outputs.append(sent_event.output)
                for listener in listeners:
                    queue.append((listener, sent_event))
            metrics.action_completed(name, len(sent), False)
        return done, outputs, written, None

    @staticmethod
    def _caught_up(
        run: RunState, queue: list[tuple[BoundAction, Event]], done: int, written: bool
    ) -> None:
        """Bring ``run`` to where ``_plain_actions`` left ``queue``: ``done`` more steps
        completed (its head action's failed attempts forgotten) and the rest queued."""
        run.steps += done
        run.attempts = 0
        run.sensory_written = run.sensory_written or written
        run.queue.clear()
        run.queue.extend(PendingAction(action.name, event) for action, event in queue[done:])

    def _plain_stopped(
        self, run: RunState, stop: tuple[Any, ...], sensory: StateMap, short_term: StateMap
    ) -> tuple[int, list[Any], Suspended | ActionExecutionError | None]:
        """Go on from where ``_plain_actions`` stopped on ``run`` (its state brought up to
        date, the stopping action at the head of its queue), as ``run_plain`` returns: a
        failed action's error; an action that needs more completed through ``step``'s own
        path (parked, or followed by the plain actions after it)."""
        if stop[0] is _FOR_STEP:
            return 0, [], None
        kind, context, result = stop
        action = self._actions[run.queue[0].action]
        if type(context) is DirectActionContext:
            if kind is _FAILED:
                context.rollback()  # nothing of a failed action is applied
            else:
                context.buffered()  # ``step``'s path applies its writes from buffers
        if kind is _FAILED:
            failure = self._failure(run, action, result, context)
            if not isinstance(failure, ActionExecutionError):
                raise failure from result
            failure.__cause__ = result
            return 0, [], failure
        try:
            if result is not None and inspect.iscoroutine(result):
                outcome = self._advance(run, action, context, result, None, None)
            else:
                outcome = self._complete(run, action, context)
        except ActionExecutionError as failure:
            return 0, [], failure
        if type(outcome) is not StepResult:
            return 0, [], outcome
        self.metrics.action_completed(outcome.action, len(outcome.events), False)
        done, outputs, stopped = self.run_plain(run, sensory, short_term)
        return 1 + done, [*outcome.outputs, *outputs], stopped

    def _lookup(self, run: RunState, step: int, action: BoundAction) -> Lookup:
        """The journal's answer for this step, asked once: its identity, and the record to
        replay when an earlier attempt completed it (``Lookup``).

        Raises:
            ActionLogError: the log failed (the job fails, whatever the error policy: it
                is not the action's failure).
        """
        step, name = self._identity_of(run, step, action.name)
        return self.journal.lookup(run.key, run.sequence, step, name)

    def _context(
        self,
        run: RunState,
        action: BoundAction,
        step: int,
        sensory: StateMap,
        short_term: StateMap,
        lookup: Lookup | None = None,
    ) -> ActionContext:
        """A fresh context for executing ``action`` as step ``step`` of ``run`` (``lookup``:
        what the journal answered for it)."""
        name = action.name
        config = self._configs[name]
        if type(run) is not RunState:
            step, name = self._identity_of(run, step, name)
        context = ActionContext(
            run.key,
            sensory,
            short_term,
            config,
            self._services,
            (run.sequence, step, name),
            run.attempts > 0,
        )
        if lookup is not None:
            context.lookup = lookup
        return context

    def resume(self, run: RunState, suspension: Suspended) -> StepOutcome:
        """Continue a suspended action (or group) whose future is done (same maps as its
        ``step``)."""
        if isinstance(suspension, GroupSuspension):
            return self._resume_group(run, suspension)
        action = self._actions[suspension.action]
        error = suspension.future.exception()
        value = None if error is not None else suspension.future.result()
        return self._advance(run, action, suspension.context, suspension.coroutine, value, error)

    def step_blocking(self, run: RunState, sensory: StateMap, short_term: StateMap) -> StepResult:
        """``step``, waiting on this thread for any durable work (the local runner's way)."""
        return self.complete_blocking(run, self.step(run, sensory, short_term))

    def complete_blocking(self, run: RunState, outcome: StepOutcome) -> StepResult:
        """Wait on this thread for a suspended action's durable work until it completes."""
        while not isinstance(outcome, StepResult):
            wait([outcome.future])
            outcome = self.resume(run, outcome)
        return outcome

    def end(self, run: RunState, sensory: StateMap) -> None:
        """Close a run: its sensory memory is cleared (when the run wrote any)."""
        run.queue.clear()
        run.ready.clear()
        run.settled = None
        if run.sensory_written:
            sensory.clear()

    def _advance(
        self,
        run: RunState,
        action: BoundAction,
        context: ActionContext,
        coroutine: Coroutine[Any, Any, Any],
        value: Any,
        error: BaseException | None,
    ) -> StepOutcome:
        """Drive ``coroutine`` until it completes or awaits durable work."""
        try:
            future = _until_call(coroutine, value, error)
        except Exception as failure:
            raise self._failure(run, action, failure, context) from failure
        if future is not None:
            return Suspension(action.name, context, coroutine, future)
        return self._complete(run, action, context)

    def _record(
        self, run: RunState, action: BoundAction, context: ActionContext
    ) -> tuple[MemoryDelta, MemoryDelta]:
        """Record a completed execution in the action log when it made durable calls or
        wrote outside Flink state, or whatever it did with ``records_all``; its memory
        deltas (the maps are still untouched).

        Raises:
            ActionExecutionError: the log cannot store a value the action produced.
            ActionLogError: the log failed.
        """
        if context.infrastructure_error is not None:  # a sub-run's, caught by the action
            raise context.infrastructure_error
        sensory_delta, short_term_delta = context.deltas()
        recorder = context.recorder
        if recorder is None and context.wrote_outside and self.journal is not None:
            recorder = context.call_recorder()
        # Only an action that made durable calls or wrote outside Flink state is recorded:
        # one that did neither runs again after a restore, on the restored state and the
        # same events, as cheaply as it ran (docs/consistency.md, "What is recorded").
        # ``action-log-record: all`` records it too (an audit), with no calls.
        if recorder is not None or self.records_all:
            # Logged before the maps change: a crash in between replays the record onto
            # the restored state. A failure of the log (ActionLogError, also when the action
            # swallowed a call's recording failure: ``recorder.calls`` raises it) fails the
            # job with nothing applied; a value the log cannot store is the action's fault.
            try:
                if recorder is not None:
                    identity, calls = recorder.identity, recorder.calls
                else:
                    lookup = context.lookup
                    if lookup is not None:
                        identity, calls = lookup.identity, []
                    else:
                        identity, calls = self.journal.identity(context.key, *context.origin), []
                sensory, short_term = context.maps
                previous = (
                    _previous_values(sensory_delta, sensory),
                    _previous_values(short_term_delta, short_term),
                )
                self.journal.complete(
                    identity,
                    sensory_delta,
                    short_term_delta,
                    context.sent,
                    calls,
                    previous,
                )
            except UnstorableValueError as error:
                raise self._failure(run, action, error) from error
            self.metrics.log_written()
        return sensory_delta, short_term_delta

    def _complete(self, run: RunState, action: BoundAction, context: ActionContext) -> StepOutcome:
        """Record and apply a finished execution; first, if it wrote long-term items that
        are still being embedded, suspend it until they are stored (like an awaited call:
        the run parks, other keys go on). So an action counts as complete, in the log and
        in Flink state, only once its writes outside Flink have landed."""
        landing = context.landing() if context.wrote_outside else None
        if landing is not None:
            return Suspension(action.name, context, _landed(), landing, storing=True)
        sensory_delta, short_term_delta = self._record(run, action, context)
        sensory, short_term = context.maps
        return self._apply(
            run, action.name, sensory_delta, short_term_delta, context.sent, sensory, short_term
        )

    # -- fan-out groups ----------------------------------------------------------------------

    def _fan_out(self, run: RunState) -> list[PendingAction]:
        """The fan-out group at the head of the queue: the head (an ``async def`` action)
        and the ``async def`` actions queued right behind it for the same event, within
        the run's step budget."""
        queue = run.queue
        head = queue[0]
        group = [head]
        for pending in itertools.islice(queue, 1, self.max_steps - run.steps):
            if pending.event is not head.event or pending.action not in self._parallel:
                break
            group.append(pending)
        return group

    def _start_group(
        self,
        run: RunState,
        group: list[PendingAction],
        sensory: StateMap,
        short_term: StateMap,
    ) -> StepOutcome:
        """Start every member of a fan-out group, each up to its first durable call, so
        their calls overlap. Every member sees the memory as it was when the group started
        (and its own writes, not the other members'); the group commits in plan order once
        all members are done (``_settle_group``). Each member keeps the step number it
        would have had alone, so the action log replays it the same way."""
        members = []
        settled = run.settled or {}
        for index, pending in enumerate(group):
            member = _Member(self._actions[pending.action])
            members.append(member)
            step = run.steps + 1 + index
            if index in settled:  # completed before the group failed: not run again
                member.result = settled[index]
                continue
            lookup = None
            if self.journal is not None:
                lookup = self._lookup(run, step, member.action)
                if lookup.record is not None:
                    record = lookup.record
                    member.result = (record.sensory, record.short_term, record.events, True)
                    continue
            context = member.context = self._context(
                run, member.action, step, sensory, short_term, lookup
            )
            try:
                result = member.action.function(pending.event, context)
            except Exception as error:
                member.failure = self._member_failure(run, member, error)
                continue
            if inspect.iscoroutine(result):
                member.coroutine = result
                self._drive_member(run, member, None, None)
            else:
                self._settle_member(run, member)
        return self._settle_group(run, members, (sensory, short_term))

    def _resume_group(self, run: RunState, suspension: GroupSuspension) -> StepOutcome:
        """Continue every member whose call is done; commit the group once all are done."""
        for member in suspension.members:
            future = member.future
            if future is not None and future.done():
                member.future = None
                error = future.exception()
                value = None if error is not None else future.result()
                self._drive_member(run, member, value, error)
        return self._settle_group(run, suspension.members, suspension.maps)

    def _drive_member(
        self, run: RunState, member: _Member, value: Any, error: BaseException | None
    ) -> None:
        try:
            future = _until_call(member.coroutine, value, error)
        except Exception as failure:
            member.coroutine = None
            member.failure = self._member_failure(run, member, failure)
            return
        if future is None and member.context.wrote_outside:
            # Its long-term items still being embedded: wait for them like for a call.
            future = member.context.landing()
            if future is not None:
                member.coroutine = _landed()
        if future is not None:
            member.future = future
        else:
            member.coroutine = None
            self._settle_member(run, member)

    def _settle_member(self, run: RunState, member: _Member) -> None:
        try:
            sensory_delta, short_term_delta = self._record(run, member.action, member.context)
        except ActionExecutionError as failure:
            member.failure = failure
            return
        member.result = (sensory_delta, short_term_delta, member.context.sent, False)

    def _member_failure(
        self, run: RunState, member: _Member, error: Exception
    ) -> ActionExecutionError:
        """The member's failure, kept until the group settles; the action log's own failure
        is raised at once (the job fails)."""
        failure = self._failure(run, member.action, error, member.context)
        if not isinstance(failure, ActionExecutionError):
            raise failure from error
        failure.__cause__ = error
        return failure

    def _settle_group(
        self, run: RunState, members: list[_Member], maps: tuple[StateMap, StateMap]
    ) -> StepOutcome:
        """Suspend while a member awaits a call; then raise the first failure in plan order
        (nothing of the group is applied; the members that completed are kept in the run,
        so a retry runs only the failed ones again), or apply every member in plan order
        and return the first member's result (``step`` returns the others')."""
        waiting = [member.future for member in members if member.future is not None]
        if waiting:
            wake: Future[None] = Future()

            def ring(_: Future[Any]) -> None:  # on the executor's thread
                with contextlib.suppress(InvalidStateError):  # another call rang first
                    wake.set_result(None)

            for future in waiting:
                future.add_done_callback(ring)
            return GroupSuspension(members, maps, wake)
        failed = [member.failure for member in members if member.failure is not None]
        if failed:
            run.settled = {
                index: member.result
                for index, member in enumerate(members)
                if member.result is not None
            }
            raise failed[0]
        run.settled = None
        sensory, short_term = maps
        later = [member.result for member in members[1:]]
        bases = (
            rebase_points((result[0] for result in later), sensory),
            rebase_points((result[1] for result in later), short_term),
        )
        results = []
        for index, member in enumerate(members):
            sensory_delta, short_term_delta, events, replayed = member.result
            result = self._apply(
                run, member.action.name, sensory_delta, short_term_delta, events, sensory,
                short_term, bases if index else None,
            )
            results.append(result._replace(replayed=True) if replayed else result)
        run.ready.extend(results[1:])
        return results[0]

    def _replay(
        self, run: RunState, record: ActionRecord, sensory: StateMap, short_term: StateMap
    ) -> StepResult:
        """Skip a completed action: re-apply its memory updates and re-send its events."""
        result = self._apply(
            run, record.identity.action, record.sensory, record.short_term, record.events,
            sensory, short_term,
        )
        return result._replace(replayed=True)

    def _apply(
        self,
        run: RunState,
        action: str,
        sensory_delta: MemoryDelta,
        short_term_delta: MemoryDelta,
        events: Sequence[Event],
        sensory: StateMap,
        short_term: StateMap,
        bases: tuple[dict[str, Any], dict[str, Any]] | None = None,
    ) -> StepResult:
        """Apply a completed action's effects (``bases``: a later member of a fan-out
        group, whose deltas are merged with the earlier members', see ``apply_rebased``)."""
        if sensory_delta is not NO_CHANGE:
            if bases is None:
                sensory_delta.apply_to(sensory)
            else:
                apply_rebased(sensory_delta, bases[0], sensory)
            run.sensory_written = run.sensory_written or not sensory_delta.is_empty()
        if short_term_delta is not NO_CHANGE:
            if bases is None:
                short_term_delta.apply_to(short_term)
            else:
                apply_rebased(short_term_delta, bases[1], short_term)
        run.queue.popleft()
        run.steps += 1
        run.attempts = 0
        outputs = []
        for event in events:
            if self._enqueue(run, event):
                outputs.append(event.output)
        return StepResult(
            action, run.steps, sensory_delta, short_term_delta, tuple(events), tuple(outputs)
        )

    def _enqueue(self, run: RunState, event: Event) -> bool:
        """Queue the actions ``event`` triggers in ``run``; whether it is an output."""
        queue = run.queue
        listeners, is_output = self.plan.route(type(event))
        for listener in listeners:
            queue.append(PendingAction(listener.name, event))
        return is_output

    @staticmethod
    def _failure(
        run: RunState,
        action: BoundAction,
        error: Exception,
        context: ActionContext | None = None,
    ) -> Exception:
        """The error to raise for an action that failed with ``error``: an
        ``ActionExecutionError`` (the error policy applies), or the action log's own failure
        when recording one of the action's durable calls failed, whatever the action did
        with that error (the job fails; the action is not to blame)."""
        if context is not None and context.infrastructure_error is not None:
            return context.infrastructure_error
        recorder = context.recorder if context is not None else None
        if recorder is not None and recorder.infrastructure_error is not None:
            return recorder.infrastructure_error
        if isinstance(error, ActionLogError):
            return error
        return ActionExecutionError(
            key=run.key, action=action.name, input=run.input, run_sequence=run.sequence, cause=error
        )


async def _landed() -> None:
    """The rest of an action whose function has returned: resumed (or failed) once its
    background writes have landed (see ``RunEngine._complete``)."""


def _until_call(
    coroutine: Coroutine[Any, Any, Any], value: Any, error: BaseException | None
) -> Future[Any] | None:
    """Drive an action's coroutine until it awaits durable work (its future) or returns
    (None), sending it ``value`` or throwing ``error`` first.

    Raises:
        Exception: what the coroutine raised; an await of anything but a durable call as a
            ``FlinkAgentsError``.
    """
    try:
        while True:
            yielded = coroutine.throw(error) if error is not None else coroutine.send(value)
            error = value = None
            if yielded is None:  # a bare yield, e.g. asyncio.sleep(0): keep going
                continue
            if isinstance(yielded, Future):
                return yielded
            coroutine.close()
            raise FlinkAgentsError(f"{_ONLY_DURABLE_AWAITS}, it awaited {yielded!r}")
    except StopIteration:
        return None
    except RuntimeError as failure:
        if "event loop" not in str(failure):
            raise
        raise FlinkAgentsError(f"{_ONLY_DURABLE_AWAITS} (asyncio said: {failure})") from failure


def _previous_values(delta: MemoryDelta, state: StateMap) -> dict[str, Any]:
    """What the keys ``delta`` changes hold in ``state`` before it is applied (for the
    action log's history of a key; read through the run's cache, and only for actions the
    log records: those that made a durable call, every one with ``action-log-record: all``)."""
    if delta is NO_CHANGE or delta.is_empty():
        return {}
    return {key: state.get(key) for key in (*delta.puts, *delta.removals)}
