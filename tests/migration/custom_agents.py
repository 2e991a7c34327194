"""A chat model of the user's own, written Apache Flink Agents' way: a connection class
returning tool calls in the chat-completions form, a setup class that fills its prompt and
binds its tools, both named by class path. (Our own code, in their style.)"""

import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from flink_agents.api.agents.agent import Agent
from flink_agents.api.chat_message import ChatMessage, MessageRole
from flink_agents.api.chat_models.chat_model import BaseChatModelConnection, BaseChatModelSetup
from flink_agents.api.decorators import (
    action,
    chat_model_connection,
    chat_model_setup,
    prompt,
    tool,
)
from flink_agents.api.events.chat_event import ChatRequestEvent, ChatResponseEvent
from flink_agents.api.events.event import InputEvent, OutputEvent
from flink_agents.api.prompts.prompt import Prompt
from flink_agents.api.resource import ResourceDescriptor
from flink_agents.api.runner_context import RunnerContext
from flink_agents.api.tools.tool import ToolType

CALLS: list[list[str]] = []


class Sum(BaseModel):
    total: int


class ArithmeticConnection(BaseChatModelConnection):
    """Asks for the ``add`` tool when the task says so, then answers with its result."""

    greeting: str = "result"

    def chat(
        self, messages: Sequence[ChatMessage], tools: list | None = None, **kwargs: Any
    ) -> ChatMessage:
        CALLS.append([m.content for m in messages])
        if messages[-1].role is MessageRole.TOOL:
            return ChatMessage(
                role=MessageRole.ASSISTANT, content=f'{{"total": {messages[-1].content}}}'
            )
        assert [t.name for t in tools] == ["add"]
        assert tools[0].metadata.get_parameters_dict()["required"] == ["a", "b"]
        call = {
            "id": uuid.uuid4(),
            "type": ToolType.FUNCTION,
            "function": {"name": "add", "arguments": {"a": 1, "b": 2}},
        }
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])


class ArithmeticModel(BaseChatModelSetup):
    temperature: float = 0.0

    @property
    def model_kwargs(self) -> dict[str, Any]:
        return {"temperature": self.temperature}


class CustomModelAgent(Agent):
    @prompt
    @staticmethod
    def task_prompt() -> Prompt:
        return Prompt.from_text("Use the tools for: {task}")

    @chat_model_connection
    @staticmethod
    def arithmetic() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=f"{__name__}.ArithmeticConnection")

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=ArithmeticModel, connection="arithmetic", prompt="task_prompt", tools=["add"]
        )

    @tool
    @staticmethod
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Parameters
        ----------
        a : int
            The first.
        b : int
            The second.
        """
        return a + b

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        message = ChatMessage(role=MessageRole.USER, extra_args={"task": event.input})
        ctx.send_event(ChatRequestEvent(model="model", messages=[message], output_schema=Sum))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.extra_args["structured_output"]))
