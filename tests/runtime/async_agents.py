"""Module-level agents with ``async def`` actions and durable calls."""

import asyncio
import threading
import time

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, action

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


# -- the call loop ---------------------------------------------------------------------------

KEPT: dict = {}
"""``url``: the scripted LLM server the kept client talks to; ``client``: that client, made
by the first call and used by every call after it, as an application keeps one."""


async def ask_kept_client(text: str) -> str:
    """A call of an ``AsyncOpenAI`` client made once and kept: its connections belong to the
    event loop of its first call."""
    import openai

    client = KEPT.get("client")
    if client is None:
        client = KEPT["client"] = openai.AsyncOpenAI(
            base_url=KEPT["url"], api_key="test-key", max_retries=0
        )
    CALLS.append((text, threading.current_thread().name))
    response = await client.chat.completions.create(
        model="stand-in", messages=[{"role": "user", "content": text}]
    )
    return response.choices[0].message.content


class AskedEvent(Event):
    reply: str


class KeptClientAgent(Agent):
    """One call of the kept client from an ``async def`` action, one from a sync action."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx) -> None:
        ctx.send_event(
            AskedEvent(reply=await ctx.durable_execute_async(ask_kept_client, event.input))
        )

    @action(AskedEvent)
    @staticmethod
    def ask_again(event: AskedEvent, ctx) -> None:
        again = ctx.durable_execute(ask_kept_client, event.reply)
        ctx.send_event(OutputEvent(output=[event.reply, again]))


GATHERING: dict = {}
"""``barrier``: an ``asyncio.Barrier`` every call of ``gather`` waits at."""


async def gather(n: int) -> int:
    """Returns once as many calls as the barrier's parties are waiting at it together (or
    fails after 10 s)."""
    CALLS.append((str(n), threading.current_thread().name))
    await asyncio.wait_for(GATHERING["barrier"].wait(), 10)
    return n


class GatheringAgent(Agent):
    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        ctx.send_event(OutputEvent(output=await ctx.durable_execute_async(gather, event.input)))


async def unstorable(text: str):
    """An ``async def`` durable function whose result the action log cannot store."""
    return lambda: text


class UnstorableAgent(Agent):
    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        ctx.send_event(OutputEvent(output=await ctx.durable_execute_async(unstorable, event.input)))
