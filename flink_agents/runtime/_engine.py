"""The run engine: executes one run of one key, one action at a time.

Shared by every runner. It holds no per-key state of its own: the runner keeps each key's
``RunState`` and memory maps (dicts locally, Flink keyed state in the dispatcher) and
calls ``start``, then ``step`` until ``finished``, then ``end``. Everything it keeps in
``RunState`` is picklable so a runner can park a run in state between steps.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from flink_agents.api._errors import ActionExecutionError, FlinkAgentsError
from flink_agents.api._events import Event, InputEvent, OutputEvent
from flink_agents.memory import MemoryDelta, StateMap
from flink_agents.plan import BoundAction, BoundPlan
from flink_agents.runtime._context import ActionContext
from flink_agents.runtime._resources import ResourceCache

DEFAULT_MAX_STEPS = 10_000


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

    @property
    def finished(self) -> bool:
        return not self.queue


@dataclass(frozen=True)
class StepResult:
    """What one completed action did: the unit the action log records."""

    action: str
    step: int
    sensory: MemoryDelta
    short_term: MemoryDelta
    events: tuple[Event, ...]
    outputs: tuple[Any, ...]


class RunEngine:
    """Runs the actions of a bound plan."""

    def __init__(self, plan: BoundPlan, *, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        self.plan = plan
        self.resources = ResourceCache(plan)
        self.max_steps = max_steps
        self._actions = {a.name: a for a in plan.actions}

    def start(self, key: Any, sequence: int, record: Any) -> RunState:
        """A new run for ``record``: its ``InputEvent`` queued for the input actions."""
        run = RunState(key=key, sequence=sequence, input=record)
        self._enqueue(run, InputEvent(input=record))
        return run

    def step(self, run: RunState, sensory: StateMap, short_term: StateMap) -> StepResult:
        """Run the next queued action and apply its effects to the two memory maps.

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
        context = ActionContext(
            run.key, sensory, short_term, self.resources, {**self.plan.plan.config, **action.config}
        )
        try:
            result = action.function(pending.event, context)
            if inspect.iscoroutine(result):
                _run_coroutine(result)
        except Exception as error:
            raise self._failure(run, action, error) from error
        run.queue.popleft()
        run.steps += 1
        sensory_delta = context.sensory_buffer.delta()
        short_term_delta = context.short_term_buffer.delta()
        sensory_delta.apply_to(sensory)
        short_term_delta.apply_to(short_term)
        outputs = []
        for event in context.sent:
            if isinstance(event, OutputEvent):
                outputs.append(event.output)
            self._enqueue(run, event)
        return StepResult(
            action=action.name,
            step=run.steps,
            sensory=sensory_delta,
            short_term=short_term_delta,
            events=tuple(context.sent),
            outputs=tuple(outputs),
        )

    def end(self, run: RunState, sensory: StateMap) -> None:
        """Close a run: its sensory memory is cleared."""
        run.queue.clear()
        sensory.clear()

    def _enqueue(self, run: RunState, event: Event) -> None:
        for action in self.plan.actions_for(type(event)):
            run.queue.append(PendingAction(action.name, event))

    @staticmethod
    def _failure(run: RunState, action: BoundAction, error: Exception) -> ActionExecutionError:
        return ActionExecutionError(
            key=run.key, action=action.name, input=run.input, run_sequence=run.sequence, cause=error
        )


def _run_coroutine(coroutine: Any) -> Any:
    """Run an ``async def`` action to completion, also when the caller is itself inside a
    running event loop (a notebook, an async application): then on a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="flink-agents-action") as pool:
        return pool.submit(asyncio.run, coroutine).result()
