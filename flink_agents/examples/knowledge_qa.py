"""Answering questions from a knowledge set through a chat model (retrieval-augmented).

Declared in ``plans/knowledge_qa.yaml``; load the knowledge first, e.g. with
``flink-agents knowledge load product_faq data/product_faq.jsonl``. One run per question::

    InputEvent ─ ask ─► ContextRetrievalRequestEvent ──(built-in retrieval)──►
    ContextRetrievalResponseEvent ─ answer ─► ChatRequestEvent ──(built-in chat)──►
    ChatResponseEvent ─ finish ─► OutputEvent {question, answer, sources}

The plan's ``config`` names the knowledge set (``knowledge_set``), how many documents go
into the prompt (``max_results``), the chat-model resource (``chat_model``) and the prompt
resource (``prompt``, with ``{context}`` and ``{question}``). A record is a question, or an
object with a ``question`` field.
"""

from __future__ import annotations

from typing import Any

from flink_agents.api import (
    ChatRequestEvent,
    ChatResponseEvent,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    InputEvent,
    OutputEvent,
    ResourceType,
    RunnerContext,
)

DEFAULTS = {
    "knowledge_set": "product_faq",
    "max_results": 2,
    "chat_model": "llm",
    "prompt": "qa_prompt",
}
RETRIEVED = "retrieved"
"""Sensory memory: the question and the ids of the documents its prompt was built from."""

NOTHING_FOUND = "(no documents found)"


def ask(event: InputEvent, ctx: RunnerContext) -> None:
    """Ask the built-in retrieval action for the documents closest to the question."""
    ctx.send_event(
        ContextRetrievalRequestEvent(
            query=question_of(event.input),
            knowledge_set=_setting(ctx, "knowledge_set"),
            max_results=_setting(ctx, "max_results"),
        )
    )


def answer(event: ContextRetrievalResponseEvent, ctx: RunnerContext) -> None:
    """Put the documents found into the prompt and ask the chat model."""
    sources = [source_of(d.value, d.id) for d in event.documents]
    ctx.sensory_memory.set(RETRIEVED, {"question": event.query, "sources": sources})
    context = "\n".join(f"- {text}" for text in event.texts()) or NOTHING_FOUND
    prompt = ctx.get_resource(_setting(ctx, "prompt"), ResourceType.PROMPT)
    ctx.send_event(
        ChatRequestEvent(
            model=_setting(ctx, "chat_model"),
            messages=prompt.format_messages(context=context, question=event.query),
            tools=[],
        )
    )


def finish(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    """Emit the answer with the question and the documents it was given."""
    retrieved = ctx.sensory_memory.get(RETRIEVED)
    answer_text = event.response.text.strip()
    ctx.send_event(OutputEvent(output={**retrieved, "answer": answer_text}))


def question_of(record: Any) -> str:
    """The question a record asks: the record itself, or its ``question`` field."""
    if isinstance(record, str):
        return record
    if isinstance(record, dict) and isinstance(record.get("question"), str):
        return record["question"]
    raise ValueError(f"a record is a question or an object with a 'question' string: {record!r}")


def source_of(value: Any, item_id: str) -> str:
    """How an answer cites a document: its ``id`` as loaded, else the item's id."""
    if isinstance(value, dict) and value.get("id") is not None:
        return str(value["id"])
    return item_id


def _setting(ctx: RunnerContext, name: str) -> Any:
    return ctx.config.get(name, DEFAULTS[name])
