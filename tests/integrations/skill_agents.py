"""Module-level agents with skills for the skills tests (plans name them by module path).

The chat model reads the scripted server's address and key from ``TEST_LLM_URL`` /
``TEST_LLM_KEY``, as in ``chat_agents``.
"""

from __future__ import annotations

from typing import Any

from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceType,
    RunnerContext,
    Skills,
    action,
    resource,
)
from flink_agents.integrations.chat import OpenAIChatModel
from tests.integrations.chat_agents import SCRIPTED_MODEL

PACKAGE = ("tests.integrations.skill_pack", "skills")


class SkilledAsker(Agent):
    """A plain action offers the skills: their summary in its messages, their tools by name
    in its chat request; another action emits the answer."""

    @resource(ResourceType.CHAT_MODEL, **SCRIPTED_MODEL)
    @staticmethod
    def llm(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)

    @resource(ResourceType.SKILLS, packages=[list(PACKAGE)])
    @staticmethod
    def skills(**args: Any) -> Skills:
        return Skills(**args)

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        skills = ctx.get_resource("skills", ResourceType.SKILLS)
        question = ChatMessage(role=MessageRole.USER, content=event.input)
        ctx.send_event(
            ChatRequestEvent(
                model="llm",
                messages=skills.add_summary([question]),
                tools=skills.tool_names(),
            )
        )

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


class SkillLister(Agent):
    """An action that only reads the skills it is given: their names and descriptions."""

    @resource(ResourceType.SKILLS, packages=[list(PACKAGE)])
    @staticmethod
    def skills(**args: Any) -> Skills:
        return Skills(**args)

    @action(InputEvent)
    @staticmethod
    def list_skills(event: InputEvent, ctx: RunnerContext) -> None:
        skills = ctx.get_resource("skills", ResourceType.SKILLS)
        ctx.send_event(OutputEvent(output={s.name: s.description[:20] for s in skills}))
