"""Fan-out groups: the ``async def`` actions listening to one event, run side by side.

``RunEngine.step`` hands a group to ``FanOutGroups._start_group`` when the action at the
head of the queue is an ``async def`` one and more such actions are queued right behind it
for the same event (``parallel-actions``). Every member starts up to its first durable call,
so their calls overlap; each sees the memory as it was when the group started (and its own
writes); the group commits in plan order once every member is done, as if the members had
run one after the other, each under the step number it would have had alone.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
from collections.abc import Coroutine
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flink_agents.api import ActionExecutionError
from flink_agents.memory import StateMap, rebase_points
from flink_agents.plan import BoundAction
from flink_agents.runtime._run_state import (
    MemberResult,
    PendingAction,
    RunState,
    StepResult,
    Suspension,
    landed,
    until_call,
)

if TYPE_CHECKING:
    from flink_agents.runtime._context import ActionContext


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
        self.result: MemberResult | None = None
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
"""What a run parks on: one action's durable work, or a fan-out group's."""
StepOutcome = StepResult | Suspended


class FanOutGroups:
    """The fan-out part of ``RunEngine`` (a base class of it: these methods use the engine's
    plan, journal and the steps of its reference path)."""

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
                    if self.tracer is not None:
                        self.trace_replayed(run, record)
                    member.result = MemberResult(
                        record.sensory, record.short_term, record.events, True
                    )
                    continue
            context = member.context = self._context(
                run, member.action, step, sensory, short_term, lookup
            )
            context.run = None  # (a member of a group cannot sleep: ``ActionContext.sleep``)
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
            future = until_call(member.coroutine, value, error)
        except Exception as failure:
            member.coroutine = None
            member.failure = self._member_failure(run, member, failure)
            return
        if future is None and member.context.wrote_outside:
            # Its long-term items still being embedded: wait for them like for a call.
            future = member.context.landing()
            if future is not None:
                member.coroutine = landed()
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
        member.result = MemberResult(sensory_delta, short_term_delta, member.context.sent, False)
        if self.tracer is not None:
            self.trace_action(run, member.context)

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
            rebase_points((result.sensory for result in later), sensory),
            rebase_points((result.short_term for result in later), short_term),
        )
        results = []
        for index, member in enumerate(members):
            sensory_delta, short_term_delta, events, replayed = member.result
            result = self._apply(
                run,
                member.action.name,
                sensory_delta,
                short_term_delta,
                events,
                sensory,
                short_term,
                bases if index else None,
            )
            results.append(result._replace(replayed=True) if replayed else result)
        run.ready.extend(results[1:])
        return results[0]
