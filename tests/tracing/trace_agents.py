"""The agent the tracing tests run: a ReAct loop (``trip_planner``) whose model asks for a
sub-agent (``guide``, two actions and a durable call) and a tool (``weather``) at once, then
answers. ``script`` gives the scripted stand-in its rules.

The guide's second action kills the run the first time it sees ``Crashville`` when
``TRACE_TEST_CRASH_DIR`` names a directory (a marker file there says it did): the process
dies mid-run, so a restore runs the run again, its first model call and the guide's first
action answered from the action log.
"""

from __future__ import annotations

import os
from pathlib import Path

from flink_agents.agents import ReActAgent
from flink_agents.api import Agent, Event, InputEvent, OutputEvent, SubAgent, action, tool
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.testing.llm_server import Rule, ScriptedLLMServer, ToolCallSpec

CRASH_DIR_ENV = "TRACE_TEST_CRASH_DIR"
CITIES = ("Paris", "Lisbon", "Crashville")


class Crash(BaseException):
    """Stands for the process dying mid-action: not an Exception, so nothing records it."""


def look_up(city: str) -> str:
    """The guide's durable call."""
    return f"the sights of {city}"


class Found(Event):
    sights: str


class Guide(Agent):
    """Looks a city's sights up (a durable call), then reports them."""

    @action(InputEvent)
    @staticmethod
    async def look(event: InputEvent, ctx) -> None:
        ctx.sensory_memory.set("city", event.input)
        ctx.send_event(Found(sights=await ctx.durable_execute_async(look_up, event.input)))

    @action(Found)
    @staticmethod
    def report(event: Found, ctx) -> None:
        crash_dir = os.environ.get(CRASH_DIR_ENV)
        if ctx.sensory_memory.get("city") == "Crashville" and crash_dir:
            marker = Path(crash_dir) / "crashed"
            if not marker.exists():
                marker.touch()
                raise Crash("the process dies while the guide reports")
        ctx.send_event(OutputEvent(output=event.sights))


@tool
def weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


def trip_planner() -> ReActAgent:
    model = OpenAIChatModel("scripted", retry_initial_wait=0.01, max_retries=1)
    guide = SubAgent(Guide, description="Knows the sights of a city")
    return ReActAgent(
        chat_model=model, tools={"guide": guide, "weather": weather}, name="trip_planner"
    )


def script(server: ScriptedLLMServer) -> None:
    """The stand-in's rules: a city asked about gets both tools, then the answer."""
    server.add_rule(Rule(after_tool="weather", reply_text="Plan: {tool_result}"))
    for city in CITIES:
        server.add_rule(
            Rule(
                last_user_contains=city,
                reply_tool_calls=[
                    ToolCallSpec("guide", {"input": city}),
                    ToolCallSpec("weather", {"city": city}),
                ],
            )
        )
