"""Module-level agents with ``async def`` actions and durable calls."""

import asyncio
import threading
import time

from flink_agents.api import Agent, InputEvent, OutputEvent, action

CALLS: list[tuple[str, str]] = []  # (argument, thread name) of each durable call


def slow_upper(text: str, delay: float = 0.0) -> str:
    CALLS.append((text, threading.current_thread().name))
    time.sleep(delay)
    if text == "fail":
        raise ConnectionError("service unavailable")
    return text.upper()


class DurableAgent(Agent):
    """Two durable calls in one async action, memory written between and after them."""

    @action(InputEvent)
    @staticmethod
    async def shout(event: InputEvent, ctx) -> None:
        ctx.sensory_memory.set("before", event.input)
        first = await ctx.durable_execute_async(slow_upper, event.input)
        second = await ctx.durable_execute_async(slow_upper, event.input + "!", delay=0.01)
        ctx.short_term_memory.set("last", second)
        ctx.send_event(OutputEvent(output=[first, second, ctx.sensory_memory.get("before")]))


class RecoveringAgent(Agent):
    """Catches the exception of a failed durable call inside the action."""

    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        try:
            result = await ctx.durable_execute_async(slow_upper, event.input)
        except ConnectionError as error:
            result = f"fallback after {error}"
        ctx.send_event(OutputEvent(output=result))


class SyncDurableAgent(Agent):
    @action(InputEvent)
    @staticmethod
    def call(event: InputEvent, ctx) -> None:
        ctx.send_event(OutputEvent(output=ctx.durable_execute(slow_upper, event.input)))


class ForeignAwaitAgent(Agent):
    """Awaits a real asyncio timer, which runners cannot park."""

    @action(InputEvent)
    @staticmethod
    async def wait(event: InputEvent, ctx) -> None:
        ctx.short_term_memory.set("touched", True)
        await asyncio.sleep(0.01)


ASYNC_CRASHES: list[str] = []  # inputs whose first run crashed after its call


async def async_upper(text: str) -> str:
    """An ``async def`` durable function, as an async client's call is."""
    await asyncio.sleep(0)
    CALLS.append((text, threading.current_thread().name))
    return text.upper()


def returns_coroutine(text: str):
    """A plain function that hands back a coroutine (an async client's method, a lambda)."""
    return async_upper(text)


class AwaitsAsyncFunctions(Agent):
    """Durable calls of an ``async def`` function and of one returning a coroutine; the
    first run of an input ending in ``"crash"`` fails after both calls."""

    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        first = await ctx.durable_execute_async(async_upper, event.input)
        second = await ctx.durable_execute_async(returns_coroutine, event.input + "!")
        if event.input.endswith("crash") and event.input not in ASYNC_CRASHES:
            ASYNC_CRASHES.append(event.input)
            raise KeyboardInterrupt  # the process dies: nothing of the action completes
        ctx.send_event(OutputEvent(output=[first, second]))


class SyncCallsAsyncFunction(Agent):
    @action(InputEvent)
    @staticmethod
    def call(event: InputEvent, ctx) -> None:
        ctx.send_event(OutputEvent(output=ctx.durable_execute(async_upper, event.input)))
