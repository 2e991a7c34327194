"""Agents for the action journal tests: durable calls counted in ``CALLS``."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action

CALLS: Counter[str] = Counter()
_lock = threading.Lock()


class Crash(BaseException):
    """Stands for the process dying mid-action: not an Exception, so nothing records it."""


def paid(name: str, value: Any = None) -> str:
    """A call we must not pay for twice."""
    with _lock:
        CALLS[name] += 1
    return f"{name}({value})#{CALLS[name]}"


def flaky(name: str) -> str:
    with _lock:
        CALLS[name] += 1
    raise ConnectionError(f"{name} is down")


def fails_once(name: str) -> str:
    with _lock:
        CALLS[name] += 1
    if CALLS[name] == 1:
        raise ConnectionError(f"{name} is down")
    return f"{name}#{CALLS[name]}"


def unpicklable() -> Any:
    return threading.Lock()


class TwoCalls(Agent):
    """``input``: {"arg": value, "crash": bool, "fail": bool}. Two durable calls, then
    memory writes; crashes or fails between the calls when asked."""

    @action(InputEvent)
    def work(event: InputEvent, ctx: RunnerContext) -> None:
        spec = event.input
        first = ctx.durable_execute(paid, "first", spec.get("arg"))
        ctx.short_term_memory.set("first", first)
        if spec.get("crash") and CALLS["crashed"] == 0:
            CALLS["crashed"] += 1
            raise Crash
        if spec.get("fail") and CALLS["failed"] == 0:
            CALLS["failed"] += 1
            raise RuntimeError("fails once after the first call")
        second = ctx.durable_execute(paid, "second")
        ctx.short_term_memory.set("second", second)
        ctx.send_event(OutputEvent(output=[first, second]))


class AsyncTwoCalls(Agent):
    """The async version: each call awaited on the executor."""

    @action(InputEvent)
    async def work(event: InputEvent, ctx: RunnerContext) -> None:
        first = await ctx.durable_execute_async(paid, "first", event.input)
        if CALLS["crashed"] == 0:
            CALLS["crashed"] += 1
            raise Crash
        second = await ctx.durable_execute_async(paid, "second")
        ctx.send_event(OutputEvent(output=[first, second]))


class HandlesErrors(Agent):
    """Calls a failing service, handles the error, then calls another: the handled error
    is part of what the action saw and must replay as such."""

    @action(InputEvent)
    def work(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            ctx.durable_execute(flaky, "flaky")
            seen = "ok"
        except ConnectionError as error:
            seen = str(error)
        after = ctx.durable_execute(paid, "after")
        if event.input == "crash" and CALLS["crashed"] == 0:
            CALLS["crashed"] += 1
            raise Crash
        ctx.send_event(OutputEvent(output=[seen, after]))


class FailsOnError(Agent):
    """Lets a durable call's error fail the action (a retry must call again)."""

    @action(InputEvent)
    def work(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=ctx.durable_execute(fails_once, "flaky")))


class BadResult(Agent):
    """A durable call whose result the log cannot store."""

    @action(InputEvent)
    def work(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("before", 1)
        ctx.durable_execute(unpicklable)


class BadEvent(Agent):
    """An action (recorded: it makes a durable call) whose output the log cannot store: it
    must fail with nothing applied."""

    @action(InputEvent)
    def work(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.durable_execute(paid, "bad-event")
        ctx.short_term_memory.set("written", True)
        ctx.send_event(OutputEvent(output=threading.Lock()))


class Step(Event):
    n: Any = None


class Cheap(Agent):
    """Two actions that make no durable call and write nothing outside Flink state."""

    @action(InputEvent)
    def first(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("seen", (ctx.short_term_memory.get("seen") or 0) + 1)
        ctx.send_event(Step(n=event.input))

    @action(Step)
    def second(event: Step, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.n))


class EventId(Agent):
    @action(InputEvent)
    def work(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=str(event.id)))
