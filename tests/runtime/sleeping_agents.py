"""Agents whose actions sleep (``ctx.sleep``), for ``test_sleep``."""

from __future__ import annotations

from datetime import timedelta

from flink_agents.api import (
    Agent,
    Event,
    InputEvent,
    OutputEvent,
    ResourceType,
    SubAgent,
    action,
    resource,
)
from tests.runtime.scheduling_agents import CALLS, paid

HOUR = timedelta(hours=1)


class Nap(Event):
    n: int
    hours: float


class Naps(Agent):
    """Each record (a dict with ``n``) counts itself in short-term memory and writes its
    number to the run's sensory memory; one with ``nap`` (hours) then sleeps that long, after
    a paid durable call, and says what it sees when it wakes. One with ``fail`` raises the
    first ``fail`` times it runs, and one with ``fail_on_waking`` makes the sleeping action
    fail the first time it wakes (for the retry policy)."""

    @action(InputEvent)
    @staticmethod
    def count(event: InputEvent, ctx) -> None:
        record = event.input
        memory = ctx.short_term_memory
        memory.set("count", (memory.get("count") or 0) + 1)
        ctx.sensory_memory.new_object("record").set("n", record["n"])  # (an object, a value)
        if record.get("fail_on_waking"):
            memory.set("fail_on_waking", True)
        if record.get("fail"):
            CALLS[f"fail {record['n']}"] += 1
            if CALLS[f"fail {record['n']}"] <= record["fail"]:
                raise RuntimeError(f"record {record['n']} fails")
        if "nap" in record:
            ctx.send_event(Nap(n=record["n"], hours=record["nap"]))
        else:
            ctx.send_event(OutputEvent(output={"n": record["n"], "count": memory.get("count")}))

    @action(Nap)
    @staticmethod
    async def nap(event: Nap, ctx) -> None:
        await ctx.durable_execute_async(paid, f"nap {event.n}")
        await ctx.sleep(timedelta(hours=event.hours))
        CALLS[f"woke {event.n}"] += 1
        if CALLS[f"woke {event.n}"] == 1 and ctx.short_term_memory.get("fail_on_waking"):
            raise RuntimeError("fails once on waking")
        ctx.send_event(
            OutputEvent(
                output={
                    "woke": event.n,
                    "count": ctx.short_term_memory.get("count"),
                    "record": ctx.sensory_memory.get("record.n"),
                }
            )
        )


class SleepsInALoop(Agent):
    """An action that sleeps an hour, again and again, counting its naps in its output."""

    @action(InputEvent)
    @staticmethod
    async def loop(event: InputEvent, ctx) -> None:
        naps = 0
        while naps < event.input:
            await ctx.sleep(HOUR)
            naps += 1
        ctx.send_event(OutputEvent(output=f"{naps} naps"))


class Ping(Event):
    n: int


class MisusesSleep(Agent):
    """Each record names a way to misuse ``ctx.sleep``; the error goes to the output."""

    @action(InputEvent)
    @staticmethod
    async def misuse(event: InputEvent, ctx) -> None:
        try:
            if event.input == "negative":
                await ctx.sleep(timedelta(seconds=-1))
            elif event.input == "not-a-timedelta":
                await ctx.sleep(3600)
            elif event.input == "fan-out":
                ctx.send_event(Ping(n=1))
                return
        except Exception as error:
            ctx.send_event(OutputEvent(output=f"{type(error).__name__}: {error}"))

    @action(Ping)
    @staticmethod
    async def first(event: Ping, ctx) -> None:
        try:
            await ctx.sleep(HOUR)
        except Exception as error:
            ctx.send_event(OutputEvent(output=f"{type(error).__name__}: {error}"))

    @action(Ping)
    @staticmethod
    async def second(event: Ping, ctx) -> None:
        pass


class SleepyResearcher(Agent):
    @action(InputEvent)
    @staticmethod
    async def research(event: InputEvent, ctx) -> None:
        await ctx.sleep(HOUR)


class DelegatesSleep(Agent):
    @resource(ResourceType.TOOL)
    @staticmethod
    def researcher() -> SubAgent:
        return SubAgent(SleepyResearcher)

    @action(InputEvent)
    @staticmethod
    def delegate(event: InputEvent, ctx) -> None:
        try:
            ctx.run_agent("researcher", event.input)
        except Exception as error:
            ctx.send_event(OutputEvent(output=f"{type(error.__cause__).__name__}: {error}"))
