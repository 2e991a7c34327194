"""The agent whose runs ``flink-agents history`` reads (module level: the records pickle
its event and the command's process unpickles it)."""

from __future__ import annotations

import contextlib

from flink_agents.api import Agent, Event, InputEvent, RunnerContext, action


class Crash(BaseException):
    """Stands for the process dying mid-action: nothing records it."""


class Noted(Event):
    text: str


def look_up(name: str) -> str:
    return f"found {name}"


def refuse(name: str) -> str:
    raise LookupError(f"no {name}")


class HistoryAgent(Agent):
    """``input``: {"name": str, "moved": bool, "crash": bool}.

    ``remember`` makes durable calls (so it is recorded) and writes both memory tiers;
    ``note`` makes none (so it is not recorded, though it runs and writes memory)."""

    @action(InputEvent)
    def remember(event: InputEvent, ctx: RunnerContext) -> None:
        name = event.input["name"]
        found = ctx.durable_execute(look_up, name)
        if event.input.get("crash"):
            raise Crash
        with contextlib.suppress(LookupError):  # handled: the call stays in the record
            ctx.durable_execute(refuse, name)
        if event.input.get("moved"):
            ctx.short_term_memory.delete("profile.city")
        else:
            profile = ctx.short_term_memory.new_object("profile")
            profile.set("name", name)
            profile.set("city", "Lyon")
        ctx.sensory_memory.set("found", found)
        ctx.send_event(Noted(text=found))

    @action(Noted)
    def note(event: Noted, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("last_note", event.text)


class Idle(Agent):
    """One action that reads memory and changes nothing."""

    @action(InputEvent)
    def idle(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.get("anything")
