"""The fast lane: plain synchronous actions run back to back, the specialised twin of
``RunEngine.step``.

Most runs consist of plain actions: synchronous functions that make no durable call and
write nothing outside Flink state. ``PlainLane`` runs them in one loop, each action's
buffered writes going straight into the memory maps and its events straight into the
queue, without the per-step results, records and suspensions of ``step``'s reference path.

The invariant that holds the two equal: for every run, the lane leaves memory, the queue,
the outputs (in order), the metrics and the action log exactly as ``step`` taken one action
at a time would. It achieves that by running only what needs none of ``step``'s machinery
and handing everything else to ``step`` unchanged: it stops before an ``async def`` action,
at the run's step budget, and before any action when the action log may hold the run's
records or is to record every action; an action that turns out to need more (a durable
call, a write outside Flink, a returned coroutine, a scheduled event, a failure) completes
through ``step``'s own path from the state the lane left. ``tests/runtime/test_plain_lane.py``
runs every parity scenario with the lane on and off and compares the results.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from flink_agents._ids import input_event_id
from flink_agents.api import ActionExecutionError, Event
from flink_agents.memory import CachedState, StateMap
from flink_agents.plan import BoundAction
from flink_agents.runtime._context import ActionContext, DirectActionContext, Origin
from flink_agents.runtime._run_state import (
    Done,
    Failed,
    Outcome,
    Parked,
    PendingAction,
    RunState,
    StepResult,
)
from flink_agents.runtime._unvalidated import input_event

if TYPE_CHECKING:
    from flink_agents.runtime._fan_out import Suspended


class _ForStep(NamedTuple):
    """The next action is for ``step`` (an ``async def`` one, or one past the budget)."""


FOR_STEP = _ForStep()


class Raised(NamedTuple):
    """A plain action raised ``error`` (nothing of it applied yet)."""

    context: ActionContext
    error: Exception


class NeedsStep(NamedTuple):
    """A plain action that turned out to need ``step``'s path: it returned a coroutine
    (``result``), made a durable call, wrote outside Flink state, or scheduled (or
    cancelled) an event."""

    context: ActionContext
    result: Any


PlainStop = _ForStep | Raised | NeedsStep


class PlainPass(NamedTuple):
    """What one pass of ``PlainLane._plain_actions`` did over its queue."""

    done: int
    """How many actions completed: the first that many of the queue."""
    outputs: list[Any]
    written: bool
    """Whether they wrote sensory memory."""
    stop: PlainStop | None
    """What stopped the pass (None: the queue is done)."""


class LaneRun(NamedTuple):
    """How far ``PlainLane.run_plain`` took a run."""

    done: int
    """How many actions completed."""
    outputs: Sequence[Any]
    """The outputs they sent, in order."""
    stopped: Suspended | ActionExecutionError | None
    """What stopped the run short of its next action: None (its queue is empty or its head
    is for ``step``), a suspension (to park the run, as ``step`` returns it), or the
    ``ActionExecutionError`` of a failed action (nothing of it applied; the actions before
    it were)."""


NOTHING = LaneRun(0, (), None)


class PlainLane:
    """The fast lane of ``RunEngine`` (a base class of it: these methods use the engine's
    plan, journal, metrics and, for what they hand over, its reference path)."""

    plain_lane: bool = True
    """Whether plain actions take this lane; off, every action takes ``step``'s reference
    path (internal: the differential test runs both ways and compares)."""

    def begin_plain(
        self, key: Any, sequence: int, record: Any, sensory: StateMap, short_term: StateMap
    ) -> Outcome | None:
        """``RunEngine.begin`` for a run whose first input action is a plain one: run its
        plain actions without making the run's state unless something stops them. The
        common run, whose actions are all plain, ends here (its sensory memory cleared,
        counted as succeeded).

        Returns:
            None when the run is for ``step`` from its start (the action log may hold its
            records, or records every action); else ``Done`` without a run (the run ended),
            or the run with how far the lane took it: ``Done`` (it goes on through
            ``advance``), ``Parked`` or ``Failed``.

        Raises:
            ActionLogError: the action log failed (the job fails).
        """
        journal = self.journal
        # ``step`` replays the run's records, or records every action (``records_all``).
        if journal is not None and (self.records_all or journal.may_replay(key, sequence)):
            return None
        # As ``RunEngine._input_event``: counted, and with the log, an id a replay repeats.
        self.metrics.run_started(1)
        if journal is None:
            event = input_event(record)
        else:
            event = input_event(record, input_event_id(journal.job, key, sequence))
        inputs = self._input_actions
        queue = [(inputs[0], event)] if len(inputs) == 1 else [(a, event) for a in inputs]
        done, outputs, written, stop = self._plain_actions(
            key, sequence, queue, 0, False, sensory, short_term
        )
        if stop is None:  # as ``RunEngine.finish``, without the run's state
            self.metrics.run_succeeded()
            if written:
                sensory.clear()
            return Done(done, outputs, None)
        run = RunState(key=key, sequence=sequence, input=record)
        self._caught_up(run, queue, done, written)
        more, sent, outcome = self._plain_stopped(run, stop, sensory, short_term)
        done, outputs = done + more, [*outputs, *sent]
        if outcome is None:
            return Done(done, outputs, run)
        if isinstance(outcome, ActionExecutionError):
            return Failed(done, outputs, run, outcome)
        return Parked(done, outputs, run, outcome)

    def run_plain(self, run: RunState, sensory: StateMap, short_term: StateMap) -> LaneRun:
        """Run the plain actions at the head of the queue back to back, as ``step`` would
        one at a time, for the common run that makes no durable call and writes nothing
        outside Flink state: each action's buffered writes go straight into the maps, its
        events into the queue, without the per-step results ``step`` makes.

        Stops at an ``async def`` action, at the run's step budget, and before any action
        when the action log may hold the run's records (``step`` replays them) or is to
        record every action (``records_all``: ``step`` makes the records); a plain
        action that turns out to need more (a durable call, a write outside Flink, a
        coroutine returned) completes through ``step``'s own path.

        The journal is asked only when the run's next action is a plain one.

        Raises:
            ActionLogError: the action log failed (the job fails).
        """
        if type(run) is not RunState or run.ready or not run.queue:
            return NOTHING
        actions = self._actions
        if actions[run.queue[0].action].is_async:
            return NOTHING
        journal = self.journal
        if journal is not None and (self.records_all or journal.may_replay(run.key, run.sequence)):
            return NOTHING
        queue = [(actions[pending.action], pending.event) for pending in run.queue]
        done, outputs, written, stop = self._plain_actions(
            run.key, run.sequence, queue, run.steps, run.attempts > 0, sensory, short_term
        )
        if done:
            self._caught_up(run, queue, done, written)
        if stop is None:
            return LaneRun(done, outputs, None)
        more, sent, outcome = self._plain_stopped(run, stop, sensory, short_term)
        return LaneRun(done + more, [*outputs, *sent], outcome)

    def _plain_actions(
        self,
        key: Any,
        sequence: int,
        queue: list[tuple[BoundAction, Event]],
        steps: int,
        retried: bool,
        sensory: StateMap,
        short_term: StateMap,
    ) -> PlainPass:
        """The loop of ``run_plain``: run the plain actions of ``queue`` (``(action,
        event)`` pairs, appended to as they send events) from its head, each as ``step``
        would (its buffered writes applied to the maps, its events queued), until the queue
        is done or its next action is for ``step``: an ``async def`` one, one past the step
        budget (``steps`` taken before), one that failed or turned out to need more.
        (``retried``: whether the head action failed before.)

        Returns:
            How many actions completed (the first that many of ``queue``), their outputs,
            whether they wrote sensory memory, and what stopped the loop, for
            ``_plain_stopped``: None (the queue is done), ``FOR_STEP`` (the next action is
            for ``step``), ``Raised`` (an action raised) or ``NeedsStep`` (an action that
            needs ``step``'s path).
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
                return PlainPass(done, outputs, written, FOR_STEP)
            name = action.name
            context = make_context(
                key,
                sensory,
                short_term,
                configs[name],
                services,
                Origin(sequence, steps + done + 1, name),
                retried,
            )
            retried = False
            function = action.function
            try:
                result = function(event, context)
            except Exception as error:
                return PlainPass(done, outputs, written, Raised(context, error))
            except BaseException:
                if type(context) is DirectActionContext:
                    context.rollback()  # (nothing, if it turned into an ordinary one)
                raise
            if (
                (result is not None and inspect.iscoroutine(result))
                or context.recorder is not None
                or context.wrote_outside
                or context.scheduling
                or context.infrastructure_error is not None
            ):
                return PlainPass(done, outputs, written, NeedsStep(context, result))
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
        return PlainPass(done, outputs, written, None)

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
        self, run: RunState, stop: PlainStop, sensory: StateMap, short_term: StateMap
    ) -> LaneRun:
        """Go on from where ``_plain_actions`` stopped on ``run`` (its state brought up to
        date, the stopping action at the head of its queue), as ``run_plain`` returns: a
        failed action's error; an action that needs more completed through ``step``'s own
        path (parked, or followed by the plain actions after it)."""
        if stop is FOR_STEP:
            return NOTHING
        context = stop.context
        action = self._actions[run.queue[0].action]
        if type(stop) is Raised:
            if type(context) is DirectActionContext:
                context.rollback()  # nothing of a failed action is applied
            error = stop.error
            failure = self._failure(run, action, error, context)
            if not isinstance(failure, ActionExecutionError):
                raise failure from error
            failure.__cause__ = error
            return LaneRun(0, (), failure)
        if type(context) is DirectActionContext:
            context.buffered()  # ``step``'s path applies its writes from buffers
        result = stop.result
        try:
            if result is not None and inspect.iscoroutine(result):
                outcome = self._advance(run, action, context, result, None, None)
            else:
                outcome = self._complete(run, action, context)
        except ActionExecutionError as failure:
            return LaneRun(0, (), failure)
        if type(outcome) is not StepResult:
            return LaneRun(0, (), outcome)
        self.metrics.action_completed(outcome.action, len(outcome.events), False)
        done, outputs, stopped = self.run_plain(run, sensory, short_term)
        return LaneRun(1 + done, [*outcome.outputs, *outputs], stopped)
