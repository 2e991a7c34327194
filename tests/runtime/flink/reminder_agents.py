"""The agent of ``scheduled_restore_job.py`` (a module of its own: thread mode imports an
agent by its module, which must not be the job's ``__main__``)."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, action


class Remind(Event):
    n: int


class Nap(Event):
    n: int
    delay_s: float


class Ask(Event):
    n: int


class Approval(Event):
    """A signal (``with_signals``) answering the ask ``n``."""

    n: int
    ok: bool


class Reminds(Agent):
    @action(InputEvent)
    @staticmethod
    def plan(event: InputEvent, ctx) -> None:
        record = event.input
        if record["kind"] == "crash":
            marker = Path(ctx.config["marker"])
            if not marker.exists():
                written = marker.with_suffix(".writing")  # (renamed: the test polls for it)
                written.write_text(str(time.time()))  # when it failed
                written.rename(marker)
                raise RuntimeError("an injected failure")
        if record["kind"] == "plan":
            ctx.schedule(Remind(n=record["id"]), delay=timedelta(seconds=record["delay_s"]))
        elif record["kind"] == "nap":
            ctx.send_event(Nap(n=record["id"], delay_s=record["delay_s"]))
        elif record["kind"] == "ask":
            ctx.send_event(Ask(n=record["id"]))
        pending = [entry.event.n for entry in ctx.scheduled()]
        # ``at``: when it ran (its reminder is due ``delay_s`` after), for the test's premise.
        output = {"id": record["id"], "pending": pending, "at": time.time()}
        ctx.send_event(OutputEvent(output=output))

    @action(Remind)
    @staticmethod
    def remind(event: Remind, ctx) -> None:
        count = (ctx.short_term_memory.get("reminded") or 0) + 1
        ctx.short_term_memory.set("reminded", count)
        ctx.send_event(OutputEvent(output={"id": f"reminded-{event.n}", "count": count}))

    @action(Nap)
    @staticmethod
    async def nap(event: Nap, ctx) -> None:
        await ctx.sleep(timedelta(seconds=event.delay_s))
        count = (ctx.short_term_memory.get("woken") or 0) + 1
        ctx.short_term_memory.set("woken", count)
        ctx.send_event(OutputEvent(output={"id": f"woke-{event.n}", "count": count}))

    @action(Ask)
    @staticmethod
    async def ask(event: Ask, ctx) -> None:
        reply = await ctx.wait_for(Approval, timeout=timedelta(minutes=10))
        count = (ctx.short_term_memory.get("answered") or 0) + 1
        ctx.short_term_memory.set("answered", count)
        answer = None if reply is None else [reply.n, reply.ok]
        ctx.send_event(OutputEvent(output={"id": f"answered-{event.n}", "answer": answer}))

    @action(Approval)
    @staticmethod
    def unexpected(event: Approval, ctx) -> None:
        ctx.send_event(OutputEvent(output={"id": f"unexpected-{event.n}"}))
