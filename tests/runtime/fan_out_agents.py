"""Agents whose events fan out to several ``async def`` actions (one event, many listeners)."""

from __future__ import annotations

import threading
import time
from collections import Counter

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, action

CALLS: Counter[str] = Counter()
_lock = threading.Lock()
_barriers: dict[str, threading.Barrier] = {}


class Crash(BaseException):
    """Stands for the process dying mid-action: not an Exception, so nothing records it."""


def meet(tag: str, parties: int, timeout_s: float) -> str:
    """Returns once ``parties`` calls with ``tag`` are all running at the same time; raises
    ``threading.BrokenBarrierError`` after ``timeout_s`` otherwise. Only overlapping calls
    pass: a proof of overlap that does not depend on timing."""
    with _lock:
        barrier = _barriers.setdefault(tag, threading.Barrier(parties))
    barrier.wait(timeout_s)
    return tag


def later(value: str, delay_ms: int) -> str:
    """A durable call of ``delay_ms`` that counts how often it ran for ``value``."""
    time.sleep(delay_ms / 1000)
    with _lock:
        CALLS[value] += 1
    return value.upper()


class Rendezvous(Agent):
    """Three async actions listen to the input; each awaits a call that returns only when
    all three calls run at once. ``input``: {"tag": str, "timeout_s": float}."""

    @action(InputEvent)
    @staticmethod
    async def north(event: InputEvent, ctx) -> None:
        await _meet(event, ctx, "north")

    @action(InputEvent)
    @staticmethod
    async def east(event: InputEvent, ctx) -> None:
        await _meet(event, ctx, "east")

    @action(InputEvent)
    @staticmethod
    async def south(event: InputEvent, ctx) -> None:
        await _meet(event, ctx, "south")


async def _meet(event: InputEvent, ctx, name: str) -> None:
    spec = event.input
    await ctx.durable_execute_async(meet, spec["tag"], 3, spec["timeout_s"])
    ctx.send_event(OutputEvent(output=name))


class Gather(Event):
    n: int
    delays: list[int]
    fail: str | None = None
    """The member that fails (``!name``: only its first attempt; ``crash:name``: the
    process dies in it, once)."""


class Joined(Event):
    member: str


class Members(Agent):
    """The input action writes memory and sends ``Gather``, which three async actions
    (``first``, ``second``, ``third``, in plan order) listen to. Each reads the shared
    ``total``, awaits a call of its own delay, writes ``total`` (read + 1), ``last`` and a
    field of its own, outputs what it saw and sends ``Joined``, whose listener outputs the
    member and ``total`` as it then is. ``input``: {"n", "delays": [3 ints], "fail"}."""

    @action(InputEvent)
    @staticmethod
    def route(event: InputEvent, ctx) -> None:
        spec = event.input
        stm = ctx.short_term_memory
        stm.set("runs", (stm.get("runs") or 0) + 1)
        ctx.send_event(Gather(n=spec["n"], delays=spec["delays"], fail=spec.get("fail")))

    @action(Gather)
    @staticmethod
    async def first(event: Gather, ctx) -> None:
        await _member(event, ctx, "first", 0)

    @action(Gather)
    @staticmethod
    async def second(event: Gather, ctx) -> None:
        await _member(event, ctx, "second", 1)

    @action(Gather)
    @staticmethod
    async def third(event: Gather, ctx) -> None:
        await _member(event, ctx, "third", 2)

    @action(Joined)
    @staticmethod
    def after(event: Joined, ctx) -> None:
        total = ctx.short_term_memory.get("total")
        ctx.send_event(OutputEvent(output={"after": event.member, "total": total}))


async def _member(event: Gather, ctx, name: str, index: int) -> None:
    stm = ctx.short_term_memory
    seen = stm.get("total") or 0
    stm.set(f"own.{name}", "before the call")
    value = await ctx.durable_execute_async(later, f"{name}-{event.n}", event.delays[index])
    stm.set("total", seen + 1)
    stm.set("last", name)
    stm.set(f"own.{name}", value)
    if event.fail == name:
        raise RuntimeError(f"{name} failed on record {event.n}")
    if event.fail in (f"!{name}", f"crash:{name}"):
        with _lock:
            CALLS[event.fail] += 1
            first_time = CALLS[event.fail] == 1
        if first_time and event.fail.startswith("crash:"):
            raise Crash
        if first_time:
            raise RuntimeError(f"{name} failed once on record {event.n}")
    ctx.send_event(OutputEvent(output={"member": name, "seen": seen, "value": value}))
    ctx.send_event(Joined(member=name))
