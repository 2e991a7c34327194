"""Module-level agents, tools, schemas and providers for the integration tests.

Resources read the scripted server's address and key from ``TEST_LLM_URL`` / ``TEST_LLM_KEY``
(set per test with monkeypatch), so the plans hold only environment references.
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from pydantic import BaseModel

from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceType,
    action,
    resource,
    tool,
)
from flink_agents.integrations.chat import OpenAIChatModel

SCRIPTED_MODEL = dict(
    model="scripted",
    base_url="${env:TEST_LLM_URL}",
    api_key={"env": "TEST_LLM_KEY"},
    max_retries=2,
    retry_initial_wait=0.01,
    retry_max_wait=0.05,
)


# --- tools --------------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first addend.
        b: the second addend.
    """
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return a * b


@tool(name="explode", description="A tool that always fails.")
def broken(reason: str) -> str:
    raise RuntimeError(f"tool broke: {reason}")


def forecast(
    city: str,
    days: int = 1,
    unit: Literal["celsius", "fahrenheit"] = "celsius",
    tags: list[str] | None = None,
) -> dict[str, Any]:
    """Forecast the weather of a city.

    Uses no network: the numbers are made up.

    Args:
        city: the city's name, e.g. "Lisbon".
        days: how many days ahead,
            counting today as day one.
        unit (str): the temperature unit.
        tags: free labels.

    Returns:
        the forecast.
    """
    return {"city": city, "days": days, "unit": unit, "temperature": 21}


# --- schemas ------------------------------------------------------------------------------


class Calculation(BaseModel):
    result: int
    explanation: str


# --- providers ----------------------------------------------------------------------------

CREATED: list[dict[str, Any]] = []
_CREATED_LOCK = threading.Lock()


class CountingResource:
    """A custom resource that remembers every creation (to prove it happens once)."""

    def __init__(self, **args: Any) -> None:
        with _CREATED_LOCK:
            CREATED.append(args)
        self.args = args


def failing_provider(token: str) -> None:
    raise ValueError(f"the service refused token {token}")


# --- agents -------------------------------------------------------------------------------


class WeatherAgent(Agent):
    """Asks the model with one tool; the built-in actions run the tool loop."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx) -> None:
        ctx.send_event(
            ChatRequestEvent(
                model="llm",
                messages=[ChatMessage(role=MessageRole.USER, content=event.input)],
                tools=["get_weather"],
            )
        )

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx) -> None:
        ctx.send_event(
            OutputEvent(output={"text": event.response.content, "tokens": event.usage.total_tokens})
        )

    @resource(ResourceType.CHAT_MODEL, **SCRIPTED_MODEL)
    @staticmethod
    def llm(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)

    @tool
    @staticmethod
    def get_weather(city: str) -> str:
        """The current weather of a city.

        Args:
            city: the city's name.
        """
        return f"sunny in {city}"


TOOL_THREADS: list[str] = []  # where AsyncWeatherAgent's tool ran


class AsyncWeatherAgent(WeatherAgent):
    """``WeatherAgent`` with an ``async def`` tool: the built-in action awaits its ``acall``."""

    @tool
    @staticmethod
    async def get_weather(city: str) -> str:
        """The current weather of a city.

        Args:
            city: the city's name.
        """
        TOOL_THREADS.append(threading.current_thread().name)
        return f"sunny in {city}"


class ToolListAgent(Agent):
    """Like ``WeatherAgent`` but the model's own ``tools`` say which tools it gets."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx) -> None:
        ctx.send_event(
            ChatRequestEvent(model="llm", messages=[{"role": "user", "content": event.input}])
        )

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))

    @resource(ResourceType.CHAT_MODEL, **SCRIPTED_MODEL, tools=["explode", "plus"])
    @staticmethod
    def llm(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)

    @resource(ResourceType.TOOL, function="tests.integrations.chat_agents:broken")
    @staticmethod
    def explode(function: str) -> Any:
        from flink_agents.api import Tool

        return Tool.from_ref(function)

    @resource(ResourceType.TOOL)
    @staticmethod
    def plus() -> Any:
        from flink_agents.api import Tool

        return Tool.from_function(add)  # the model calls it by its resource name, "plus"
