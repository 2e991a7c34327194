"""Tools from plain functions (schema from type hints and docstring) and prompt templates."""

import asyncio
import pickle

import pytest

from flink_agents.api import (
    ChatMessage,
    FlinkAgentsError,
    FunctionTool,
    MessageRole,
    Prompt,
    PromptFormatError,
    ResourceType,
    Tool,
    ToolArgumentsError,
    tool,
)
from flink_agents.api._tools import parse_docstring
from flink_agents.plan import compile_agent, plan_from_yaml
from flink_agents.runtime import LocalRunner
from tests.integrations import chat_agents as agents

# --- tools --------------------------------------------------------------------------------


def test_schema_comes_from_type_hints_and_the_docstring():
    spec = Tool.from_function(agents.forecast).metadata
    assert spec.name == "forecast"
    assert (
        spec.description
        == "Forecast the weather of a city.\n\nUses no network: the numbers are made up."
    )
    assert spec.parameters == {
        "type": "object",
        "additionalProperties": False,
        "required": ["city"],
        "properties": {
            "city": {"type": "string", "description": 'the city\'s name, e.g. "Lisbon".'},
            "days": {
                "type": "integer",
                "default": 1,
                "description": "how many days ahead, counting today as day one.",
            },
            "unit": {
                "type": "string",
                "enum": ["celsius", "fahrenheit"],
                "default": "celsius",
                "description": "the temperature unit.",
            },
            "tags": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
                "description": "free labels.",
            },
        },
    }


def test_call_validates_and_converts_arguments():
    forecast = Tool.from_function(agents.forecast)
    assert forecast.call({"city": "Porto", "days": "3"}) == {
        "city": "Porto",
        "days": 3,
        "unit": "celsius",
        "temperature": 21,
    }
    with pytest.raises(ToolArgumentsError) as caught:
        forecast.call({"city": "Porto", "unit": "kelvin", "wind": True})
    assert str(caught.value).startswith("tool 'forecast' got invalid arguments: unit: ")
    assert "wind: Extra inputs are not permitted" in str(caught.value)
    with pytest.raises(ToolArgumentsError, match="takes a JSON object"):
        forecast.call(["Porto"])


def test_tool_decorator_keeps_the_function_and_overrides_name_and_description():
    assert agents.add(2, 3) == 5  # still a plain function
    explode = Tool.from_function(agents.broken)
    assert (explode.metadata.name, explode.metadata.description) == (
        "explode",
        "A tool that always fails.",
    )
    renamed = Tool.from_function(agents.add, name="sum", description="Sums.")
    assert (renamed.metadata.name, renamed.metadata.description) == ("sum", "Sums.")
    assert renamed(1, 1) == 2 and renamed.call({"a": 1, "b": 1}) == 2


def test_async_functions_and_positional_only_parameters():
    async def slow_double(x: int, /) -> int:
        await asyncio.sleep(0)
        return 2 * x

    assert Tool.from_function(slow_double).call({"x": 21}) == 42


def test_an_async_function_tool_has_acall_and_a_plain_one_has_none():
    async def slow_double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    async_tool = Tool.from_function(slow_double)
    assert asyncio.run(async_tool.acall({"x": "21"})) == 42  # validated and converted
    with pytest.raises(ToolArgumentsError, match="got invalid arguments"):
        asyncio.run(async_tool.acall({"x": "twenty"}))
    assert Tool.from_function(agents.forecast).acall is None


def test_functions_that_cannot_be_described_are_rejected():
    def variadic(*values: int) -> int:
        return sum(values)

    with pytest.raises(FlinkAgentsError, match=r"\*args and \*\*kwargs cannot be described"):
        Tool.from_function(variadic)


def test_function_tools_pickle_and_describe_themselves_for_plans():
    tool_ = Tool.from_function(agents.forecast, description="Weather.")
    copy = pickle.loads(pickle.dumps(tool_))
    assert copy.metadata == tool_.metadata
    descriptor = tool_.descriptor()
    assert (descriptor.provider, descriptor.type, descriptor.args) == (
        "flink_agents.api:Tool.from_ref",
        ResourceType.TOOL,
        {"function": "tests.integrations.chat_agents:forecast", "description": "Weather."},
    )
    rebuilt = Tool.from_ref(**descriptor.args)
    assert isinstance(rebuilt, FunctionTool) and rebuilt.metadata == tool_.metadata


def test_tool_in_an_agent_class_becomes_a_tool_resource():
    [resource] = [r for r in compile_agent(agents.WeatherAgent).resources if r.type == "tool"]
    assert (resource.name, resource.provider, resource.args) == (
        "get_weather",
        "flink_agents.api:Tool.from_ref",
        {"function": "tests.integrations.chat_agents:WeatherAgent.get_weather"},
    )
    tool_ = LocalRunner(agents.WeatherAgent).engine.resources.get("get_weather")
    assert tool_.call({"city": "Faro"}) == "sunny in Faro"


def test_tool_decorator_works_with_arguments_and_below_staticmethod():
    @tool(name="shout")
    def loud(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    assert Tool.from_function(loud).metadata.name == "shout"
    assert Tool.from_function(staticmethod(loud)).call({"text": "hi"}) == "HI"


def test_docstring_parsing_handles_types_continuations_and_other_sections():
    description, args = parse_docstring(
        "Summary line.\n\nMore.\n\nArgs:\n    a (int): first\n        continued.\n"
        "    b: second.\n\nRaises:\n    ValueError: never.\n"
    )
    assert description == "Summary line.\n\nMore."
    assert args == {"a": "first continued.", "b": "second."}


# --- prompts ------------------------------------------------------------------------------


def test_text_prompt_fills_variables():
    prompt = Prompt.from_text("Hello {name}, tell me about {topic}. Literal {{braces}}.")
    assert prompt.variables == ["name", "topic"]
    assert (
        prompt.format(name="Ana", topic="Flink")
        == "Hello Ana, tell me about Flink. Literal {braces}."
    )
    assert prompt.format_messages(name="Ana", topic="Flink", unused=1) == [
        ChatMessage(
            role=MessageRole.USER, content="Hello Ana, tell me about Flink. Literal {braces}."
        )
    ]
    assert prompt.format_messages(MessageRole.SYSTEM, name="a", topic="b")[0].role == "system"


def test_message_prompt_fills_every_message():
    prompt = Prompt.from_messages(
        [
            {"role": "system", "content": "You answer in {language}."},
            ChatMessage(role=MessageRole.USER, content="{question}"),
        ]
    )
    assert prompt.variables == ["language", "question"]
    assert prompt.format_messages(language="Portuguese", question="Why?") == [
        ChatMessage(role=MessageRole.SYSTEM, content="You answer in Portuguese."),
        ChatMessage(role=MessageRole.USER, content="Why?"),
    ]
    assert prompt.format(language="pt", question="q") == "You answer in pt.\nq"


def test_missing_variable_is_a_clear_error():
    prompt = Prompt.from_text("Hello {user.name}, about {topic}")
    with pytest.raises(PromptFormatError) as caught:
        prompt.format(topic="x")
    assert str(caught.value) == (
        "prompt variable 'user' was not given (the prompt uses user, topic; given: topic)"
    )


@pytest.mark.parametrize("template", ["Hello {}", "Hello {0}", "Hello {name"])
def test_malformed_templates_fail_when_the_prompt_is_made(template):
    with pytest.raises(PromptFormatError):
        Prompt.from_text(template)


def test_prompt_resource_from_a_plan_file():
    plan = plan_from_yaml(
        "name: p\nactions:\n  - name: a\n"
        "    function: tests.integrations.chat_agents:WeatherAgent.ask\n"
        "    listen_to: [InputEvent]\nresources:\n  - name: greeting\n    type: prompt\n"
        "    provider: flink_agents.api._prompts:Prompt.from_text\n"
        "    args: {text: 'Hi {name}'}\n"
    )
    prompt = LocalRunner(plan).engine.resources.get("greeting", ResourceType.PROMPT)
    assert prompt.format(name="Bo") == "Hi Bo"
    assert prompt.descriptor().args == {"text": "Hi {name}"}
