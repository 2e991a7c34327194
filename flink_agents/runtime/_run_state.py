"""What a run is made of, between the steps the engine takes on it.

``RunState`` (kept by the runner, parked in Flink state between steps: ``_persisted.py``
encodes it by field name), the actions it queues, the results of completed actions, and a
``Suspension``: an ``async def`` action waiting on durable work, with the driving of its
coroutine to the next durable call (``until_call``); and the ``Outcome`` of advancing a
run, the one value the engine hands the driver (``Done``, ``Parked`` or ``Failed``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Coroutine, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from flink_agents.api import ActionExecutionError, Event, FlinkAgentsError
from flink_agents.memory import MemoryDelta

if TYPE_CHECKING:
    from flink_agents.runtime._context import ActionContext
    from flink_agents.runtime._fan_out import GroupSuspension

ONLY_DURABLE_AWAITS = (
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
    settled: dict[int, MemberResult] | None = None
    """The members of a failed fan-out group at the head of the queue that completed, by
    position: a retry runs only the others again (they still commit in plan order)."""
    ready: list[StepResult] = field(default_factory=list)
    """Results of a fan-out group's later members, already applied, that ``step``
    returns one at a time (empty whenever the run is parked or checkpointed)."""
    wakes: tuple[int, ...] = ()
    """When each ``ctx.sleep`` of the action at the head of the queue ends (ms, in call
    order): an execution of the action that runs again sleeps until the same times, so a
    run set aside by a sleep returns from it at once when it wakes. Cleared when the action
    completes."""
    waits: tuple[Waited, ...] = ()
    """Each ``ctx.wait_for`` of the action at the head of the queue, in call order: what it
    waits for, until when, and the signal that answered it, once one did. As ``wakes``: an
    execution that runs again gets the same answers. Cleared when the action completes."""

    @property
    def finished(self) -> bool:
        return not self.queue and not self.ready


class Waited(NamedTuple):
    """One ``ctx.wait_for`` of a run's head action (``RunState.waits``)."""

    signal: type[Event]
    """The event type it waits for (a signal of it, or of a subclass, answers it)."""
    until_ms: int | None
    """When it times out (None: never)."""
    reply: Event | None = None
    """The signal that answered it (None: none yet, or it timed out)."""


class MemberResult(NamedTuple):
    """What a completed member of a fan-out group did, kept until the group commits (and in
    ``RunState.settled`` while a failed group waits for its retry)."""

    sensory: MemoryDelta
    short_term: MemoryDelta
    events: Sequence[Event]
    replayed: bool
    """Whether it was taken from the action log rather than run."""


@dataclass
class SubRunState(RunState):
    """A sub-run: another agent's run inside an action (``ctx.run_agent``). Its actions are
    recorded under the calling action's run and step (see ``runtime/_sub_run.py``)."""

    parent: Any = None
    """The calling action's context (sub-runs live in its coroutine, never in state)."""
    parent_step: int = 0
    namespace: str = ""
    """The prefix of its actions' names in the action log."""
    span_id: int = 0
    """With tracing on: the sub-run's span, its actions' parent."""


class StepResult(NamedTuple):
    """What one completed action did: the unit the action log records. (A named tuple:
    one is made per step.)"""

    action: str
    step: int
    sensory: MemoryDelta
    short_term: MemoryDelta
    events: tuple[Event, ...]
    outputs: tuple[Any, ...]
    replayed: bool = False
    """Whether the action was skipped and its effects re-applied from the action log."""


class Done(NamedTuple):
    """The engine advanced a run: ``steps`` more actions completed, sending ``outputs`` (in
    order). The run goes on with its next action, or has ended (``run.finished``)."""

    steps: int
    outputs: Sequence[Any]
    run: RunState | None
    """None: a new run that ended without its state ever being made (``begin``; it is
    already counted as succeeded and its sensory memory cleared)."""
    result: StepResult | None = None
    """The last action's result when the reference path took it (for the event log and
    the metrics); None when only the fast lane ran."""


class Parked(NamedTuple):
    """The engine advanced a run (``steps``, ``outputs`` as for ``Done``) until an action
    awaited durable work: the runner parks the run until ``suspension.future`` is done,
    then advances it with the suspension to resume."""

    steps: int
    outputs: Sequence[Any]
    run: RunState
    suspension: Suspension | GroupSuspension


class Failed(NamedTuple):
    """The engine advanced a run (``steps``, ``outputs`` as for ``Done``) until an action
    raised: nothing of that action is applied and it stays at the head of the queue; the
    runner's error policy decides what follows."""

    steps: int
    outputs: Sequence[Any]
    run: RunState
    error: ActionExecutionError


Outcome = Done | Parked | Failed
"""What ``RunEngine.begin`` and ``RunEngine.advance`` return (the driver matches on it)."""


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


class Wake(Future):
    """What ``ctx.sleep`` and ``ctx.wait_for`` await: never done by a call. The driver sets
    the run aside (``KeyDriver._set_aside``) rather than parking it: until ``wake_ms``
    (None: no time), or until a signal of type ``signal`` arrives for its key."""

    def __init__(self, wake_ms: int | None, signal: type[Event] | None = None) -> None:
        super().__init__()
        self.wake_ms = wake_ms
        self.signal = signal


async def landed() -> None:
    """The rest of an action whose function has returned: resumed (or failed) once its
    background writes have landed (see ``RunEngine._complete``)."""


def until_call(
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
            raise FlinkAgentsError(f"{ONLY_DURABLE_AWAITS}, it awaited {yielded!r}")
    except StopIteration:
        return None
    except RuntimeError as failure:
        if "event loop" not in str(failure):
            raise
        raise FlinkAgentsError(f"{ONLY_DURABLE_AWAITS} (asyncio said: {failure})") from failure
