"""Module-level agents and helpers for the MCP tests (plans name them as ``module:qualname``).

The calendar server runs over stdio with this interpreter; the scripted model's address and
key come from ``TEST_LLM_URL`` / ``TEST_LLM_KEY`` and the bookings ledger from
``CALENDAR_LEDGER`` (set per test), so the plans hold only environment references.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from flink_agents.api import (
    Agent,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    Prompt,
    ResourceType,
    action,
    resource,
)
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.integrations.mcp import MCPServer
from tests.integrations.chat_agents import SCRIPTED_MODEL

SERVER_SCRIPT = str(Path(__file__).with_name("calendar_server.py"))
STDIO = dict(
    command=sys.executable, args=[SERVER_SCRIPT], env={"CALENDAR_LEDGER": "${env:CALENDAR_LEDGER}"}
)


class Scheduler(Agent):
    """Sends its own chat request naming the MCP server as its tools (the built-in chat and
    tool actions run the loop), with the server's prompt fetched by name."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx) -> None:
        prompt: Prompt = ctx.get_resource("plan_day", ResourceType.PROMPT)
        ctx.send_event(
            ChatRequestEvent(
                model="llm",
                messages=prompt.format_messages(**event.input),
                tools=["calendar"],
            )
        )

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))

    @resource(ResourceType.CHAT_MODEL, **SCRIPTED_MODEL)
    @staticmethod
    def llm(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)

    @resource(ResourceType.MCP_SERVER, **STDIO)
    @staticmethod
    def calendar(**args: Any) -> MCPServer:
        return MCPServer(**args)
