"""Agents that run other agents (sub-agents) for their key."""

from __future__ import annotations

import threading
from collections import Counter

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

CALLS: Counter[str] = Counter()
_lock = threading.Lock()


class Crash(BaseException):
    """Stands for the process dying mid-action: not an Exception, so nothing records it."""


def look_up(topic: str) -> str:
    """A paid durable call: counted per topic."""
    with _lock:
        CALLS[topic] += 1
    if topic == "forbidden":
        raise PermissionError("the library refuses that topic")
    return f"facts about {topic}"


def once(tag: str) -> bool:
    """True the first time ``tag`` is asked for (crash and failure triggers)."""
    with _lock:
        CALLS[tag] += 1
        return CALLS[tag] == 1


class Found(Event):
    facts: str


class Researcher(Agent):
    """Counts the questions it got in its short-term memory, keeps the topic in its sensory
    memory, looks the topic up (a durable call) and answers in a second action."""

    @action(InputEvent)
    @staticmethod
    async def research(event: InputEvent, ctx) -> None:
        stm = ctx.short_term_memory
        stm.set("asked", (stm.get("asked") or 0) + 1)
        ctx.sensory_memory.set("topic", event.input)
        ctx.send_event(Found(facts=await ctx.durable_execute_async(look_up, event.input)))

    @action(Found)
    @staticmethod
    def report(event: Found, ctx) -> None:
        topic = ctx.sensory_memory.get("topic")
        if topic == "crash-in-report" and once("crash:report"):
            raise Crash
        if topic == "broken":
            raise ValueError("the report cannot be written")
        answer = {"answer": event.facts, "asked": ctx.short_term_memory.get("asked")}
        ctx.send_event(OutputEvent(output=answer))


class Coordinator(Agent):
    """Asks the researcher (its own memory, or sharing the coordinator's) and keeps the
    answer. ``input``: {"topic", "shared": bool, "crash": bool}."""

    @resource(ResourceType.TOOL)
    @staticmethod
    def researcher() -> SubAgent:
        return SubAgent(Researcher, description="Looks a topic up")

    @resource(ResourceType.TOOL)
    @staticmethod
    def shared_researcher() -> SubAgent:
        return SubAgent(Researcher, share_short_term_memory=True)

    @action(InputEvent)
    @staticmethod
    async def coordinate(event: InputEvent, ctx) -> None:
        spec = event.input
        name = "shared_researcher" if spec.get("shared") else "researcher"
        found = await ctx.run_agent_async(name, spec["topic"])
        ctx.short_term_memory.set("last", found[0]["answer"] if found else None)
        if spec.get("crash") and once(f"crash-after-{spec['topic']}"):
            raise Crash
        ctx.send_event(
            OutputEvent(output={"found": found, "sensory": ctx.sensory_memory.get_field_names()})
        )


class SyncCoordinator(Agent):
    """A sync action running the researcher (it waits for the sub-agent's calls)."""

    @resource(ResourceType.TOOL)
    @staticmethod
    def researcher() -> SubAgent:
        return SubAgent(Researcher)

    @action(InputEvent)
    @staticmethod
    def coordinate(event: InputEvent, ctx) -> None:
        ctx.send_event(OutputEvent(output=ctx.run_agent("researcher", event.input)))


class SharingSyncCoordinator(Agent):
    """A sync action that writes short-term memory, then runs the researcher sharing it
    (the researcher counts its questions there), then reads what the researcher wrote."""

    @resource(ResourceType.TOOL)
    @staticmethod
    def researcher() -> SubAgent:
        return SubAgent(Researcher, share_short_term_memory=True)

    @action(InputEvent)
    @staticmethod
    def coordinate(event: InputEvent, ctx) -> None:
        memory = ctx.short_term_memory
        memory.set("topic", event.input)
        found = ctx.run_agent("researcher", event.input)
        ctx.send_event(OutputEvent(output={"found": found, "asked": memory.get("asked")}))
