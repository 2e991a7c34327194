"""The agent of the ``action-log-record: all`` tests (module level: the log pickles its
events, and Flink workers import it)."""

from __future__ import annotations

from collections import Counter

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.memory import to_dict
from flink_agents.testing.recovery import Charged, LedgerAgent

CALLS: Counter[int] = Counter()
"""Executions of ``look_up`` per argument, in this process (the local runner's)."""


class Tallied(Event):
    n: int


def look_up(n: int) -> str:
    """Stands for a paid call (an LLM)."""
    CALLS[n] += 1
    return f"answer {n}"


class AuditAgent(Agent):
    """``input``: ``{"k": key, "n": int}``, or ``{"k": key, "probe": true}`` for the key's
    short-term memory as output.

    ``tally`` and ``note`` are plain actions that make no durable call (``note`` changes
    only short-term memory and sends nothing): the default log leaves them unrecorded.
    ``answer`` makes a durable call."""

    @action(InputEvent)
    @staticmethod
    def tally(event: InputEvent, ctx: RunnerContext) -> None:
        record, memory = event.input, ctx.short_term_memory
        if record.get("probe"):
            ctx.send_event(OutputEvent(output={"key": ctx.key, "memory": to_dict(memory)}))
            return
        memory.set("count", (memory.get("count") or 0) + 1)
        ctx.sensory_memory.set("n", record["n"])
        ctx.send_event(Tallied(n=record["n"]))

    @action(Tallied)
    @staticmethod
    def note(event: Tallied, ctx: RunnerContext) -> None:
        memory = ctx.short_term_memory
        notes = memory.get_object("notes") or memory.new_object("notes")
        notes.set("last", event.n)
        if event.n % 3 == 0:
            memory.delete("notes.odd")
        else:
            notes.set("odd", event.n % 2 == 1)

    @action(Tallied)
    @staticmethod
    def answer(event: Tallied, ctx: RunnerContext) -> None:
        answer = ctx.durable_execute(look_up, event.n)
        memory = ctx.short_term_memory
        ctx.send_event(
            OutputEvent(
                output={
                    "key": ctx.key,
                    "n": event.n,
                    "answer": answer,
                    "count": memory.get("count"),
                    "seen": ctx.sensory_memory.get("n"),
                }
            )
        )


class AuditedLedgerAgent(LedgerAgent):
    """``LedgerAgent`` (two actions with paid calls that leave a ledger line each) with a
    third, plain action that makes no call and only changes short-term memory: what the
    default log leaves unrecorded."""

    @action(Charged)
    @staticmethod
    def audit(event: Charged, ctx: RunnerContext) -> None:
        memory = ctx.short_term_memory
        memory.set("audited", (memory.get("audited") or 0) + 1)
        memory.set("last_audit", event.record_id)


_FLAKY_TRIES: dict[str, int] = {}


class Flaky(Agent):
    """Writes memory, then fails its first attempt per key (nothing of it is applied)."""

    @action(InputEvent)
    @staticmethod
    def flaky(event: InputEvent, ctx: RunnerContext) -> None:
        tries = _FLAKY_TRIES[ctx.key] = _FLAKY_TRIES.get(ctx.key, 0) + 1
        ctx.short_term_memory.set("tries", tries)
        if tries == 1:
            raise RuntimeError("first attempt fails")
        ctx.send_event(OutputEvent(output="done"))
