"""Agents that schedule events for their key (``ctx.schedule``), for ``test_scheduling``."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

from flink_agents.api import (
    Agent,
    Event,
    EventScheduled,
    InputEvent,
    OutputEvent,
    ResourceType,
    SubAgent,
    action,
    resource,
)

CALLS: Counter[str] = Counter()
_lock = threading.Lock()


class Crash(BaseException):
    """Stands for the process dying mid-action: not an Exception, so nothing records it."""


def paid(name: str) -> str:
    """A paid durable call, counted."""
    with _lock:
        CALLS[name] += 1
    return f"paid {name}"


class FollowUp(Event):
    text: str


class Ping(Event):
    n: int


def pending(ctx) -> list[str]:
    return [entry.event.text for entry in ctx.scheduled()]


class FollowsUp(Agent):
    """Each record (a dict) says what to do: ``schedule`` a follow-up ``days`` ahead (or
    ``at`` an ISO time), ``cancel`` the last one, ``fail`` after scheduling."""

    @action(InputEvent)
    @staticmethod
    def plan(event: InputEvent, ctx) -> None:
        record = event.input
        memory = ctx.short_term_memory
        result: dict = {"n": record["n"]}
        if "cancel" in record:
            handle = memory.get("last") if record["cancel"] == "last" else record["cancel"]
            result["cancelled"] = ctx.cancel_scheduled(handle)
        if "days" in record:
            text = f"follow-up {record['n']}" + (" fails" if record.get("follow_up_fails") else "")
            handle = ctx.schedule(FollowUp(text=text), delay=timedelta(days=record["days"]))
            memory.set("last", handle)
            result["handle"] = handle
        if "at" in record:
            at = datetime.fromisoformat(record["at"])
            ctx.schedule(FollowUp(text=f"at {record['n']}"), at=at)
        if record.get("fail"):
            raise RuntimeError(f"record {record['n']} fails after scheduling")
        result["pending"] = pending(ctx)
        ctx.send_event(OutputEvent(output=result))

    @action(FollowUp)
    @staticmethod
    def follow_up(event: FollowUp, ctx) -> None:
        if event.text.endswith("fails"):
            raise RuntimeError(f"{event.text}, as asked")
        memory = ctx.short_term_memory
        done = [*(memory.get("followed") or []), event.text]
        memory.set("followed", done)
        ctx.send_event(OutputEvent(output={"followed": event.text, "pending": pending(ctx)}))


class Forever(Agent):
    """Pings itself every hour, for good, from its first record on."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx) -> None:
        ctx.schedule(Ping(n=1), delay=timedelta(hours=1))
        ctx.schedule(FollowUp(text="in a day"), delay=timedelta(days=1))

    @action(Ping)
    @staticmethod
    def ping(event: Ping, ctx) -> None:
        ctx.schedule(Ping(n=event.n + 1), delay=timedelta(hours=1))
        ctx.send_event(OutputEvent(output=f"ping {event.n}"))

    @action(FollowUp)
    @staticmethod
    def follow_up(event: FollowUp, ctx) -> None:
        ctx.send_event(OutputEvent(output=event.text))


class Planned(Event):
    pass


class PaysThenSchedules(Agent):
    """Makes a paid durable call, then schedules a follow-up: the action is recorded, so a
    run replayed after a restore schedules from the record (the same handle and due time),
    without the call. Its next action dies the first time (``Crash``)."""

    @action(InputEvent)
    @staticmethod
    async def plan(event: InputEvent, ctx) -> None:
        paid_for = await ctx.durable_execute_async(paid, event.input)
        handle = ctx.schedule(FollowUp(text=paid_for), delay=timedelta(days=2))
        ctx.short_term_memory.set("handle", handle)
        ctx.send_event(Planned())

    @action(Planned)
    @staticmethod
    def then(event: Planned, ctx) -> None:
        with _lock:
            CALLS["then"] += 1
            first = CALLS["then"] == 1
        if first:
            raise Crash
        ctx.send_event(OutputEvent(output=[e.due_ms for e in ctx.scheduled()]))

    @action(FollowUp)
    @staticmethod
    def follow_up(event: FollowUp, ctx) -> None:
        ctx.send_event(OutputEvent(output=event.text))


class Waits(Agent):
    """A record's action parks on a durable call (``delay_ms``); follow-ups due meanwhile
    wait for its run, in order, behind the inputs queued before they came due."""

    @action(InputEvent)
    @staticmethod
    async def work(event: InputEvent, ctx) -> None:
        record = event.input
        if record.get("follow_up_ms") is not None:
            ctx.schedule(
                FollowUp(text=f"after {record['n']}"),
                delay=timedelta(milliseconds=record["follow_up_ms"]),
            )
        if record.get("delay_ms"):
            await ctx.durable_execute_async(slow, record["delay_ms"])
        ctx.send_event(OutputEvent(output=f"input {record['n']}"))

    @action(FollowUp)
    @staticmethod
    def follow_up(event: FollowUp, ctx) -> None:
        ctx.send_event(OutputEvent(output=event.text))


def slow(delay_ms: int) -> int:
    threading.Event().wait(delay_ms / 1000)
    return delay_ms


class Misuses(Agent):
    """Calls ``schedule`` the way the record says, and reports the error."""

    @action(InputEvent)
    @staticmethod
    def misuse(event: InputEvent, ctx) -> None:
        how = event.input
        try:
            if how == "neither":
                ctx.schedule(FollowUp(text="x"))
            elif how == "both":
                ctx.schedule(FollowUp(text="x"), delay=timedelta(1), at=datetime.now(UTC))
            elif how == "negative":
                ctx.schedule(FollowUp(text="x"), delay=timedelta(seconds=-1))
            elif how == "naive":
                ctx.schedule(FollowUp(text="x"), at=datetime(2030, 1, 1))
            elif how == "output":
                ctx.schedule(OutputEvent(output=1), delay=timedelta(1))
            elif how == "unheard":
                ctx.schedule(Ping(n=1), delay=timedelta(1))
            elif how == "send":
                ctx.send_event(EventScheduled(handle="h", due_ms=0, event=FollowUp(text="x")))
            elif how == "not-an-event":
                ctx.schedule("soon", delay=timedelta(1))
        except Exception as error:
            ctx.send_event(OutputEvent(output=f"{type(error).__name__}: {error}"))

    @action(FollowUp)
    @staticmethod
    def follow_up(event: FollowUp, ctx) -> None:
        pass


class SchedulingResearcher(Agent):
    """A sub-agent that tries to schedule."""

    @action(InputEvent)
    @staticmethod
    def research(event: InputEvent, ctx) -> None:
        ctx.schedule(FollowUp(text="from a sub-agent"), delay=timedelta(days=1))


class Delegates(Agent):
    @resource(ResourceType.TOOL)
    @staticmethod
    def researcher() -> SubAgent:
        return SubAgent(SchedulingResearcher)

    @action(InputEvent)
    @staticmethod
    def delegate(event: InputEvent, ctx) -> None:
        try:
            ctx.run_agent("researcher", event.input)
        except Exception as error:
            ctx.send_event(OutputEvent(output=f"{type(error.__cause__).__name__}: {error}"))

    @action(FollowUp)
    @staticmethod
    def follow_up(event: FollowUp, ctx) -> None:
        pass
