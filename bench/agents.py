"""Agents, functions and operators the benchmarks ship to Flink.

They live at module level in an importable module: plans refer to actions as
``module:qualname`` and PyFlink pickles functions by reference. Run the benchmarks with
``PYTHONPATH=/work/main`` so that ``bench.agents`` imports in the Python worker.

In local (MiniCluster) runs the Python worker works in loopback mode, inside the client
process, so the module-level ``COUNTS`` below are the very counters the benchmark reads
after ``env.execute()``: a cheap check that every record produced its output.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import timedelta
from typing import Any

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, MapFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, action
from flink_agents.runtime.internal import input_event

NUM_KEYS = 128
COUNTS: Counter[str] = Counter()
"""Outputs produced per benchmark job, counted where they are produced (loopback only)."""


# -- input -----------------------------------------------------------------------------------


class ToRecord:
    """Sequence number ``n`` -> the benchmark record ``(key, n)`` over ``num_keys`` keys."""

    def __init__(self, num_keys: int = NUM_KEYS) -> None:
        self.num_keys = num_keys

    def __call__(self, n: int) -> tuple[str, int]:
        return f"k{n % self.num_keys}", n


def record_key(record: tuple[str, int]) -> str:
    return record[0]


# -- (a) state throughput --------------------------------------------------------------------


class Counted(Event):
    """Sent by the first action to the second."""

    n: int
    count: int


class CounterAgent(Agent):
    """Two actions, two short-term fields: a per-key counter and a running sum."""

    @action(InputEvent)
    @staticmethod
    def count(event: InputEvent, ctx: Any) -> None:
        memory = ctx.short_term_memory
        count = (memory.get("count") or 0) + 1
        memory.set("count", count)
        ctx.send_event(Counted(n=event.input[1], count=count))

    @action(Counted)
    @staticmethod
    def total(event: Counted, ctx: Any) -> None:
        memory = ctx.short_term_memory
        total = (memory.get("sum") or 0) + event.n
        memory.set("sum", total)
        COUNTS["agent"] += 1
        ctx.send_event(OutputEvent(output=(ctx.key, event.count, total)))


class RawCounter(KeyedProcessFunction):
    """The same state work written directly: a MapState[str, pickled] with the same two
    fields, one get and one put each per record, one output per record."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.memory = runtime_context.get_map_state(
            MapStateDescriptor("short_term", Types.STRING(), Types.PICKLED_BYTE_ARRAY())
        )

    def process_element(self, value: tuple[str, int], ctx: KeyedProcessFunction.Context):
        memory = self.memory
        count = (memory.get("count") or 0) + 1
        memory.put("count", count)
        total = (memory.get("sum") or 0) + value[1]
        memory.put("sum", total)
        COUNTS["raw"] += 1
        yield ctx.get_current_key(), count, total


class _Memory:
    """One key's short-term fields, with what ``CounterAgent``'s actions call on memory."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def get(self, path: str) -> Any:
        return self.fields.get(path)

    def set(self, path: str, value: Any) -> None:
        self.fields[path] = value


class _Context:
    """What ``CounterAgent``'s actions use of their context, and nothing more."""

    __slots__ = ("key", "sent", "short_term_memory")

    def __init__(self, key: str, memory: _Memory) -> None:
        self.key, self.short_term_memory, self.sent = key, memory, []

    def send_event(self, event: Event) -> None:
        self.sent.append(event)


class ActionCodeOnly(KeyedProcessFunction):
    """``CounterAgent``'s two actions called by hand, with the least any framework does
    around them: the run's ``InputEvent`` (made as ours makes it), a context per action,
    the key's memory read from state once and kept (as our driver's cache does), and at
    the end of every record its changed fields and the run's sequence written back (one
    ``put_all`` in thread mode, as ours). The agent's throughput if the framework itself
    cost nothing; ``thread_mode``: PyFlink's process mode ``put_all`` takes no dict."""

    def __init__(self, thread_mode: bool) -> None:
        self.thread_mode = thread_mode

    def open(self, runtime_context: RuntimeContext) -> None:
        pickled = Types.PICKLED_BYTE_ARRAY()
        self.memory = runtime_context.get_map_state(
            MapStateDescriptor("short_term", Types.STRING(), pickled)
        )
        self.control = runtime_context.get_state(ValueStateDescriptor("control", pickled))
        self.keys: dict[str, tuple[list[int], dict[str, Any]]] = {}

    def process_element(self, value: tuple[str, int], ctx: KeyedProcessFunction.Context):
        key = value[0]
        known = self.keys.get(key)
        if known is None:
            fields = {name: self.memory.get(name) for name in ("count", "sum")}
            known = self.keys[key] = ([self.control.value() or 0], fields)
        sequence, fields = known
        sequence[0] += 1
        memory = _Memory(fields)
        first = _Context(key, memory)
        CounterAgent.count(input_event(value), first)
        second = _Context(key, memory)
        CounterAgent.total(first.sent[0], second)
        if self.thread_mode:
            self.memory.put_all(dict(fields))
        else:
            for name, field in fields.items():
                self.memory.put(name, field)
        self.control.update(sequence[0])
        return [event.output for event in second.sent]


class PassThrough(KeyedProcessFunction):
    """No state: the cost of the keyed Python operator alone."""

    def process_element(self, value: tuple[str, int], ctx: KeyedProcessFunction.Context):
        COUNTS["passthrough"] += 1
        yield ctx.get_current_key(), 0, value[1]


# -- (b) async throughput --------------------------------------------------------------------


def sleep_then(value: int, seconds: float) -> int:
    """A stand-in for a remote call (an LLM, a tool) that takes ``seconds``."""
    time.sleep(seconds)
    return value


async def sleep_then_async(value: int, seconds: float) -> int:
    """The same call as an async client makes it (``AsyncOpenAI``): ``async def``, so it runs
    on the engine's event loop rather than on a thread of the executor."""
    await asyncio.sleep(seconds)
    return value


_STARTED: set[str] = set()
"""The ``started_file``s written in this process (one per job)."""


class SleepyAgent(Agent):
    """One async action awaiting one durable call of ``config["seconds"]``: a plain function
    on the executor, or with ``config["coroutine"]`` an ``async def`` one. With
    ``config["started_file"]``, its first run in the worker writes the time (seconds since
    the epoch) to that file: when the agent began taking records, once its operator had
    opened (``bench.async_throughput``)."""

    config = {"seconds": 0.2}

    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx: Any) -> None:
        started = ctx.config.get("started_file")
        if started is not None and started not in _STARTED:
            _STARTED.add(started)
            with open(started, "w", encoding="ascii") as out:
                out.write(str(time.time()))
        call = sleep_then_async if ctx.config.get("coroutine") else sleep_then
        value = await ctx.durable_execute_async(call, event.input[1], ctx.config["seconds"])
        COUNTS["async"] += 1
        ctx.send_event(OutputEvent(output=(ctx.key, value)))


class FanOutAgent(Agent):
    """Three async actions listen to the input, each awaiting one durable call of
    ``config["seconds"]``: a fan-out of three LLM calls (``bench.fan_out``)."""

    config = {"seconds": 0.2}

    @action(InputEvent)
    @staticmethod
    async def summarize(event: InputEvent, ctx: Any) -> None:
        await _fan_out_call(event, ctx, "summarize")

    @action(InputEvent)
    @staticmethod
    async def classify(event: InputEvent, ctx: Any) -> None:
        await _fan_out_call(event, ctx, "classify")

    @action(InputEvent)
    @staticmethod
    async def translate(event: InputEvent, ctx: Any) -> None:
        await _fan_out_call(event, ctx, "translate")


async def _fan_out_call(event: InputEvent, ctx: Any, name: str) -> None:
    value = await ctx.durable_execute_async(sleep_then, event.input[1], ctx.config["seconds"])
    ctx.short_term_memory.set(name, value)
    COUNTS["fan-out"] += 1
    ctx.send_event(OutputEvent(output=(ctx.key, value)))


# -- (c) resume latency ----------------------------------------------------------------------


def timed_sleep(seconds: float) -> tuple[float, float]:
    """A stand-in call of ``seconds`` that says when it began and ended (``time.monotonic``,
    which every thread of a process shares)."""
    began = time.monotonic()
    time.sleep(seconds)
    return began, time.monotonic()


class Paced:
    """Sequence number ``n`` -> the record ``(key, n)`` of a key of its own, after sleeping
    ``gap_s``: an input that comes at a steady rate rather than as fast as it can."""

    def __init__(self, gap_s: float) -> None:
        self.gap_s = gap_s

    def __call__(self, n: int) -> tuple[str, int]:
        time.sleep(self.gap_s)
        return f"k{n}", n


class LatencyAgent(Agent):
    """One async action awaiting one durable call of ``config["seconds"]``; its output holds
    when the action reached the call, when the call began and ended on its thread, and when
    the action went on after it (``bench.resume_latency``)."""

    config = {"seconds": 0.05}

    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx: Any) -> None:
        reached = time.monotonic()
        began, ended = await ctx.durable_execute_async(timed_sleep, ctx.config["seconds"])
        ctx.send_event(OutputEvent(output=(reached, began, ended, time.monotonic())))


class AppendLines(MapFunction):
    """Appends each record to the file at ``path``, one line of its fields, space-separated."""

    def __init__(self, path: str) -> None:
        self.path = path

    def open(self, runtime_context: RuntimeContext) -> None:
        self.out = open(self.path, "a", encoding="ascii")  # noqa: SIM115 (closed in close)

    def map(self, value: tuple) -> int:
        self.out.write(" ".join(map(str, value)) + "\n")
        return 0

    def close(self) -> None:
        self.out.close()


# -- scheduled events ------------------------------------------------------------------------


class Due(Event):
    """What ``SchedulesOne`` schedules, and ``RawScheduled`` keeps, per key."""

    n: int


class SchedulesOne(Agent):
    """Each record schedules one event a day ahead (it fires at the end of the bounded
    input) and emits; the due event's run emits again."""

    @action(InputEvent)
    @staticmethod
    def plan(event: InputEvent, ctx: Any) -> None:
        ctx.schedule(Due(n=event.input[1]), delay=_A_DAY)
        ctx.send_event(OutputEvent(output=(ctx.key, -1)))

    @action(Due)
    @staticmethod
    def due(event: Due, ctx: Any) -> None:
        COUNTS["scheduled"] += 1
        ctx.send_event(OutputEvent(output=(ctx.key, event.n)))


class Nap(Event):
    n: int


class SleepsOne(Agent):
    """``SchedulesOne`` with a sleep: each record emits and sends an event whose ``async
    def`` action sleeps a day (set aside: it wakes at the end of the bounded input) and
    emits again."""

    @action(InputEvent)
    @staticmethod
    def plan(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(Nap(n=event.input[1]))
        ctx.send_event(OutputEvent(output=(ctx.key, -1)))

    @action(Nap)
    @staticmethod
    async def nap(event: Nap, ctx: Any) -> None:
        await ctx.sleep(_A_DAY)
        COUNTS["slept"] += 1
        ctx.send_event(OutputEvent(output=(ctx.key, event.n)))


class RawScheduled(KeyedProcessFunction):
    """The same written directly: the event in a ``ValueState`` and an event-time timer at
    the end of input (a bounded input's last watermark fires it) per record; the timer
    emits the event and clears the state."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.pending = runtime_context.get_state(
            ValueStateDescriptor("pending", Types.PICKLED_BYTE_ARRAY())
        )

    def process_element(self, value: tuple[str, int], ctx: KeyedProcessFunction.Context):
        self.pending.update(Due(n=value[1]))
        ctx.timer_service().register_event_time_timer(_END_OF_INPUT)
        yield ctx.get_current_key(), -1

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext):
        due = self.pending.value()
        self.pending.clear()
        COUNTS["raw-scheduled"] += 1
        yield ctx.get_current_key(), due.n


_END_OF_INPUT = 2**62
_A_DAY = timedelta(days=1)


# -- signals ---------------------------------------------------------------------------------


class Answer(Event):
    """The signal ``WaitsOne`` waits for, per key (and ``RawWaits``' second kind of record)."""

    key: str
    n: int


def answer_key(answer: Answer) -> str:
    return answer.key


class Ask(Event):
    n: int


class WaitsOne(Agent):
    """Each record emits and sends an event whose ``async def`` action waits for the key's
    ``Answer`` (``ctx.wait_for``: set aside until it comes) and emits its number."""

    @action(InputEvent)
    @staticmethod
    def plan(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(Ask(n=event.input[1]))
        ctx.send_event(OutputEvent(output=(ctx.key, -1)))

    @action(Ask)
    @staticmethod
    async def ask(event: Ask, ctx: Any) -> None:
        answer = await ctx.wait_for(Answer, timeout=_A_DAY)
        ctx.send_event(OutputEvent(output=(ctx.key, answer.n)))


class RawWaits(KeyedProcessFunction):
    """The same written directly over the union of both streams: a record keeps its number
    in a ``ValueState`` (with an event-time timeout timer, as the agent's wait has one) and
    emits; the key's ``Answer`` emits its number, deletes the timer and clears the state."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.pending = runtime_context.get_state(
            ValueStateDescriptor("pending", Types.PICKLED_BYTE_ARRAY())
        )

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context):
        if type(value) is Answer:
            self.pending.clear()
            ctx.timer_service().delete_event_time_timer(_END_OF_INPUT)
            yield ctx.get_current_key(), value.n
            return
        self.pending.update(value[1])
        ctx.timer_service().register_event_time_timer(_END_OF_INPUT)
        yield ctx.get_current_key(), -1
