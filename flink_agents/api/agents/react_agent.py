"""``ReActAgent`` as Apache Flink Agents builds it (``flink_agents.api.agents.react_agent``).

Their constructor: ``ReActAgent(chat_model=<setup descriptor>, prompt=..., output_schema=...)``
where the chat model setup names its tools. It is our ``ReActAgent``: the model's own
tools are offered (theirs, by name), a text prompt is the user's message, and the agent can
be given more actions and resources in code like any of their agents.
"""

from __future__ import annotations

import importlib
from typing import Any

from pydantic import BaseModel

from flink_agents.agents import ReActAgent as _ReActAgent
from flink_agents.api._chat import ChatMessage, MessageRole
from flink_agents.api.agents.agent import Agent
from flink_agents.api.agents.types import OutputSchema
from flink_agents.api.prompts.prompt import Prompt


class ReActAgent(_ReActAgent, Agent):
    """A ReAct agent over a chat model setup (its tools are those the setup names)."""

    def __init__(
        self,
        *,
        chat_model: Any,
        prompt: Prompt | str | None = None,
        output_schema: type[BaseModel] | None = None,
        **options: Any,
    ) -> None:
        Agent.__init__(self)
        if output_schema is not None and not (
            isinstance(output_schema, type) and issubclass(output_schema, BaseModel)
        ):
            raise TypeError(
                f"output_schema {output_schema!r} is not supported here: give a pydantic model "
                "class (a RowTypeInfo schema is not supported, docs/migrating.md)"
            )
        if isinstance(prompt, str):
            prompt = Prompt.from_text(prompt)
        if getattr(prompt, "text", None) is not None:  # their text prompt: the user's turn
            prompt = Prompt.from_messages([ChatMessage(role=MessageRole.USER, content=prompt.text)])
        _ReActAgent.__init__(
            self, chat_model=chat_model, prompt=prompt, output_schema=output_schema, **options
        )

    def to_plan(self) -> Any:
        plan = _ReActAgent.to_plan(self)
        data = plan.model_dump(mode="json")
        react = data["config"]["react"]
        if not react.get("tools"):
            react.pop("tools", None)  # the setup's own tools, as there
        return importlib.import_module("flink_agents.migration").extend_plan(data, self)


__all__ = ["OutputSchema", "ReActAgent"]
