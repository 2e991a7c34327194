"""An agent whose one durable call ends when the test says so, and timers that only record
what the driver asked, on a clock the test sets: shared by the driver's polling tests.

``RELEASE`` is shared by every test module that imports it: a test module resets it before
each test (``reset_release``) and releases everything after it (``release_all``), so no test
sees an event another test created or set, and no held call outlives its test."""

from __future__ import annotations

import threading
from datetime import timedelta

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, action

RELEASE: dict[str, threading.Event] = {}
"""The event that ends ``held(name)``, by name; created by whichever comes first, the call or
the test."""

_DRAINING = threading.Event()
"""Set by ``release_all``: a held call that starts after it does not wait."""


def release_event(name: str) -> threading.Event:
    """The event that ends ``held(name)``, created if need be."""
    return RELEASE.setdefault(name, threading.Event())


def release_all() -> None:
    """End every held call, including one that has not yet asked for its event, until the next
    ``reset_release``: for a test's end, before its engines are closed (closing waits for them).
    """
    _DRAINING.set()
    for event in list(RELEASE.values()):
        event.set()


def reset_release() -> None:
    """Forget all events: for a test's start, once the previous test's engines are closed."""
    _DRAINING.clear()
    RELEASE.clear()


def held(name: str) -> str:
    """A durable call that ends when the test says so."""
    event = release_event(name)
    # Checked after the event is in RELEASE: either release_all sees the event and sets it, or
    # this sees _DRAINING set (release_all sets it before looking at RELEASE).
    if not _DRAINING.is_set():
        event.wait(10)
    return name.upper()


class HeldAgent(Agent):
    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        result = await ctx.durable_execute_async(held, event.input)
        ctx.send_event(OutputEvent(output=result))


class Ping(Event):
    """Scheduled by ``ScheduleOrHoldAgent``."""


class ScheduleOrHoldAgent(Agent):
    """An input ``"schedule"`` schedules a ``Ping`` one second ahead (its run ends at
    once); any other awaits a held call, as ``HeldAgent``."""

    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        if event.input == "schedule":
            ctx.schedule(Ping(), delay=timedelta(seconds=1))
            return
        result = await ctx.durable_execute_async(held, event.input)
        ctx.send_event(OutputEvent(output=result))

    @action(Ping)
    @staticmethod
    def pinged(event: Ping, ctx) -> None:
        ctx.send_event(OutputEvent(output="ping"))


class RecordingTimers:
    """One key's timers: what was registered, on a clock the test moves.

    ``wakes`` is what a test may consume (pop) as it fires them; ``history`` keeps every
    wake-up asked for; ``ends`` counts end-of-input timers and ``ends_cancelled`` their
    cancellations; ``cancelled`` lists the wake-ups cancelled (and taken out of ``wakes``)."""

    def __init__(self, now: int = 0) -> None:
        self.now = now
        self.wakes: list[int] = []
        self.history: list[int] = []
        self.ends = 0
        self.ends_cancelled = 0
        self.cancelled: list[int] = []

    def now_ms(self) -> int:
        return self.now

    def wake_at(self, due_ms: int) -> None:
        self.wakes.append(due_ms)
        self.history.append(due_ms)

    def wake_at_end(self) -> None:
        self.ends += 1

    def cancel(self, due_ms: int) -> None:
        self.wakes.remove(due_ms)
        self.cancelled.append(due_ms)

    def cancel_end(self) -> None:
        self.ends_cancelled += 1
