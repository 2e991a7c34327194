"""Agents whose actions wait for signals (``ctx.wait_for``), for ``test_wait_for``."""

from __future__ import annotations

from datetime import timedelta

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, WaitTimedOut, action
from tests.runtime.scheduling_agents import CALLS, paid

HOUR = timedelta(hours=1)


class Approval(Event):
    refund: int
    approved: bool


class UrgentApproval(Approval):
    """A subclass: it answers a wait for ``Approval`` too."""


class Note(Event):
    text: str


class Refunds(Agent):
    """Each record (a dict with ``refund`` and ``amount``) counts itself in short-term
        memory and keeps its refund in the run's sensory memory. A small refund is approved at
        once; a large one makes a paid durable call (asking a person), then waits for an
        ``Approval`` of its key, ``hours`` at most (4 by default; ``None``: no limit), raising
        on the timeout when the record says ``strict``, and says what it sees when answered (one
    with ``fail_after_answer`` fails the first time it is answered).
        An ``Approval`` no run waits for is answered by ``unexpected``; a ``Note`` only by
        ``noted`` (no run waits for one)."""

    @action(InputEvent)
    @staticmethod
    async def refund(event: InputEvent, ctx) -> None:
        record = event.input
        memory = ctx.short_term_memory
        memory.set("count", (memory.get("count") or 0) + 1)
        ctx.sensory_memory.set("refund", record["refund"])
        if record["amount"] < 100:
            ctx.send_event(OutputEvent(output={"refund": record["refund"], "approved": True}))
            return
        await ctx.durable_execute_async(paid, f"ask {record['refund']}")
        hours = record.get("hours", 4)
        timeout = None if hours is None else timedelta(hours=hours)
        try:
            reply = await ctx.wait_for(
                Approval, timeout=timeout, raise_on_timeout=record.get("strict", False)
            )
        except WaitTimedOut as error:
            ctx.send_event(OutputEvent(output={"refund": record["refund"], "error": str(error)}))
            return
        CALLS[f"answered {record['refund']}"] += 1
        if record.get("fail_after_answer") and CALLS[f"answered {record['refund']}"] == 1:
            raise RuntimeError("fails once after its answer")
        ctx.send_event(
            OutputEvent(
                output={
                    "refund": ctx.sensory_memory.get("refund"),
                    "approved": None if reply is None else reply.approved,
                    "answer_for": None if reply is None else reply.refund,
                    "count": memory.get("count"),
                }
            )
        )

    @action(Approval)
    @staticmethod
    def unexpected(event: Approval, ctx) -> None:
        ctx.send_event(OutputEvent(output={"unexpected": event.refund}))

    @action(Note)
    @staticmethod
    def noted(event: Note, ctx) -> None:
        ctx.send_event(OutputEvent(output={"note": event.text}))


class MisusesWaitFor(Agent):
    """Each record names a way to misuse ``ctx.wait_for``; the error goes to the output."""

    @action(InputEvent)
    @staticmethod
    async def misuse(event: InputEvent, ctx) -> None:
        try:
            if event.input == "not-an-event":
                await ctx.wait_for(dict)
            elif event.input == "negative":
                await ctx.wait_for(Approval, timeout=timedelta(seconds=-1))
            elif event.input == "not-a-timedelta":
                await ctx.wait_for(Approval, timeout=60)
        except Exception as error:
            ctx.send_event(OutputEvent(output=f"{type(error).__name__}: {error}"))
