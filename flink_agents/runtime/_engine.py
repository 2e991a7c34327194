"""The run engine: executes one run of one key, one action at a time.

Shared by every runner. It holds no per-key state of its own: the runner keeps each key's
``RunState`` and memory maps (dicts locally, Flink keyed state in the dispatcher) and
calls ``start``, then ``step`` until ``finished``, then ``end``. Everything it keeps in
``RunState`` is picklable so a runner can park a run in state between steps.
"""

from __future__ import annotations

import dataclasses
import inspect
import uuid
from collections import deque
from collections.abc import Coroutine, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any, NamedTuple

from flink_agents.api._errors import ActionExecutionError, FlinkAgentsError
from flink_agents.api._events import Event, InputEvent, OutputEvent
from flink_agents.memory import MemoryDelta, StateMap
from flink_agents.plan import BoundAction, BoundPlan
from flink_agents.runtime._context import NO_CHANGE, ActionContext
from flink_agents.runtime._journal import ActionJournal, CallRecorder, input_event_id
from flink_agents.runtime._long_term import LongTermProvider
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime._resources import ResourceCache
from flink_agents.runtime.action_log import (
    ActionLogError,
    ActionRecord,
    UnstorableValueError,
)

_ONLY_DURABLE_AWAITS = (
    "an async action may only await ctx.durable_execute_async(...): runners park the run "
    "between awaits and have no asyncio event loop"
)


@dataclass
class PendingAction:
    """An action to run for an event, queued in the order events were sent."""

    action: str
    event: Event


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

    @property
    def finished(self) -> bool:
        return not self.queue


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


StepOutcome = StepResult | Suspension


class RunEngine:
    """Runs the actions of a bound plan.

    Args:
        plan: the bound plan.
        options: the agent options; the engine reads ``max-steps-per-run`` (actions one run
            may execute before it is stopped as a runaway loop), ``num-async-threads`` (the
            executor of ``durable_execute_async`` calls) and the long-term memory options.
        journal: the action log to record completed actions and durable calls in, and to
            replay them from (None: nothing is recorded).
        long_term_subdirectory: where under the embedded store this engine keeps its
            long-term memory (the Flink dispatcher's subtask).
        job_id: the job this engine runs for, the same in every attempt and subtask (the
            Flink dispatcher's); without an action log, the ids of long-term items derive
            from it, so an action that runs again after a restore overwrites its items.
            None: a fresh id per engine (the local runner).
    """

    def __init__(
        self,
        plan: BoundPlan,
        options: AgentOptions | None = None,
        *,
        journal: ActionJournal | None = None,
        long_term_subdirectory: str | None = None,
        job_id: str | None = None,
    ) -> None:
        self.plan = plan
        self.options = options or AgentOptions()
        self.journal = journal
        self.resources = ResourceCache(plan)
        self.long_term = LongTermProvider(self.options, self.resources, long_term_subdirectory)
        """Long-term memory and knowledge, opened when an action first uses them."""
        # Without an action log, ids of long-term items derive from the job (the subtasks of
        # one job run disjoint keys; a restored attempt repeats them) or, without one, from
        # this engine (another process's runs must not overwrite them; a retry repeats them).
        self._engine_id = job_id or uuid.uuid4().hex
        self.max_steps = self.options.max_steps_per_run
        self._executor: ThreadPoolExecutor | None = None
        self._actions = {a.name: a for a in plan.actions}
        self._configs = {
            a.name: MappingProxyType({**plan.plan.config, **a.config}) for a in plan.actions
        }

    @property
    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self.options.num_async_threads,
                thread_name_prefix="flink-agents-async",
            )
        return self._executor

    def close(self) -> None:
        """Stop the executor (waiting for running calls, which record their results), let
        compactions finish, then write the journal's queued records and close its log.

        Raises:
            ActionLogError: the journal could not write its queued records.
        """
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        try:
            self.long_term.close()
        finally:
            if self.journal is not None:
                self.journal.close()

    def _writer_identity(
        self, key: Any, sequence: int, step: int, action: str
    ) -> tuple[Any, ...]:
        """What long-term items an action writes derive their ids from: its action-log
        identity, or without a log this engine's id (a retry repeats it, another process
        does not) with the key, run, step and action."""
        if self.journal is not None:
            return dataclasses.astuple(self.journal.identity(key, sequence, step, action))
        return (self._engine_id, repr(key), sequence, step, action)

    def _new_recorder(
        self, key: Any, sequence: int, step: int, action: str, retried: bool
    ) -> CallRecorder:
        """The durable-call recorder of one action execution (its recorded calls loaded
        when an earlier execution may have made some).

        Raises:
            ActionLogError: the log failed.
        """
        identity = self.journal.identity(key, sequence, step, action)
        return self.journal.recorder(identity, look_up=retried)

    def start(self, key: Any, sequence: int, record: Any) -> RunState:
        """A new run for ``record``: its ``InputEvent`` queued for the input actions."""
        run = RunState(key=key, sequence=sequence, input=record)
        if self.journal is None:
            event = InputEvent(input=record)
        else:  # a replayed input must carry the same event id
            event = InputEvent(id=input_event_id(self.journal.job, key, sequence), input=record)
        self._enqueue(run, event)
        return run

    def step(self, run: RunState, sensory: StateMap, short_term: StateMap) -> StepOutcome:
        """Run the next queued action.

        Returns a ``StepResult`` when the action completed (its effects are then applied to
        the two maps), or a ``Suspension`` when an ``async def`` action awaits durable work.

        Raises:
            ActionExecutionError: the action raised; nothing it did was applied, and the
                pending action stays at the head of the queue.
        """
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
        new_recorder = None
        journal = self.journal
        if journal is not None:
            # An ActionLogError here is the log's failure, not the action's: it propagates
            # and fails the job (Flink restarts it), whatever the error policy.
            journal.check()
            if journal.may_replay(run.key, run.sequence):
                identity = journal.identity(run.key, run.sequence, run.steps + 1, action.name)
                record = journal.completed(identity)
                if record is not None:
                    return self._replay(run, record, sensory, short_term)
            # Made by the action's first durable call: most actions make none.
            new_recorder = partial(
                self._new_recorder, run.key, run.sequence, run.steps + 1, action.name,
                run.attempts > 0,
            )
        context = ActionContext(
            run.key,
            sensory,
            short_term,
            self.resources,
            self._configs[action.name],
            self.executor,
            new_recorder,
            long_term=self.long_term,
            # The identity of its id minter, computed only if the action writes outside
            # Flink (long-term memory, knowledge, external ids): off the hot path.
            identity=partial(
                self._writer_identity, run.key, run.sequence, run.steps + 1, action.name
            ),
        )
        try:
            result = action.function(pending.event, context)
        except Exception as error:
            raise self._failure(run, action, error, context) from error
        if inspect.iscoroutine(result):
            return self._advance(run, action, context, result, None, None)
        return self._complete(run, action, context)

    def resume(self, run: RunState, suspension: Suspension) -> StepOutcome:
        """Continue a suspended action whose future is done (same maps as its ``step``)."""
        action = self._actions[suspension.action]
        error = suspension.future.exception()
        value = None if error is not None else suspension.future.result()
        return self._advance(run, action, suspension.context, suspension.coroutine, value, error)

    def step_blocking(self, run: RunState, sensory: StateMap, short_term: StateMap) -> StepResult:
        """``step``, waiting on this thread for any durable work (the local runner's way)."""
        return self.complete_blocking(run, self.step(run, sensory, short_term))

    def complete_blocking(self, run: RunState, outcome: StepOutcome) -> StepResult:
        """Wait on this thread for a suspended action's durable work until it completes."""
        while isinstance(outcome, Suspension):
            wait([outcome.future])
            outcome = self.resume(run, outcome)
        return outcome

    def end(self, run: RunState, sensory: StateMap) -> None:
        """Close a run: its sensory memory is cleared (when the run wrote any)."""
        run.queue.clear()
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
            while True:
                yielded = coroutine.throw(error) if error is not None else coroutine.send(value)
                error = value = None
                if yielded is None:  # a bare yield, e.g. asyncio.sleep(0): keep going
                    continue
                if isinstance(yielded, Future):
                    return Suspension(action.name, context, coroutine, yielded)
                coroutine.close()
                raise FlinkAgentsError(f"{_ONLY_DURABLE_AWAITS}, it awaited {yielded!r}")
        except StopIteration:
            return self._complete(run, action, context)
        except RuntimeError as failure:
            if "event loop" not in str(failure):
                raise self._failure(run, action, failure, context) from failure
            explained = FlinkAgentsError(f"{_ONLY_DURABLE_AWAITS} (asyncio said: {failure})")
            raise self._failure(run, action, explained, context) from failure
        except Exception as failure:
            raise self._failure(run, action, failure, context) from failure

    def _complete(self, run: RunState, action: BoundAction, context: ActionContext) -> StepResult:
        sensory_delta, short_term_delta = context.deltas()
        recorder = context.recorder
        if recorder is None and context.wrote_outside and self.journal is not None:
            recorder = context.call_recorder()
        # Only an action that made durable calls or wrote outside Flink state is recorded:
        # one that did neither runs again after a restore, on the restored state and the
        # same events, as cheaply as it ran (docs/consistency.md, "What is recorded").
        if recorder is not None:
            # Logged before the maps change: a crash in between replays the record onto
            # the restored state. A failure of the log (ActionLogError, also when the action
            # swallowed a call's recording failure: ``recorder.calls`` raises it) fails the
            # job with nothing applied; a value the log cannot store is the action's fault.
            try:
                calls = recorder.calls
                self.journal.complete(
                    recorder.identity, sensory_delta, short_term_delta, context.sent, calls
                )
            except UnstorableValueError as error:
                raise self._failure(run, action, error) from error
        sensory, short_term = context.maps
        return self._apply(
            run, action.name, sensory_delta, short_term_delta, context.sent, sensory, short_term
        )

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
    ) -> StepResult:
        if sensory_delta is not NO_CHANGE:
            sensory_delta.apply_to(sensory)
            run.sensory_written = run.sensory_written or not sensory_delta.is_empty()
        if short_term_delta is not NO_CHANGE:
            short_term_delta.apply_to(short_term)
        run.queue.popleft()
        run.steps += 1
        run.attempts = 0
        outputs = []
        for event in events:
            if type(event) is OutputEvent or isinstance(event, OutputEvent):
                outputs.append(event.output)
            self._enqueue(run, event)
        return StepResult(
            action, run.steps, sensory_delta, short_term_delta, tuple(events), tuple(outputs)
        )

    def _enqueue(self, run: RunState, event: Event) -> None:
        queue = run.queue
        for action in self.plan.actions_for(type(event)):
            queue.append(PendingAction(action.name, event))

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
        recorder = context.recorder if context is not None else None
        if recorder is not None and recorder.infrastructure_error is not None:
            return recorder.infrastructure_error
        if isinstance(error, ActionLogError):
            return error
        return ActionExecutionError(
            key=run.key, action=action.name, input=run.input, run_sequence=run.sequence, cause=error
        )
