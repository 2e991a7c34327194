"""``RunnerContext``: what an action can do. Each runner implements it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from flink_agents.api._errors import FlinkAgentsError
from flink_agents.api._events import Event
from flink_agents.api._knowledge import Knowledge
from flink_agents.api._long_term import LongTermMemory
from flink_agents.api._memory import MemoryObject
from flink_agents.api._metrics import MetricGroup
from flink_agents.api._resources import ResourceType
from flink_agents.api._scheduling import EventScheduled

T = TypeVar("T")
E = TypeVar("E", bound=Event)


class RunnerContext(ABC):
    """The context handed to an action, valid only while that action runs.

    Everything an action does through it is buffered: sent events and memory writes take
    effect when the action returns, and are discarded if it raises.
    """

    @property
    @abstractmethod
    def key(self) -> Any:
        """The key of the run."""

    @abstractmethod
    def send_event(self, event: Event) -> None:
        """Queue ``event`` for the actions listening to its type; an ``OutputEvent``'s
        payload also becomes an output record."""

    def schedule(
        self, event: Event, *, delay: timedelta | None = None, at: datetime | None = None
    ) -> str:
        """Schedule ``event`` for this run's key, after ``delay`` or at the time ``at`` (one
        of the two): when it is due, it starts a run of the key as an input would (the
        actions listening to its type run, with the key's short-term memory as it is
        then). Returns its handle, for ``cancel_scheduled``.

        Like ``send_event``, it takes effect when the action returns (not if it raises).
        The handle is the same when the action runs again after a failure, so the event is
        scheduled once. Scheduled events are kept in Flink state and fire once, after a
        failure or a restore from a savepoint too; at the end of a bounded input, the
        key's pending ones fire (see ``docs/waiting.md``).

        Raises:
            FlinkAgentsError: neither or both of ``delay`` and ``at``, a negative delay, an
                ``InputEvent`` or ``OutputEvent``, an event no action listens to, or a
                runner without timers (a sub-agent's action schedules through its caller).
        """
        raise FlinkAgentsError("this runner has no timers (run on the local or Flink runner)")

    def cancel_scheduled(self, handle: str) -> bool:
        """Cancel the key's scheduled event ``handle`` (when the action returns, as
        ``schedule``); whether it was pending (False: unknown, fired or cancelled)."""
        raise FlinkAgentsError("this runner has no timers (run on the local or Flink runner)")

    def scheduled(self) -> list[EventScheduled]:
        """The key's pending scheduled events, soonest first (with this action's own
        schedules and cancellations)."""
        raise FlinkAgentsError("this runner has no timers (run on the local or Flink runner)")

    def sleep(self, delay: timedelta) -> Awaitable[None]:
        """``await ctx.sleep(delay)`` in an ``async def`` action: its run waits ``delay``
        (Flink's processing time; the local runner's simulated clock) without holding up
        its key: the key's later inputs run meanwhile. The run, its sensory memory and the
        time it wakes are kept in Flink state, so it wakes once, after a failure or a
        restore from a savepoint too. When it wakes, the action runs again from its start
        (its durable calls answered from the action log, this sleep at once), with the
        key's short-term memory as it is then (see ``docs/waiting.md``).

        Raises:
            FlinkAgentsError: a negative delay, a sub-agent's action, an action of a fan-out
                group, or a runner without timers.
        """
        raise FlinkAgentsError("this runner has no timers (run on the local or Flink runner)")

    def wait_for(
        self,
        event_type: type[E],
        timeout: timedelta | None = None,
        *,
        raise_on_timeout: bool = False,
    ) -> Awaitable[E | None]:
        """``reply = await ctx.wait_for(Approval, timeout=timedelta(hours=4))`` in an
        ``async def`` action: its run waits until a signal of ``event_type`` (or of a
        subclass) arrives for the same key (``with_signals`` on the agent's input; the local
        runner's ``signal``), and returns it; after ``timeout`` (None: no limit) it returns
        None, or raises ``WaitTimedOut`` with ``raise_on_timeout``. As ``sleep``, the run is
        set aside meanwhile (the key's later inputs run), kept in Flink state, and its
        action runs again from its start when the signal or the timeout comes, this wait then
        answering at once. The answer is recorded in the action log as a durable call, so a
        run restored after a failure gets the same one. One key's waits for one type are
        answered in the order they began (``docs/waiting.md``).

        Raises:
            FlinkAgentsError: ``event_type`` is not an ``Event`` class, a negative timeout,
                a sub-agent's action, an action of a fan-out group, or a runner without
                timers.
        """
        raise FlinkAgentsError("this runner has no timers (run on the local or Flink runner)")

    @property
    @abstractmethod
    def sensory_memory(self) -> MemoryObject:
        """Memory of this run only, cleared by the framework when the run ends."""

    @property
    @abstractmethod
    def short_term_memory(self) -> MemoryObject:
        """Memory of this key, kept across its runs and invisible to other keys."""

    def get_short_term_memory(self) -> MemoryObject:
        """The root of short-term memory (seed 000's spelling of ``short_term_memory``)."""
        return self.short_term_memory

    def get_sensory_memory(self) -> MemoryObject:
        """The root of sensory memory."""
        return self.sensory_memory

    @property
    def long_term_memory(self) -> LongTermMemory:
        """The memory sets of this key (seed 001): capacity-managed, searchable by meaning.

        Writes go straight to the vector store, not through the action's buffer; an action
        that runs again (a retry, a replay) overwrites the items it wrote instead of adding
        them twice.

        Raises:
            FlinkAgentsError: this runner has no long-term memory configured.
        """
        raise FlinkAgentsError(
            "no long-term memory is configured for this runner (set the agent option "
            "'long-term-memory-store', or run on the local or Flink runner)"
        )

    @property
    def knowledge(self) -> Knowledge:
        """Knowledge sets shared by every key and job (seed 001).

        Raises:
            FlinkAgentsError: this runner has no knowledge store configured.
        """
        raise FlinkAgentsError(
            "no knowledge store is configured for this runner (set the agent option "
            "'long-term-memory-store', or run on the local or Flink runner)"
        )

    @property
    def agent_metric_group(self) -> MetricGroup:
        """The agent's metric group: custom metrics shared by every action of this agent
        (on Flink, per operator subtask, beside the built-in metrics).

        Raises:
            FlinkAgentsError: this runner reports no metrics.
        """
        raise FlinkAgentsError("this runner reports no metrics (run on the local or Flink runner)")

    @property
    def action_metric_group(self) -> MetricGroup:
        """The metric group of the action running now (``action.<name>`` under the agent's
        group): custom metrics per action.

        Raises:
            FlinkAgentsError: this runner reports no metrics.
        """
        raise FlinkAgentsError("this runner reports no metrics (run on the local or Flink runner)")

    def external_id(self) -> str:
        """A deterministic id (a UUID string) for the next write this action makes outside
        Flink: a row, a message, a file.

        The n-th call of an execution returns the n-th id of the action's identity (job,
        key, run, step, action), so an action that runs again after a failure (a retry, a
        replay after a restore) gets the same ids in the same order and overwrites its
        earlier writes instead of duplicating them. Long-term memory and knowledge draw
        their item ids from the same minter, under scopes of their own.
        """
        raise FlinkAgentsError("this runner mints no external ids")

    @abstractmethod
    def get_resource(self, name: str, type: ResourceType | None = None) -> Any:
        """The resource declared under ``name``, created on first use.

        Raises:
            FlinkAgentsError: no such resource, or it is not of ``type``.
        """

    @property
    @abstractmethod
    def config(self) -> Mapping[str, Any]:
        """The agent's options from its plan, overlaid with the action's own (read-only; a
        ``ReadableConfiguration``, with typed getters such as ``get_int``)."""

    @property
    def action_config(self) -> Mapping[str, Any]:
        """Apache Flink Agents' name for ``config`` (which includes the action's own)."""
        return self.config

    def get_action_config_value(self, key: str) -> Any:
        """``config.get(key)``, by Apache Flink Agents' name."""
        return self.config.get(key)

    def close(self) -> None:  # noqa: B027 (nothing to close: it is optional)
        """Nothing to do: the runner closes what it created (Apache Flink Agents' agents
        may call it)."""

    @abstractmethod
    def durable_execute(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call ``function(*args, **kwargs)`` now, on this thread, and return its result.

        Wrap calls with effects outside the agent (an LLM, a tool, an HTTP request) in it:
        they are the calls whose results the action log records so that a recovered job
        does not pay for them twice. An ``async def`` function (an async client's method)
        runs on the runner's event loop, shared by all such calls, and this thread waits
        for it; a plain function that returns a coroutine has it run to its end on an event
        loop of its own, as a tool's is. Either way the value is returned and recorded.
        """

    def run_agent(
        self, agent: str, input: Any, *, share_short_term_memory: bool | None = None
    ) -> list[Any]:
        """Run the sub-agent resource ``agent`` (a ``SubAgent``) for this key on
        ``input``, as a step of this action, and return its outputs in order (they do not
        reach the job's output).

        The sub-run has its own sensory memory; its short-term memory is this action's
        (``share_short_term_memory=True``) or its own for this key (False); None: as the
        resource says. Its memory writes commit with this action. Its actions' durable
        calls are recorded as theirs: after a restore, its completed actions are replayed
        and no recorded call is made again. A sub-agent's failure is this action's
        (``ActionExecutionError`` naming the sub-agent's action as the cause).

        This waits on the operator's thread for the sub-agent's durable calls; in an
        ``async def`` action, ``await ctx.run_agent_async(...)`` lets other keys go on.
        """
        raise NotImplementedError

    def run_agent_async(
        self, agent: str, input: Any, *, share_short_term_memory: bool | None = None
    ) -> Awaitable[list[Any]]:
        """``run_agent`` for ``async def`` actions: the run is parked while the sub-agent's
        durable calls run, like ``durable_execute_async``."""
        raise NotImplementedError

    @abstractmethod
    def durable_execute_async(
        self, function: Callable[..., T], *args: Any, **kwargs: Any
    ) -> Awaitable[T]:
        """In an ``async def`` action: ``await`` it to run ``function`` on the runner's
        bounded executor while the runner goes on with other keys. An ``async def``
        function (an async client's method) runs instead on the runner's event loop, one
        for all such calls, and holds no thread of the executor; it must not block.

        It is the only thing an async action may await (besides ``asyncio.sleep(0)``):
        the run is parked between awaits and resumed on the thread that owns its memory.
        """
