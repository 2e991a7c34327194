"""Sub-runs: an action runs another agent's plan for its key, as one step of its own.

``SubRuns`` belongs to an engine and makes one engine per sub-agent resource (sharing the
caller's executor, long-term memory and action journal). ``SubRuns.run`` is a coroutine
the calling action awaits: it drives the sub-run's actions one step at a time and, when one
awaits a durable call, hands the call's future up to the caller's engine, which parks the
calling run like any other; the sub-run goes on when the caller resumes.

Identity: the sub-run's actions are recorded in the caller's journal under the calling
action's run and step, named ``<calling action>/<resource>#<n>/<step>:<action>`` (``n``
counts the action's sub-runs), so a restore replays the completed ones and answers the
interrupted one's calls from the log, like any action's.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from flink_agents._ids import sub_run_input_id
from flink_agents.api import FlinkAgentsError, InputEvent, SubAgent
from flink_agents.api.internal import import_ref
from flink_agents.memory import DictState, StateMap
from flink_agents.plan import bind_plan, to_plan
from flink_agents.runtime._engine import RunEngine, StepResult, SubRunState
from flink_agents.runtime.action_log import ActionLogError

if TYPE_CHECKING:
    from flink_agents.runtime._context import ActionContext

_PLAN_SUFFIXES = (".yaml", ".yml", ".json")


class PrefixedState:
    """A ``StateMap`` view of the keys of another map under a prefix: a sub-agent's own
    short-term memory, kept in its caller's map but outside its caller's memory tree (no
    marker of the caller's lists these keys)."""

    __slots__ = ("_base", "_prefix")

    def __init__(self, base: StateMap, prefix: str) -> None:
        self._base = base
        self._prefix = prefix

    def get(self, key: str) -> Any:
        return self._base.get(self._prefix + key)

    def put(self, key: str, value: Any) -> None:
        self._base.put(self._prefix + key, value)

    def remove(self, key: str) -> None:
        self._base.remove(self._prefix + key)

    def contains(self, key: str) -> bool:
        return self._base.contains(self._prefix + key)

    def clear(self) -> None:
        raise FlinkAgentsError("a sub-agent's short-term memory cannot be cleared as a whole")


class SubRuns:
    """The sub-agent engines of one engine, made on first use, one per resource."""

    def __init__(self, parent: RunEngine) -> None:
        self._parent = parent
        self._engines: dict[int, RunEngine] = {}

    def engine(self, sub: SubAgent) -> RunEngine:
        engine = self._engines.get(id(sub))
        if engine is None:
            engine = RunEngine(bind_plan(_plan_of(sub)), parent=self._parent)
            self._engines[id(sub)] = engine
        return engine

    async def run(
        self, caller: ActionContext, name: str, sub: SubAgent, record: Any, share: bool, call: int
    ) -> list[Any]:
        """Run ``sub`` on ``record`` for the caller's key; its outputs, in order."""
        engine = self.engine(sub)
        sequence, step, action = caller.origin
        run = SubRunState(
            key=caller.key,
            sequence=sequence,
            input=record,
            parent=caller,
            parent_step=step,
            namespace=f"{action}/{name}#{call}/",
        )
        if engine.journal is None:
            event = InputEvent(input=record)
        else:  # a replayed sub-run's input keeps its id
            event_id = sub_run_input_id(
                engine.journal.job, caller.key, sequence, step, run.namespace
            )
            event = InputEvent(id=event_id, input=record)
        engine.enqueue(run, event)
        engine.metrics.event_processed()  # the sub-run's input event
        sensory = DictState()
        buffer = caller.short_term_buffer()
        short_term = buffer if share else PrefixedState(buffer, f"\x1fagent:{name}\x1f")
        outputs: list[Any] = []
        tracer = engine.tracer
        started = 0
        if tracer is not None:
            started = time.time_ns()
            run.span_id = tracer.sub_run_span_id(
                caller.key, sequence, run.namespace, caller.attempt
            )
        try:
            while not run.finished:
                outcome = engine.step(run, sensory, short_term)
                while not isinstance(outcome, StepResult):
                    await _Waiting(outcome.future)
                    outcome = engine.resume(run, outcome)
                # The caller's metrics: a sub-agent's actions count there too.
                engine.metrics.action_completed(
                    outcome.action, len(outcome.events), outcome.replayed
                )
                outputs.extend(outcome.outputs)
        except ActionLogError as error:  # the log's failure, not the action's
            caller.infrastructure_error = error
            raise
        except Exception as error:  # (a crash exports nothing: a restore runs it again)
            if tracer is not None:
                self._trace(caller, run, name, started, error)
            raise
        engine.end(run, sensory)
        if tracer is not None:
            self._trace(caller, run, name, started)
        return outputs

    def _trace(
        self,
        caller: ActionContext,
        run: SubRunState,
        name: str,
        started: int,
        error: BaseException | None = None,
    ) -> None:
        """Export the sub-run's span (with tracing on), a child of the calling action's."""
        self._parent.tracer.sub_run_finished(
            run.key,
            run.sequence,
            run.parent_step,
            run.namespace,
            name,
            run.span_id,
            caller.span_id,
            started,
            error,
        )

    def close(self) -> None:
        """Close the sub-agents' resources (their executor, store and log are the caller's)."""
        for engine in self._engines.values():
            engine.close()


class _Waiting:
    """Awaiting it hands a sub-run's future to the caller's engine (which parks the calling
    run until it is done); the sub-run's engine then reads the outcome from the future."""

    __slots__ = ("future",)

    def __init__(self, future: Future[Any]) -> None:
        self.future = future

    def __await__(self) -> Generator[Future[Any], Any, None]:
        try:
            yield self.future
        except Exception as error:  # the call's own failure, thrown in by the caller's engine
            if not (self.future.done() and self.future.exception() is error):
                raise


def _plan_of(sub: SubAgent) -> Any:
    """The sub-agent's plan: from a plan file, or from the Agent its reference names."""
    agent = sub.agent
    if agent.endswith(_PLAN_SUFFIXES):
        return to_plan(agent)
    return to_plan(import_ref(agent))
