"""Module-level agents for the multimodal tests: a record's image and document go to a chat
model as parts of one message, which short-term memory keeps.

Resources read the stand-in's address and key from ``TEST_LLM_URL`` / ``TEST_LLM_KEY``. The
stand-in's model ``textonly`` is the one a test makes refuse images.
"""

from __future__ import annotations

from typing import Any

from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    DocumentPart,
    ImagePart,
    InputEvent,
    OutputEvent,
    Prompt,
    ResourceType,
    action,
    resource,
)
from flink_agents.integrations.chat import OpenAIChatModel
from tests.integrations.chat_agents import SCRIPTED_MODEL

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
"""An image's bytes (a PNG signature, then every byte value: none is lost on the way)."""

PDF = b"%PDF-1.7\n" + bytes(range(255, -1, -1)) + b"\n%%EOF"

QUESTION = Prompt.from_messages(
    [
        {"role": "system", "content": "You describe what you are shown."},
        {"role": "user", "content": "{question} {image} Compare it with {report}"},
    ]
)

CRASH_ONCE: set[str] = set()
"""Ids of records whose answer fails once, after the model was asked (a crash)."""


def question_of(record: dict[str, Any]) -> list[ChatMessage]:
    """The record's question, image and document, as a prompt makes them."""
    return QUESTION.format_messages(
        question=record["question"],
        image=ImagePart(data=record["image"], detail="low"),
        report=DocumentPart(data=record["doc"], name="report.pdf"),
    )


class Describes(Agent):
    """Asks a model about a record's image and document; answers with the model's text."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx) -> None:
        record = event.input
        messages = question_of(record)
        ctx.short_term_memory.set("question", messages[-1])
        ctx.short_term_memory.set("id", record["id"])
        ctx.send_event(ChatRequestEvent(model=record.get("model", "vision"), messages=messages))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx) -> None:
        record_id = ctx.short_term_memory.get("id")
        if record_id in CRASH_ONCE:
            CRASH_ONCE.discard(record_id)
            raise RuntimeError(f"crashed after the model answered {record_id}")
        stored = ctx.short_term_memory.get("question")
        ctx.send_event(
            OutputEvent(
                output={
                    "id": record_id,
                    "answer": event.response.text,
                    "by": event.model,
                    "parts": [part.type for part in stored.parts],
                }
            )
        )

    @resource(ResourceType.CHAT_MODEL, **SCRIPTED_MODEL)
    @staticmethod
    def vision(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)

    @resource(ResourceType.CHAT_MODEL, **{**SCRIPTED_MODEL, "model": "textonly"})
    @staticmethod
    def text_only(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)

    @resource(
        ResourceType.CHAT_MODEL, **{**SCRIPTED_MODEL, "model": "textonly"}, fallbacks=["vision"]
    )
    @staticmethod
    def text_first(**args: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**args)
