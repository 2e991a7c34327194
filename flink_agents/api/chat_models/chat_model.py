"""Chat model connections and setups as Apache Flink Agents defines them
(``flink_agents.api.chat_models.chat_model``), for chat models of your own written their
way: a connection's ``chat(messages, tools, **kwargs)`` returns a ``ChatMessage``; a setup
names its connection, prompt and tools and calls the connection.

The runner answers a ``ChatRequestEvent`` naming such a setup through it, as it does through
a model of ours (durable calls, tools, limits); the setups that ``ResourceName.ChatModel``
names (Ollama, OpenAI) are ours, over ``OpenAIChatModel``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from flink_agents.api._chat import BaseChatModel, ChatMessage, MessageRole
from flink_agents.api._prompts import Prompt
from flink_agents.api._resources import ResourceType
from flink_agents.api.resource import Resource


class BaseChatModelConnection(Resource):
    """Where a provider is, and how to call it."""

    @classmethod
    def resource_type(cls) -> ResourceType:
        return ResourceType.CHAT_MODEL_CONNECTION

    @abstractmethod
    def chat(
        self, messages: Sequence[ChatMessage], tools: list[Any] | None = None, **kwargs: Any
    ) -> ChatMessage:
        """The model's answer to ``messages`` (its tool calls in ``tool_calls``); ``tools``
        are the tools offered (each with ``name`` and ``metadata``)."""


class BaseChatModelSetup(Resource):
    """A model at a connection, with its prompt and tools.

    Attributes:
        connection: the name of a chat model connection resource.
        prompt: a ``Prompt``, or the name of a prompt resource, filled with the messages'
            ``extra_args``.
        tools: names of the tool resources offered.
    """

    connection: str
    prompt: Prompt | str | None = None
    tools: list[str] | None = None

    @classmethod
    def resource_type(cls) -> ResourceType:
        return ResourceType.CHAT_MODEL

    @property
    @abstractmethod
    def model_kwargs(self) -> dict[str, Any]:
        """Arguments of every call to the connection (the model's name, temperature...)."""

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        """Fill the prompt, bind the tools, and ask the connection."""
        connection = self.get_resource(self.connection, ResourceType.CHAT_MODEL_CONNECTION)
        if self.prompt is not None:
            prompt = self.prompt
            if isinstance(prompt, str):
                prompt = self.get_resource(prompt, ResourceType.PROMPT)
            messages = behind_prompt(prompt, messages)
        tools = None
        if self.tools is not None:
            tools = [self.get_resource(name, ResourceType.TOOL) for name in self.tools]
        return connection.chat(messages, tools=tools, **{**self.model_kwargs, **kwargs})


def behind_prompt(prompt: Prompt, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``prompt``'s messages, filled with the ``extra_args`` of ``messages``, followed by
    those of ``messages`` that have text (or are the assistant's): how a setup applies its
    prompt."""
    variables: dict[str, str] = {}
    for message in messages:
        variables.update({k: str(v) for k, v in message.extra_args.items()})
    kept = [m for m in messages if m.content or m.role is MessageRole.ASSISTANT]
    return [*prompt.format_messages(**variables), *kept]


__all__ = ["BaseChatModel", "BaseChatModelConnection", "BaseChatModelSetup", "behind_prompt"]
