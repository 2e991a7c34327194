"""An agent whose every run the observability tests can count: custom metrics, durable
calls, a failure, a retry, long-term memory."""

from __future__ import annotations

import os
import time

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, action

ATTEMPTS: dict[int, int] = {}
RELEASE_FILE = "AGENT_METRICS_RELEASE_FILE"
"""The variable naming the file whose creation releases ``HeldAgent``'s sentinel."""


def shout(text: str) -> str:
    return text.upper()


class Shouted(Event):
    text: str
    n: int


class ObservedAgent(Agent):
    """``input``: {"n", "text", "fail": bool, "flaky": bool, "remember": bool}. ``greet``
    makes one durable call and sends ``Shouted``; ``reply`` counts in custom metrics and
    outputs; ``fail`` fails ``reply``, ``flaky`` fails its first attempt only."""

    @action(InputEvent)
    @staticmethod
    def greet(event: InputEvent, ctx) -> None:
        spec = event.input
        loud = ctx.durable_execute(shout, spec["text"])
        ctx.agent_metric_group.get_counter("greetings").inc()
        if spec.get("remember"):
            notes = ctx.long_term_memory.create_memory_set("notes", str, capacity=10)
            notes.add(spec["text"])
            notes.search(spec["text"], limit=1)
        ctx.send_event(Shouted(text=loud, n=spec["n"]))

    @action(Shouted)
    @staticmethod
    def reply(event: Shouted, ctx) -> None:
        spec = ctx.short_term_memory
        ctx.action_metric_group.get_counter("replies").inc()
        ctx.action_metric_group.get_histogram("length").update(len(event.text))
        spec.set("last", event.text)
        if event.text.startswith("FAIL"):
            raise ValueError("cannot reply to that")
        if event.text.startswith("FLAKY"):
            ATTEMPTS[event.n] = ATTEMPTS.get(event.n, 0) + 1
            if ATTEMPTS[event.n] == 1:
                raise ConnectionError("first attempt fails")
        ctx.send_event(OutputEvent(output=event.text))


class HeldAgent(ObservedAgent):
    """``ObservedAgent``, plus a ``hold`` action for the pause and the sentinel records."""

    @action(InputEvent)
    @staticmethod
    def hold(event: InputEvent, ctx) -> None:
        if event.input.get("pause"):
            time.sleep(0.5)
        if event.input.get("sentinel"):
            deadline = time.monotonic() + 120
            while not os.path.exists(os.environ[RELEASE_FILE]) and time.monotonic() < deadline:
                time.sleep(0.05)
            ctx.send_event(OutputEvent(output="released"))


def named(function_name: str, name: str) -> str:
    return f"{function_name}/{name}"


class NamedCalls(Agent):
    """Durable calls whose keyword arguments share names with the runtime's own helpers."""

    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        sync = ctx.durable_execute(named, function_name="f", name="n")
        later = await ctx.durable_execute_async(named, function_name="g", name="m")
        ctx.send_event(OutputEvent(output=[sync, later]))
