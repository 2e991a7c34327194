"""The ``RunnerContext`` given to one action invocation, with its buffered effects."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping, Sequence
from concurrent.futures import Executor, Future, InvalidStateError, wait
from contextlib import suppress
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from flink_agents._ids import durable_name, function_id, scheduled_handle
from flink_agents.api import (
    Event,
    EventScheduled,
    FlinkAgentsError,
    InputEvent,
    Knowledge,
    LongTermMemory,
    MemoryObject,
    MemoryType,
    MetricGroup,
    OutputEvent,
    ResourceType,
    RunnerContext,
    ScheduleCancelled,
    SubAgent,
    WaitTimedOut,
)
from flink_agents.api.internal import awaited
from flink_agents.memory import (
    BufferedState,
    CachedState,
    FlatMemory,
    IdMinter,
    MemoryDelta,
    StateMap,
)
from flink_agents.runtime._long_term import LongTermProvider
from flink_agents.runtime._metrics import AgentMetrics
from flink_agents.runtime._resources import ResourceCache
from flink_agents.runtime._run_state import RunState, Waited, Wake
from flink_agents.runtime._scheduling import SCHEDULING, Schedules
from flink_agents.runtime._spend import SpendGuard
from flink_agents.runtime._tracing import CallSpan, Tracer
from flink_agents.runtime.journal import CallFuture, CallRecorder, CallSlot, Lookup

if TYPE_CHECKING:  # (it imports asyncio: a Flink operator's start need not)
    from flink_agents.runtime._call_loop import CallLoop

T = TypeVar("T")
E = TypeVar("E", bound=Event)
NO_CHANGE = MemoryDelta()
"""The delta of a memory tier an action never touched (shared: deltas are never mutated)."""


_SENDABLE: dict[type, bool] = {}
"""The event types ``send_event`` has accepted: a dict lookup per event sent, rather than
two ``isinstance`` checks through pydantic's ABC metaclass per event, which cost far more
with the CPU caches emptied between records, as the JVM's work between two records of a
Flink task empties them (measured in ``bench/RESULTS.md``). (A dict, not a set: see
``IMMUTABLE``.)"""


def _check_sendable(event: Any) -> None:
    """Raise unless an action may send ``event``; remember its type if it may."""
    if not isinstance(event, Event):
        raise TypeError(f"send_event takes an Event, got {type(event).__name__}")
    if isinstance(event, InputEvent):
        raise FlinkAgentsError("actions cannot send an InputEvent: the framework creates it")
    if isinstance(event, SCHEDULING):
        raise FlinkAgentsError(
            f"actions cannot send a {type(event).__name__}: ctx.schedule and "
            "ctx.cancel_scheduled make it"
        )
    _SENDABLE[type(event)] = True


class Origin(NamedTuple):
    """Where an execution of an action is recorded: the run, the step and the action."""

    sequence: int
    """The run's sequence number for its key."""
    step: int
    """The step in the run (for a sub-run's action: as ``RunEngine._identity_of`` gives it)."""
    action: str
    """The action's name (for a sub-run's action: prefixed as ``_identity_of`` gives it)."""


NO_ORIGIN = Origin(0, 0, "")


class ActionServices:
    """What every action context of one engine shares, bundled once per engine: a context
    is made per action execution, on the hot path, and sets a few fields, not a dozen.

    ``recorder`` makes an execution's call recorder (None: no action log) and ``identity``
    the identity of its writes outside Flink, both from the key, the context's origin and
    what the journal answered for it (``ActionContext.lookup``; the recorder also from
    ``retried``); ``executor`` returns the executor of durable
    calls (made on first use) and ``call_loop`` the event loop of ``async def`` ones;
    ``sub_runs`` returns the runner of ``ctx.run_agent``; ``schedules`` holds the scheduled
    events of the key served (None: a sub-agent's engine, whose actions cannot schedule)."""

    __slots__ = (
        "call_loop",
        "executor",
        "identity",
        "long_term",
        "metrics",
        "recorder",
        "resources",
        "schedules",
        "spend",
        "sub_runs",
        "tracer",
    )

    def __init__(
        self,
        resources: ResourceCache,
        executor: Callable[[], Executor],
        recorder: Callable[[Any, int, int, str, bool, Lookup | None], CallRecorder] | None = None,
        *,
        long_term: LongTermProvider | None = None,
        identity: Callable[[Any, int, int, str, Lookup | None], Sequence[str | int]] | None = None,
        sub_runs: Callable[[], Any] | None = None,
        metrics: AgentMetrics | None = None,
        call_loop: Callable[[], CallLoop] | None = None,
        schedules: Schedules | None = None,
        spend: SpendGuard | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self.resources = resources
        self.tracer = tracer
        self.spend = spend
        self.schedules = schedules
        self.executor = executor
        self.call_loop = call_loop
        self.recorder = recorder
        self.long_term = long_term
        self.identity = identity
        self.sub_runs = sub_runs
        self.metrics = metrics


class ActionContext(RunnerContext):
    """Buffers one action's memory writes and events until the engine commits them.

    One is made per action execution, on the hot path. What the engine reads after every
    execution is set on the instance by ``__init__``, even when empty, so every context
    has the same attributes from birth; what only some executions use (memory buffers,
    sub-runs) stays a class-level default, set on the instance when used."""

    last_call_replayed = False
    """Whether the latest durable call was answered from the action log (built-in
    actions count a model's tokens only when it was really called)."""
    _sub_calls = 0
    lookup: Lookup | None = None
    """What the action journal answered for this execution (``ActionJournal.lookup``),
    when the engine asked before running it: its recorder and write identity start from
    it. None: not asked (no log, or the plain lane: asked when first needed)."""
    _sensory_buffer: BufferedState | None = None
    _short_term_buffer: BufferedState | None = None
    scheduling = False
    """Whether this execution scheduled or cancelled an event (``sent`` holds the
    ``EventScheduled`` / ``ScheduleCancelled``): its effects are applied by ``step``'s path,
    which hands them to the key's ``Schedules``."""
    _schedules_made = 0
    _scheduled_from_ms: int | None = None
    run: RunState | None = None
    """The run this execution is a step of, when its action may sleep (``sleep``): set by
    the engine for an action of the agent's own run, not a sub-run's or a fan-out
    member's."""
    _sleeps = 0
    _waits = 0
    started_ns = 0
    """With tracing on: when this execution started (its action's span starts then)."""
    attempt = 0
    """With tracing on: the failed attempts of this action before this execution (a
    sub-run's action: its caller's)."""
    span_id = 0
    """With tracing on: this execution's span."""
    parent_span_id = 0
    """With tracing on: the span of its run, or of its sub-run."""

    def __init__(
        self,
        key: Any,
        sensory: StateMap,
        short_term: StateMap,
        config: Mapping[str, Any],
        services: ActionServices,
        origin: Origin = NO_ORIGIN,
        retried: bool = False,
    ) -> None:
        """``origin``: the run sequence, step and action name this execution is recorded
        under; ``retried``: whether an earlier attempt of this execution may have recorded
        calls (both for ``services``' recorder and write identity, made only when needed)."""
        self._key = key
        self._sensory = sensory
        self._short_term = short_term
        self._config = config
        self._services = services
        self.origin = origin
        """Run sequence, step and action name this execution is recorded under."""
        self._retried = retried
        self.recorder: CallRecorder | None = None
        """Records durable calls in the action log: made by the first durable call (None:
        no call yet, or no log and calls just run)."""
        self.sent: list[Event] = []
        """The events sent so far."""
        self.infrastructure_error: Exception | None = None
        """A failure of the action log met by a sub-run of this action: the job fails,
        even if the action caught it."""
        self.wrote_outside = False
        """Whether this execution minted ids for writes outside Flink state (long-term
        memory, knowledge, external ids)."""
        self._ids: IdMinter | None = None
        self._sensory_root: MemoryObject | None = None
        self._short_term_root: MemoryObject | None = None

    def call_recorder(self) -> CallRecorder | None:
        """The recorder of this execution's durable calls, made on first use (None without
        an action log). Made lazily: an action that calls nothing never needs one."""
        if self.recorder is None and self._services.recorder is not None:
            self.recorder = self._services.recorder(
                self._key, *self.origin, self._retried, self.lookup
            )
        return self.recorder

    def landing(self) -> Future[None] | None:
        """None once everything this execution wrote outside Flink state is stored; else a
        future done when it is (items whose embedding is batched are written in the
        background: the action completes only after them)."""
        return None if self._ids is None else self._ids.landing()

    @property
    def ids(self) -> IdMinter:
        """Mints the ids of everything this execution writes outside Flink state (one
        minter per execution; its identity is computed on first use)."""
        if self._ids is None:
            identity = self._services.identity
            if identity is not None:
                identity = partial(identity, self._key, *self.origin, self.lookup)
            self._ids = IdMinter(identity)
            self.wrote_outside = True
        return self._ids

    @property
    def key(self) -> Any:
        return self._key

    def send_event(self, event: Event) -> None:
        if type(event) not in _SENDABLE:
            _check_sendable(event)
        self.sent.append(event)

    def schedule(
        self, event: Event, *, delay: timedelta | None = None, at: datetime | None = None
    ) -> str:
        schedules = self._services.schedules
        if schedules is None:
            raise FlinkAgentsError(
                "a sub-agent's action cannot schedule events: schedule them from the calling "
                "agent's action"
            )
        if not isinstance(event, Event):
            raise TypeError(f"schedule takes an Event, got {type(event).__name__}")
        if isinstance(event, InputEvent | OutputEvent | EventScheduled | ScheduleCancelled):
            raise FlinkAgentsError(
                f"an action cannot schedule a {type(event).__name__}: schedule an event of "
                "your own, whose action sends what is due"
            )
        if not schedules.listened(type(event)):
            raise FlinkAgentsError(
                f"no action listens to {type(event).__name__}: a scheduled event starts a run "
                "of the actions listening to its type"
            )
        if (delay is None) == (at is None):
            raise FlinkAgentsError(
                "schedule takes one of delay= (a timedelta) and at= (a datetime)"
            )
        if delay is not None:
            if delay < timedelta(0):
                raise FlinkAgentsError(f"schedule's delay must not be negative, got {delay}")
            if self._scheduled_from_ms is None:  # one now for all of an execution's delays
                self._scheduled_from_ms = schedules.now_ms()
            due_ms = self._scheduled_from_ms + delay // timedelta(milliseconds=1)
        else:
            if at.tzinfo is None:
                raise FlinkAgentsError(
                    "schedule's at= takes a time zone aware datetime (datetime.now(UTC) + ...)"
                )
            due_ms = int(at.timestamp() * 1000)
        origin = self.origin
        handle = scheduled_handle(origin.sequence, origin.step, origin.action, self._schedules_made)
        self._schedules_made += 1
        self.sent.append(EventScheduled(handle=handle, due_ms=due_ms, event=event))
        self.scheduling = True
        return handle

    def cancel_scheduled(self, handle: str) -> bool:
        if self._services.schedules is None:
            raise FlinkAgentsError("a sub-agent's action cannot cancel scheduled events")
        if not any(entry.handle == handle for entry in self.scheduled()):
            return False
        self.sent.append(ScheduleCancelled(handle=handle))
        self.scheduling = True
        return True

    def scheduled(self) -> list[EventScheduled]:
        schedules = self._services.schedules
        if schedules is None:
            raise FlinkAgentsError("a sub-agent's action has no scheduled events of its own")
        pending = {entry.handle: entry for entry in schedules.pending()}
        for event in self.sent:  # this execution's own, not applied yet
            if type(event) is EventScheduled:
                pending[event.handle] = event
            elif type(event) is ScheduleCancelled:
                pending.pop(event.handle, None)
        return sorted(pending.values(), key=lambda entry: entry.due_ms)

    def sleep(self, delay: timedelta) -> Awaitable[None]:
        if not isinstance(delay, timedelta):
            raise TypeError(f"sleep takes a timedelta, got {type(delay).__name__}")
        if delay < timedelta(0):
            raise FlinkAgentsError(f"sleep's delay must not be negative, got {delay}")
        run, schedules = self._own_run("sleep")
        index = self._sleeps
        self._sleeps += 1
        if index < len(run.wakes):  # an earlier execution of the action slept here
            return _Sleep(run.wakes[index], schedules)
        wake_ms = schedules.now_ms() + delay // timedelta(milliseconds=1)
        run.wakes = (*run.wakes, wake_ms)
        return _Sleep(wake_ms, schedules)

    def wait_for(
        self,
        event_type: type[E],
        timeout: timedelta | None = None,
        *,
        raise_on_timeout: bool = False,
    ) -> Awaitable[E | None]:
        if not (isinstance(event_type, type) and issubclass(event_type, Event)):
            raise FlinkAgentsError(f"wait_for takes an Event class, got {event_type!r}")
        if timeout is not None and not isinstance(timeout, timedelta):
            raise TypeError(f"wait_for's timeout is a timedelta, got {type(timeout).__name__}")
        if timeout is not None and timeout < timedelta(0):
            raise FlinkAgentsError(f"wait_for's timeout must not be negative, got {timeout}")
        run, schedules = self._own_run("wait")
        index = self._waits
        self._waits += 1
        if index == len(run.waits):  # not an earlier execution's wait: a new one
            until_ms = None
            if timeout is not None:
                until_ms = schedules.now_ms() + timeout // timedelta(milliseconds=1)
            run.waits = (*run.waits, Waited(event_type, until_ms))
        return _WaitFor(self, run, index, raise_on_timeout)

    def now_ms(self) -> int:
        """The runner's processing time in ms (the local runner's simulated clock), which
        the built-in chat action measures ``max_time`` by; a sub-agent's action, which has
        no timers of its own: the wall clock."""
        schedules = self._services.schedules
        if schedules is None or schedules.timers is None:
            return time.time_ns() // 1_000_000
        return schedules.now_ms()

    def _own_run(self, verb: str) -> tuple[RunState, Schedules]:
        """The run an action that may ``verb`` (sleep, wait) is a step of, and the key's
        schedules.

        Raises:
            FlinkAgentsError: a sub-agent's action, or a fan-out member (no run of its own).
        """
        run, schedules = self.run, self._services.schedules
        if run is None or schedules is None:
            raise FlinkAgentsError(
                f"only an async def action of the agent's own run can {verb}: not an action "
                f"of a sub-agent (ctx.run_agent) nor one of a fan-out group ({verb} in an "
                "action of its own, which the group's action sends an event to)"
            )
        return run, schedules

    @property
    def sensory_memory(self) -> MemoryObject:
        if self._sensory_root is None:
            self._sensory_buffer = BufferedState(self._sensory)
            self._sensory_root = FlatMemory(self._sensory_buffer, MemoryType.SENSORY).root()
        return self._sensory_root

    @property
    def short_term_memory(self) -> MemoryObject:
        root = self._short_term_root
        if root is None:
            self._short_term_buffer = BufferedState(self._short_term)
            root = self._short_term_root = FlatMemory(self._short_term_buffer).root()
        return root

    def get_resource(self, name: str, type: ResourceType | None = None) -> Any:
        return self._services.resources.get(name, type)

    @property
    def config(self) -> Mapping[str, Any]:
        return self._config

    @property
    def long_term_memory(self) -> LongTermMemory:
        long_term = self._services.long_term
        if long_term is None:
            return super().long_term_memory
        return long_term.memory(self._key, self.ids)

    @property
    def knowledge(self) -> Knowledge:
        long_term = self._services.long_term
        if long_term is None:
            return super().knowledge
        return long_term.knowledge(self.ids, self._key)

    def external_id(self) -> str:
        return self.ids.external_id()

    @property
    def agent_metric_group(self) -> MetricGroup:
        return self._metric_source().agent_group

    @property
    def action_metric_group(self) -> MetricGroup:
        return self._metric_source().action_group(self.origin.action.rpartition(":")[2])

    @property
    def metrics(self) -> AgentMetrics | None:
        """The run lifecycle's metrics (built-in actions count model usage there)."""
        return self._services.metrics

    @property
    def spend(self) -> SpendGuard | None:
        """The budgets' books (the built-in chat action checks and charges calls there)."""
        return self._services.spend

    def _metric_source(self) -> AgentMetrics:
        if self._services.metrics is None:
            return super().agent_metric_group  # raises: no metrics here
        return self._services.metrics

    def durable_execute(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        services = self._services
        loop = services.call_loop
        if loop is not None and inspect.iscoroutinefunction(function) and not loop().runs_here():
            # On the engine's event loop, as ``durable_execute_async`` runs it: an async
            # client kept between calls needs the same loop every time. (Not on the loop's
            # own thread: waiting for the loop there would hang.)
            slot = self._begin(function, args, kwargs)
            call = _LoopCall(loop, function, args, kwargs, slot, services.metrics)
            if services.tracer is not None:
                call.span = self._call_span(function, args)
            return call.wait()
        if services.tracer is not None:
            return self._traced_execute(function, args, kwargs)
        return self._execute(function, args, kwargs)

    def _execute(self, function: Callable[..., T], args: tuple, kwargs: dict) -> T:
        """``durable_execute`` on this thread."""
        recorder = self.call_recorder()
        metrics = self._services.metrics
        self.last_call_replayed = False
        if recorder is None:
            if metrics is None:
                return call_to_result(function, *args, **kwargs)
            # The user's arguments bound first: their names cannot clash with timed_call's.
            bound = partial(call_to_result, function, *args, **kwargs)
            return metrics.timed_call(function_id(function), bound)
        slot = recorder.begin(function, args, kwargs)
        self.last_call_replayed = slot.recorded is not None
        if slot.recorded is not None:
            if metrics is not None:
                metrics.durable_call_replayed()
            return slot.replay()
        run = partial(call_to_result, function)
        if metrics is None:
            return slot.run(run, args, kwargs)
        return metrics.timed_call(slot.function, slot.run, run, args, kwargs)

    def _traced_execute(self, function: Callable[..., T], args: tuple, kwargs: dict) -> T:
        """``_execute`` with the call's span (tracing on)."""
        span = self._call_span(function, args)
        try:
            value = self._execute(function, args, kwargs)
        except Exception as error:
            (span.replayed if self.last_call_replayed else span.ended)(error=error)
            raise
        (span.replayed if self.last_call_replayed else span.ended)(value)
        return value

    def _call_span(self, function: Callable[..., Any], args: tuple) -> CallSpan:
        """The span of a durable call this execution makes now (tracing on), named as the
        action log names the call."""
        identity = (self._key, self.origin.sequence, self.span_id)
        return CallSpan(self._services.tracer, identity, function, function_id(function), args)

    def durable_execute_async(
        self, function: Callable[..., T], *args: Any, **kwargs: Any
    ) -> Awaitable[T]:
        services = self._services
        slot = self._begin(function, args, kwargs)
        if services.call_loop is not None and inspect.iscoroutinefunction(function):
            call = _LoopCall(services.call_loop, function, args, kwargs, slot, services.metrics)
        else:
            call = _DurableCall(services.executor(), function, args, kwargs, slot, services.metrics)
        if services.tracer is not None:
            call.span = self._call_span(function, args)
        return call

    def _begin(self, function: Callable[..., Any], args: tuple, kwargs: dict) -> CallSlot | None:
        """The call's slot in the action's recorder (None without a log), and whether the
        log answers it (``last_call_replayed``)."""
        recorder = self.call_recorder()
        slot = None if recorder is None else recorder.begin(function, args, kwargs)
        self.last_call_replayed = slot is not None and slot.recorded is not None
        return slot

    def run_agent(
        self, agent: str, input: Any, *, share_short_term_memory: bool | None = None
    ) -> list[Any]:
        return run_blocking(self._sub_run(agent, input, share_short_term_memory))

    def run_agent_async(
        self, agent: str, input: Any, *, share_short_term_memory: bool | None = None
    ) -> Awaitable[list[Any]]:
        return self._sub_run(agent, input, share_short_term_memory)

    def _sub_run(
        self, agent: str, record: Any, share: bool | None
    ) -> Coroutine[Any, Any, list[Any]]:
        sub = self._services.resources.get(agent)
        if not isinstance(sub, SubAgent):
            raise FlinkAgentsError(
                f"resource {agent!r} is a {type(sub).__name__}, not a SubAgent: declare the "
                "agent to run as a SubAgent resource"
            )
        sub_runs = self._services.sub_runs
        if sub_runs is None:
            raise FlinkAgentsError("this context cannot run sub-agents")
        if share is None:
            share = sub.share_short_term_memory
        self._sub_calls += 1
        return sub_runs().run(self, agent, sub, record, share, self._sub_calls)

    def short_term_buffer(self) -> BufferedState:
        """The overlay this action writes short-term memory through (a sub-run that
        shares it, or keeps its own memory under it, writes there too)."""
        if self._short_term_buffer is None:
            self.short_term_memory  # noqa: B018 (builds the buffer)
        return self._short_term_buffer

    @property
    def maps(self) -> tuple[StateMap, StateMap]:
        """The memory maps the action reads through its buffers: (sensory, short-term)."""
        return self._sensory, self._short_term

    def apply_writes(self) -> bool:
        """Apply the buffered memory writes to the maps, as applying ``deltas()`` would,
        without making the deltas; whether sensory memory was written."""
        sensory, short_term = self._sensory_buffer, self._short_term_buffer
        written = sensory is not None and sensory.apply_to(self._sensory)
        if short_term is not None:
            short_term.apply_to(self._short_term)
        return written

    def deltas(self) -> tuple[MemoryDelta, MemoryDelta]:
        """The buffered memory writes: (sensory, short-term); the maps are untouched."""
        sensory, short_term = self._sensory_buffer, self._short_term_buffer
        return (
            NO_CHANGE if sensory is None else sensory.delta(),
            NO_CHANGE if short_term is None else short_term.delta(),
        )


class DirectActionContext(ActionContext):
    """An ``ActionContext`` whose memory writes go straight into the run's maps, two
    ``CachedState``s recording what each write replaced (``CachedState.begin``), rather
    than into buffers applied when the action returns: for the plain actions the engine
    runs back to back (``runtime/_plain.py``), which then ``apply_writes`` (keeps them)
    or ``rollback``s. What needs the writes as buffers (their deltas, a sub-run, an
    action that turns out to need the engine's full path) first turns it into an ordinary
    ``ActionContext`` with the writes so far moved into its buffers (``buffered``): from
    then on ``direct`` is False and every method behaves as ``ActionContext``'s.

    Its memory objects are the maps' shared roots (``CachedState.memory_root``): the
    plain actions of a key, one after another, read and write through the same ones."""

    direct = True
    """Whether writes still go straight into the maps (False once ``buffered``)."""
    _sensory: CachedState
    _short_term: CachedState

    @property
    def sensory_memory(self) -> MemoryObject:
        root = self._sensory_root
        if root is None:
            if not self.direct:
                return ActionContext.sensory_memory.fget(self)
            root = self._sensory_root = self._sensory.begin()  # writes recorded from now on
        return root

    @property
    def short_term_memory(self) -> MemoryObject:
        root = self._short_term_root
        if root is None:
            if not self.direct:
                return ActionContext.short_term_memory.fget(self)
            root = self._short_term_root = self._short_term.begin()
        return root

    def apply_writes(self) -> bool:
        if not self.direct:
            return super().apply_writes()
        written = self._sensory_root is not None and self._sensory.commit()
        if self._short_term_root is not None:
            self._short_term.commit()
        return written

    def rollback(self) -> None:
        """Take back the memory writes of this execution (it failed; nothing to take back
        once ``buffered``: the maps no longer hold them)."""
        if not self.direct:
            return
        if self._sensory_root is not None:
            self._sensory.rollback()
        if self._short_term_root is not None:
            self._short_term.rollback()

    def buffered(self) -> ActionContext:
        """Turn into an ordinary ``ActionContext`` (this very object, ``direct`` then
        False): the writes so far are taken back from the maps into its buffers, and the
        memory objects the action holds read and write through those buffers from now on."""
        if not self.direct:
            return self
        for root_name, buffer_name, state in (
            ("_sensory_root", "_sensory_buffer", self._sensory),
            ("_short_term_root", "_short_term_buffer", self._short_term),
        ):
            root = getattr(self, root_name)
            if root is not None:
                buffer = BufferedState(state)
                buffer.load(state.rollback())
                root.memory.state = buffer
                state.memory_root = None  # the shared root now reads the buffer: not any more
                setattr(self, buffer_name, buffer)
        self.direct = False
        return self

    def short_term_buffer(self) -> BufferedState:
        return super(DirectActionContext, self.buffered()).short_term_buffer()

    def deltas(self) -> tuple[MemoryDelta, MemoryDelta]:
        return super(DirectActionContext, self.buffered()).deltas()


class _Call:
    """A durable call made with ``durable_execute_async``, not yet awaited: the function,
    its arguments, and its slot in the action's call recorder (None without a log)."""

    __slots__ = ("_args", "_function", "_kwargs", "_metrics", "_slot", "span")

    def __init__(
        self,
        function: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        slot: CallSlot | None,
        metrics: AgentMetrics | None,
    ) -> None:
        self._function = function
        self._args = args
        self._kwargs = kwargs
        self._slot = slot
        self._metrics = metrics
        self.span: CallSpan | None = None
        """With tracing on: the call's span, ended when its future is done."""

    def _replayed(self) -> bool:
        """Whether the action log answers the call (counted as replayed)."""
        slot = self._slot
        if slot is None or slot.recorded is None:
            return False
        if self._metrics is not None:
            self._metrics.durable_call_replayed()
        return True

    def _replay(self) -> Any:
        """The recorded outcome of a call the action log answers."""
        span = self.span
        if span is None:
            return self._slot.replay()
        try:
            value = self._slot.replay()
        except Exception as error:
            span.replayed(error=error)
            raise
        span.replayed(value)
        return value

    def _watched(self, future: Future[Any]) -> Future[Any]:
        """``future``, the call's span (if any) ended when it is done."""
        if self.span is not None:
            self.span.watch(future)
        return future

    def _name(self) -> str:
        """The function's name in metrics (and the log)."""
        if self._slot is not None:
            return self._slot.function
        return function_id(self._function) if self._metrics is not None else ""


class _DurableCall(_Call):
    """Awaiting it submits the call to the executor and hands the future to the engine,
    which suspends the action until the future is done. A call the action log already
    holds completes at once, without the executor."""

    __slots__ = ("_executor",)

    def __init__(
        self,
        executor: Executor,
        function: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        slot: CallSlot | None,
        metrics: AgentMetrics | None = None,
    ) -> None:
        super().__init__(function, args, kwargs, slot, metrics)
        self._executor = executor

    def __await__(self) -> Generator[Future[Any], Any, Any]:
        if self._replayed():
            return self._replay()
        slot, metrics, submit = self._slot, self._metrics, self._executor.submit
        if slot is not None:
            # The executor's thread runs the call, hands its outcome to the journal's call
            # writer and is free; the future is the action's, completed once it is stored.
            future: Future[Any] = self._watched(CallFuture())
            timed = None if metrics is None else partial(metrics.timed_call, self._name())
            call = partial(call_to_result, self._function)
            work = submit(slot.start, call, self._args, self._kwargs, future, timed)
            work.add_done_callback(partial(_fail_if_never_run, future))
            return (yield future)
        function, args = call_to_result, (self._function, *self._args)
        if metrics is None:
            return (yield self._watched(submit(function, *args, **self._kwargs)))
        # The user's arguments bound first: their names cannot clash with timed_call's.
        bound = partial(function, *args, **self._kwargs)
        return (yield self._watched(submit(metrics.timed_call, self._name(), bound)))


def _fail_if_never_run(future: CallFuture, work: Future[Any]) -> None:
    """``work`` (a call's ``CallSlot.start`` on the executor) is done: if the executor
    dropped it unrun (its threads stopped and cancelled what was queued, or broke), fail the
    call's future, which nothing else would ever complete (``CallSlot.start`` completes it
    on every path it runs)."""
    if work.cancelled():
        failure: BaseException = RuntimeError(
            "the durable call was never run: its threads had stopped"
        )
    else:
        failure = work.exception()
        if failure is None:  # it ran: its outcome completes the future once stored
            return
    with suppress(InvalidStateError):  # done already (``CallSlot.start`` failed it)
        future.set_exception(failure)


class _LoopCall(_Call):
    """``_DurableCall`` for an ``async def`` function: awaiting it hands the call to the
    engine's event loop (``CallLoop``) rather than to a thread of the executor."""

    __slots__ = ("_loop",)

    def __init__(
        self,
        loop: Callable[[], CallLoop],
        function: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        slot: CallSlot | None,
        metrics: AgentMetrics | None,
    ) -> None:
        super().__init__(function, args, kwargs, slot, metrics)
        self._loop = loop

    def __await__(self) -> Generator[Future[Any], Any, Any]:
        if self._replayed():
            return self._replay()
        return (yield self._submit())

    def wait(self) -> Any:
        """The call's value, waited for on this thread (``durable_execute``)."""
        if self._replayed():
            return self._replay()
        return self._submit().result()

    def _submit(self) -> Future[Any]:
        """Hand the call to the loop."""
        return self._watched(
            self._loop().submit(
                self._function, self._args, self._kwargs, self._slot, self._metrics, self._name()
            )
        )


class _Sleep:
    """``ctx.sleep``'s awaitable: done at once if its time has come, else it hands the
    engine a ``Wake``, and the driver sets the run aside until then."""

    __slots__ = ("_schedules", "wake_ms")

    def __init__(self, wake_ms: int, schedules: Schedules) -> None:
        self.wake_ms = wake_ms
        self._schedules = schedules

    def __await__(self) -> Generator[Future[Any], Any, None]:
        if self._schedules.now_ms() < self.wake_ms:
            yield Wake(self.wake_ms)


class _WaitFor:
    """``ctx.wait_for``'s awaitable: the signal that answered the wait, or None once its
    time is over; else it hands the engine a ``Wake`` naming the signal, and the driver sets
    the run aside until one comes (or the time). The answer goes through the action log as
    a durable call (``_answered``), so an execution after a restore gets the recorded one."""

    __slots__ = ("_context", "_index", "_raise", "_run")

    def __init__(
        self, context: ActionContext, run: RunState, index: int, raise_on_timeout: bool
    ) -> None:
        self._context, self._run, self._index = context, run, index
        self._raise = raise_on_timeout

    def __await__(self) -> Generator[Future[Any], Any, Any]:
        waited = self._run.waits[self._index]
        if waited.reply is None and (
            waited.until_ms is None or self._context._services.schedules.now_ms() < waited.until_ms
        ):
            yield Wake(waited.until_ms, waited.signal)
        signal = waited.signal
        reply = self._context.durable_execute(
            partial(_answered, waited.reply), f"{signal.__module__}:{signal.__qualname__}"
        )
        if reply is None and self._raise:
            raise WaitTimedOut(f"no {signal.__name__} signal came before the wait's timeout")
        return reply


@durable_name("flink_agents:wait_for")
def _answered(reply: Event | None, signal: str) -> Event | None:
    """A wait's answer, as the action log records it: the signal (``signal``: its type's
    name, the call's argument) or None for a timeout."""
    return reply


def call_to_result(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, a coroutine it returns run to its end (``awaited``, as
    a tool's is): a durable call's result is the value, never an unawaited coroutine.
    (``function`` is positional-only: the user's keyword arguments cannot clash with it.)"""
    return awaited(function(*args, **kwargs))


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Drive a sub-run to its end on this thread, waiting here for its durable calls (a
    sync action's ``ctx.run_agent``)."""
    value: Any = None
    while True:
        try:
            yielded = coroutine.send(value)
        except StopIteration as stop:
            return stop.value
        if isinstance(yielded, Future):
            wait([yielded])
