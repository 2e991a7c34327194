"""The run engine: executes one run of one key, one action at a time.

Shared by every runner. It holds no per-key state of its own: the runner keeps each key's
``RunState`` and memory maps (dicts locally, Flink keyed state in the dispatcher) and asks
the engine to ``begin`` a run for a record, then to ``advance`` it until it is done, and
``end``s it; each answer is an ``Outcome``: ``Done`` (with its outputs), ``Parked`` (on a
suspension, to resume once its durable work is done) or ``Failed`` (with the error).
Everything it keeps in ``RunState`` is picklable so a runner can park a run in state
between steps.

``step``, ``resume`` and ``end`` are the reference path: one action at a time. Plain
actions take a fast lane that must mean the same (``_plain.py``), and ``async def`` actions
listening to one event run side by side (``_fan_out.py``).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Coroutine, Sequence
from concurrent.futures import wait
from typing import TYPE_CHECKING, Any

from flink_agents._ids import input_event_id, new_job_name
from flink_agents.api import (
    ActionExecutionError,
    Event,
    FlinkAgentsError,
    InputEvent,
    ModelPrice,
    ResourceType,
)
from flink_agents.api.configuration import ReadableConfiguration
from flink_agents.memory import MemoryDelta, StateMap, apply_rebased
from flink_agents.plan import BoundAction, BoundPlan
from flink_agents.runtime._call_threads import CallThreads
from flink_agents.runtime._context import NO_CHANGE, ActionContext, ActionServices, Origin
from flink_agents.runtime._engine_services import EngineServices
from flink_agents.runtime._event_log import EventLog
from flink_agents.runtime._fan_out import (
    FanOutGroups,
    GroupSuspension,
    StepOutcome,
    Suspended,
)
from flink_agents.runtime._long_term import LongTermProvider
from flink_agents.runtime._metrics import AgentMetrics
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime._plain import PlainLane
from flink_agents.runtime._resources import ResourceCache

# The run's state types live in ``_run_state``; they are named here too, where earlier
# releases defined them (the runners and tests import them from here).
from flink_agents.runtime._run_state import (
    Done,
    Failed,
    MemberResult,
    Outcome,
    Parked,
    PendingAction,
    RunState,
    StepResult,
    SubRunState,
    Suspension,
    Wake,
    landed,
    until_call,
)
from flink_agents.runtime._scheduling import SCHEDULING, Schedules
from flink_agents.runtime._spend import SpendGuard, budgets_of
from flink_agents.runtime._tracing import Tracer, configured_tracer
from flink_agents.runtime._unvalidated import input_event
from flink_agents.runtime.action_log import (
    ActionLogError,
    ActionRecord,
    UnstorableValueError,
)
from flink_agents.runtime.journal import ActionJournal, Lookup

if TYPE_CHECKING:  # (it imports asyncio: see ``_get_call_loop``)
    from flink_agents.runtime._call_loop import CallLoop

__all__ = [
    "Done",
    "Failed",
    "GroupSuspension",
    "MemberResult",
    "Outcome",
    "Parked",
    "PendingAction",
    "RunEngine",
    "RunState",
    "StepOutcome",
    "StepResult",
    "SubRunState",
    "Suspended",
    "Suspension",
]


def _unpickle_run(*values: Any) -> RunState:
    """A parked run as release 0.1.0 pickled it into Flink state: checkpoints of that release
    name this function, so it stays here (``runtime/_persisted.py`` reads it)."""
    from flink_agents.runtime._persisted import run_of_v010

    return run_of_v010(values)


class RunEngine(EngineServices, PlainLane, FanOutGroups):
    """Runs the actions of a bound plan: the reference path (``start``, ``step``, ``resume``,
    ``end``), with its fast lane for plain actions (``PlainLane``), its fan-out groups
    (``FanOutGroups``) and the threads it starts (``EngineServices``) in modules of their
    own.

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
        tracer: where the spans of runs, actions and durable calls go (None: as the
            ``tracing`` option says).
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
        tracer: Tracer | None = None,
    ) -> None:
        self.plan = plan
        self._parent = parent
        self.resources = ResourceCache(plan)
        self.resources.on_created = self._share_rate_limits
        if parent is not None:
            self.options, self.journal = parent.options, parent.journal
            self.long_term = parent.long_term
            self._engine_id = parent._engine_id
            self.metrics, self.event_log = parent.metrics, parent.event_log
            self.tracer = parent.tracer
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
            if tracer is None:  # a run's trace is the same in every attempt: named by its job
                job = journal.job if journal is not None else self._engine_id
                tracer = configured_tracer(self.options, job, plan.plan.name)
            self.tracer = tracer
            if tracer is not None:
                self.metrics.tracing(tracer)
        self.max_steps = self.options.max_steps_per_run
        self.observed = self.event_log.enabled or self.tracer is not None
        """Whether each action is logged or traced: every action then takes ``step``'s
        path, which times it (the fast lane makes no per-action results)."""
        self.records_all = self.journal is not None and self.options.action_log_record == "all"
        """Whether every completed action is recorded (``action-log-record: all``), not
        only those a restore needs: every action then takes ``step``'s path, which makes
        the deltas a record holds (the fast lane hands its runs to it)."""
        self._executor: CallThreads | None = None
        self._call_loop: CallLoop | None = None
        self._sub_runs: Any = None
        self._actions = {a.name: a for a in plan.actions}
        self._input_actions = plan.actions_for(InputEvent)
        """The actions a run starts with (its ``InputEvent``'s), in plan order."""
        self._configs = {
            a.name: ReadableConfiguration({**plan.plan.config, **a.config}) for a in plan.actions
        }
        self._parallel = frozenset(
            a.name
            for a in plan.actions
            if self.options.parallel_actions and inspect.iscoroutinefunction(a.function)
        )
        """The ``async def`` actions, which run side by side with the ``async def``
        actions next to them listening to the same event (``parallel-actions``)."""
        self.schedules: Schedules | None = None
        """The scheduled events of the key the driver serves (``serve_schedules``; None for
        a sub-agent's engine and until a driver serves one)."""
        self.spend = SpendGuard(
            budgets_of(plan.plan.config, self.options),
            self.options.model_prices,
            self._resource_prices,
            plan.plan.name,
            self.journal.log if self.journal is not None else None,
            self.metrics,
        )
        """What chat model calls spend, against the agent's budgets (``docs/spend.md``)."""
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
            spend=self.spend,
            tracer=self.tracer,
        )

    def _share_rate_limits(self, name: str, resource: Any) -> None:
        """Have a chat model's rate limiter take its places from the action log's store
        (``shared-rate-limits``), under the agent's and the resource's names."""
        share = getattr(getattr(resource, "limiter", None), "share", None)
        if share is None or self.journal is None or not self.options.shared_rate_limits:
            return
        log, scope = self.journal.log, f"{self.plan.plan.name}/{name}"
        share(lambda kind, advance_ms, now_ms: log.pace(f"{scope}/{kind}", advance_ms, now_ms))

    def _resource_prices(self, name: str) -> ModelPrice | None:
        """The ``prices`` of chat model resource ``name`` (made by then: it was called)."""
        return getattr(self.resources.get(name, ResourceType.CHAT_MODEL), "prices", None)

    def serve_schedules(self, schedules: Schedules) -> None:
        """Have the actions' ``schedule`` and ``cancel_scheduled`` act on ``schedules`` (the
        driver's: it points it at the key it serves)."""
        self.schedules = self._services.schedules = schedules

    def listens(self, event_type: type[Event]) -> bool:
        """Whether an action listens to events of ``event_type``."""
        return bool(self.plan.route(event_type)[0])

    def start_due(self, key: Any, sequence: int, event: Event) -> RunState:
        """A new run for a due scheduled event: its listeners queued, as ``start`` queues an
        input's (the event stands for the input in the run's error records)."""
        self.metrics.run_started(1)
        run = RunState(key=key, sequence=sequence, input=event)
        self._enqueue(run, event)
        return run

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

    def start(self, key: Any, sequence: int, record: Any) -> RunState:
        """A new run for ``record``: its ``InputEvent`` queued for the input actions."""
        run = RunState(key=key, sequence=sequence, input=record)
        self._enqueue(run, self._input_event(key, sequence, record))
        return run

    def begin(
        self, key: Any, sequence: int, record: Any, sensory: StateMap, short_term: StateMap
    ) -> Outcome:
        """Begin a run for ``record`` (the maps: its key's memory): through the fast lane
        when its first input action is a plain one (``begin_plain``), else ``start``.

        Returns:
            ``Done`` without a run (the run ended in the lane), or the run with how far it
            got: ``Done`` (it goes on through ``advance``), ``Parked`` or ``Failed``.

        Raises:
            ActionLogError: the action log failed (the job fails).
        """
        inputs = self._input_actions
        if self.plain_lane and (not inputs or not inputs[0].is_async):
            outcome = self.begin_plain(key, sequence, record, sensory, short_term)
            if outcome is not None:
                return outcome
        return Done(0, (), self.start(key, sequence, record))

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

    def advance(
        self,
        run: RunState,
        sensory: StateMap,
        short_term: StateMap,
        resume: Suspended | None = None,
        blocking: bool = False,
    ) -> Outcome:
        """Advance ``run`` (the maps: its memory): resume its ``Suspension`` when given (its
        future done; the same maps as when it parked), else run its plain actions through
        the fast lane and then, unless that ended the run or stopped it, the next action
        through ``step`` (fan-out groups included).

        ``blocking``: wait on this thread for any durable work instead of parking (the drain
        at the end of input, and the local runner's way).

        Returns:
            ``Done`` (the run goes on, or is finished), ``Parked`` or ``Failed``: what the
            fast lane completed before counts in ``steps`` and ``outputs`` either way.

        Raises:
            ActionLogError: the action log failed (the job fails).
        """
        steps, outputs = 0, ()
        try:
            if resume is not None:
                outcome = self.resume(run, resume)
            else:
                outcome = None
                # The lane makes no per-step results: the event log and traces time each action.
                if self.plain_lane and not run.ready and not self.observed:
                    steps, outputs, outcome = self.run_plain(run, sensory, short_term)
                    if outcome is None and not run.queue:
                        return Done(steps, outputs, run)
                    if isinstance(outcome, ActionExecutionError):
                        return Failed(steps, outputs, run, outcome)
                if outcome is None:
                    outcome = self.step(run, sensory, short_term)
            if blocking:
                outcome = self.complete_blocking(run, outcome)
        except ActionExecutionError as error:
            return Failed(steps, outputs, run, error)
        if type(outcome) is StepResult:
            if outputs:
                return Done(steps + 1, [*outputs, *outcome.outputs], run, outcome)
            return Done(steps + 1, outcome.outputs, run, outcome)
        return Parked(steps, outputs, run, outcome)

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
        own = type(run) is RunState
        if not own:
            step, name = self._identity_of(run, step, name)
        context = ActionContext(
            run.key,
            sensory,
            short_term,
            config,
            self._services,
            Origin(run.sequence, step, name),
            # An earlier execution may have recorded calls: one that failed, slept or waited.
            run.attempts > 0 or bool(run.wakes) or bool(run.waits),
        )
        if own:  # (a sub-run's action cannot sleep)
            context.run = run
        if lookup is not None:
            context.lookup = lookup
        if self.tracer is not None:
            context.started_ns = time.time_ns()
            context.attempt, context.parent_span_id = self._span_parent(run)
            context.span_id = self.tracer.action_span_id(
                run.key, run.sequence, step, name, context.attempt
            )
        return context

    def _span_parent(self, run: RunState) -> tuple[int, int]:
        """With tracing on, what an action of ``run`` is traced under: the failed attempts
        before (a sub-run's action: its caller's) and the parent span (its run's root, or
        the sub-run's span)."""
        if type(run) is RunState:
            return run.attempts, self.tracer.run_span_id(run.key, run.sequence)
        return run.parent.attempt, run.span_id

    def trace_action(
        self, run: RunState, context: ActionContext, error: BaseException | None = None
    ) -> None:
        """Trace an action that completed, or failed with ``error`` (with tracing on)."""
        sequence, step, action = context.origin
        self.tracer.action_finished(
            run.key,
            sequence,
            step,
            action,
            context.attempt,
            context.span_id,
            context.parent_span_id,
            context.started_ns,
            () if error is not None else context.sent,
            error,
        )

    def trace_replayed(self, run: RunState, record: ActionRecord) -> None:
        """Trace an action answered from the action log (with tracing on)."""
        identity = record.identity
        attempt, parent = self._span_parent(run)
        self.tracer.action_replayed(
            run.key, run.sequence, identity.step, identity.action, attempt, parent, record.events
        )

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

    def complete_blocking(self, run: RunState, outcome: StepOutcome) -> StepOutcome:
        """Wait on this thread for a suspended action's durable work until it completes, or
        until it sleeps (``ctx.sleep``: returned, for the driver to set the run aside)."""
        while not isinstance(outcome, StepResult):
            if type(outcome.future) is Wake:
                return outcome
            wait([outcome.future])
            outcome = self.resume(run, outcome)
        return outcome

    def finish(self, run: RunState, sensory: StateMap) -> None:
        """Close a run whose queue is done: counted as succeeded (as the fast lane counts
        the runs it ends itself), then ``end``."""
        self.metrics.run_succeeded()
        self.end(run, sensory)

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
            future = until_call(coroutine, value, error)
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
            return Suspension(action.name, context, landed(), landing, storing=True)
        sensory_delta, short_term_delta = self._record(run, action, context)
        sensory, short_term = context.maps
        if self.tracer is not None:
            self.trace_action(run, context)
        return self._apply(
            run, action.name, sensory_delta, short_term_delta, context.sent, sensory, short_term
        )

    def _replay(
        self, run: RunState, record: ActionRecord, sensory: StateMap, short_term: StateMap
    ) -> StepResult:
        """Skip a completed action: re-apply its memory updates and re-send its events."""
        if self.tracer is not None:
            self.trace_replayed(run, record)
        result = self._apply(
            run,
            record.identity.action,
            record.sensory,
            record.short_term,
            record.events,
            sensory,
            short_term,
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
        if run.wakes or run.waits:
            run.wakes, run.waits = (), ()
        outputs = []
        for event in events:
            if type(event) in SCHEDULING:  # for the key's schedules, not for actions
                self.schedules.apply(event)
            elif self._enqueue(run, event):
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

    def _failure(
        self,
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
        if self.tracer is not None and context is not None:
            self.trace_action(run, context, error)
        return ActionExecutionError(
            key=run.key, action=action.name, input=run.input, run_sequence=run.sequence, cause=error
        )


def _previous_values(delta: MemoryDelta, state: StateMap) -> dict[str, Any]:
    """What the keys ``delta`` changes hold in ``state`` before it is applied (for the
    action log's history of a key; read through the run's cache, and only for actions the
    log records: those that made a durable call, every one with ``action-log-record: all``)."""
    if delta is NO_CHANGE or delta.is_empty():
        return {}
    return {key: state.get(key) for key in (*delta.puts, *delta.removals)}
