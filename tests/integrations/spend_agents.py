"""Module-level agents and routes for the spend tests (fallbacks, routing, budgets).

Every chat model is the scripted server under another model name (``TEST_LLM_URL`` /
``TEST_LLM_KEY``, set per test), so a rule with ``model=`` tells which one answered.
"""

from __future__ import annotations

import json
from pathlib import Path
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
    action,
    resource,
)
from flink_agents.integrations.chat import OpenAIChatModel
from tests.runtime.forgetting_agents import crash_once

SCRIPTED = dict(
    base_url="${env:TEST_LLM_URL}",
    api_key={"env": "TEST_LLM_KEY"},
    max_retries=0,
    retry_initial_wait=0.01,
)


ROUTED: list[str] = []
"""The texts ``long_goes_big`` was asked about, in this process."""


def long_goes_big(messages: list[ChatMessage]) -> str | None:
    """The route of ``primary``: requests over 100 characters go to ``big``."""
    ROUTED.append(messages[-1].content)
    return "big" if sum(len(m.content) for m in messages) > 100 else None


def routes_nowhere(messages: list[ChatMessage]) -> str | None:
    return "nonexistent"


class Asks(Agent):
    """Asks the model the record's ``model`` field names (default ``primary``) its
    ``text``, and outputs who answered and what."""

    @resource(ResourceType.CHAT_MODEL, model="primary", fallbacks=["backup", "last"], **SCRIPTED)
    @staticmethod
    def primary(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(route=long_goes_big, **args)

    @resource(ResourceType.CHAT_MODEL, model="backup", **SCRIPTED)
    @staticmethod
    def backup(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)

    @resource(ResourceType.CHAT_MODEL, model="last", **SCRIPTED)
    @staticmethod
    def last(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)

    @resource(ResourceType.CHAT_MODEL, model="big", **SCRIPTED)
    @staticmethod
    def big(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)

    @resource(ResourceType.CHAT_MODEL, model="lost", route=f"{__name__}:routes_nowhere", **SCRIPTED)
    @staticmethod
    def lost(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)

    @resource(
        ResourceType.CHAT_MODEL, model="sized", route={"over_tokens": 20, "to": "big"}, **SCRIPTED
    )
    @staticmethod
    def sized(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        record = event.input
        ctx.send_event(
            ChatRequestEvent(
                model=record.get("model", "primary"),
                messages=[ChatMessage(role=MessageRole.USER, content=record["text"])],
            )
        )

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"by": event.model, "text": event.response.content}))


def parse_record(line: str) -> dict[str, Any]:
    """A JSON line of the Flink job's input; one with ``crash`` (a marker file's path)
    fails the job the first time it is read, so Flink restores its last checkpoint."""
    record = json.loads(line)
    if record.get("crash"):
        crash_once(Path(record["crash"]))
    return record


PACE = 600
"""Requests a minute ``PacedAsks``'s ``primary`` may make (one each 100 ms)."""


class PacedAsks(Asks):
    """``Asks`` with its ``primary`` model paced at ``PACE`` requests a minute."""

    @resource(
        ResourceType.CHAT_MODEL,
        model="primary",
        fallbacks=["backup", "last"],
        requests_per_minute=PACE,
        **SCRIPTED,
    )
    @staticmethod
    def primary(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(route=long_goes_big, **args)
