"""Agents written as Apache Flink Agents 0.2's documentation writes them: their import paths,
decorators and resource descriptors, unchanged. (Our own code, in their style.)"""

import json
import os

from pydantic import BaseModel

from flink_agents.api.agents.agent import Agent
from flink_agents.api.chat_message import ChatMessage, MessageRole
from flink_agents.api.decorators import (
    action,
    chat_model_connection,
    chat_model_setup,
    prompt,
    tool,
)
from flink_agents.api.events.chat_event import ChatRequestEvent, ChatResponseEvent
from flink_agents.api.events.event import Event, InputEvent, OutputEvent
from flink_agents.api.prompts.prompt import Prompt
from flink_agents.api.resource import ResourceDescriptor, ResourceName
from flink_agents.api.runner_context import RunnerContext

STAND_IN = "MIGRATION_STAND_IN_URL"
"""The scripted model's root URL (``http://127.0.0.1:port``), as Ollama's would be."""

SHIPPING_NOTES: list[str] = []


class Review(BaseModel):
    id: str
    review: str


class ReviewScore(BaseModel):
    id: str
    score: int
    reasons: list[str]


ANALYSIS = Prompt.from_messages(
    messages=[
        ChatMessage(
            role=MessageRole.SYSTEM,
            content='Score the review from 1 to 5. Answer as JSON: {{"score": 1, "reasons": []}}',
        ),
        ChatMessage(role=MessageRole.USER, content="review: {input}"),
    ]
)


def ollama_connection() -> ResourceDescriptor:
    return ResourceDescriptor(
        clazz=ResourceName.ChatModel.OLLAMA_CONNECTION,
        base_url=os.environ[STAND_IN],
        request_timeout=30,
    )


class ReviewAnalysisAgent(Agent):
    """Reads a review, asks the model (with a prompt and a tool), emits the score."""

    @prompt
    @staticmethod
    def analysis_prompt() -> Prompt:
        return ANALYSIS

    @tool
    @staticmethod
    def notify_shipping_manager(id: str, review: str) -> None:
        """Tell the shipping manager about a review that complains of shipping.

        Args:
            id: the product's id.
            review: the review's text.
        """
        SHIPPING_NOTES.append(id)

    @chat_model_connection
    @staticmethod
    def stand_in() -> ResourceDescriptor:
        return ollama_connection()

    @chat_model_setup
    @staticmethod
    def review_model() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_SETUP,
            connection="stand_in",
            model="qwen3:8b",
            prompt="analysis_prompt",
            tools=["notify_shipping_manager"],
            extract_reasoning=True,
        )

    @action(InputEvent)
    @staticmethod
    def process_input(event: InputEvent, ctx: RunnerContext) -> None:
        review: Review = event.input
        ref = ctx.short_term_memory.set("id", review.id)
        ctx.sensory_memory.set("ref", ref)
        message = ChatMessage(role=MessageRole.USER, extra_args={"input": review.review})
        ctx.send_event(ChatRequestEvent(model="review_model", messages=[message]))

    @action(ChatResponseEvent)
    @staticmethod
    def process_chat_response(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        answer = json.loads(event.response.content)
        product = ctx.short_term_memory.get(ctx.sensory_memory.get("ref"))
        ctx.send_event(
            OutputEvent(
                output=ReviewScore(id=product, score=answer["score"], reasons=answer["reasons"])
            )
        )


class Counted(Event):
    """An event of theirs with a field of its own."""

    count: int


class CounterAgent(Agent):
    """Memory as theirs is used: refs, sets, objects that pickle, ``new_object``."""

    @action(InputEvent)
    @staticmethod
    def count(event: InputEvent, ctx: RunnerContext) -> None:
        memory = ctx.short_term_memory
        seen = memory.get("seen") or set()
        seen.add(event.input)
        memory.set("seen", seen)
        stats = memory.new_object("stats", overwrite=True)
        stats.set("n", len(seen))
        ctx.send_event(Counted(count=len(seen), note="extra fields are kept"))

    @action(Counted)
    @staticmethod
    def emit(event: Counted, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=(event.count, event.note, ctx.config.get_int("step"))))


def notify_shipping_manager(id: str, review: str) -> str:
    """Tell the shipping manager about a review that complains of shipping.

    Args:
        id: the product's id.
        review: the review's text.
    """
    SHIPPING_NOTES.append(id)
    return "noted"


REACT_PROMPT = Prompt.from_messages(
    messages=[
        ChatMessage(role=MessageRole.SYSTEM, content="Score reviews; notify shipping issues."),
        ChatMessage(role=MessageRole.USER, content='"id": {id}, "review": {review}'),
    ]
)


def react_agent():
    """Their ReAct quickstart's shape: a setup naming its tools, a prompt over the input's
    fields, a pydantic output schema."""
    from flink_agents.api.agents.react_agent import ReActAgent

    return ReActAgent(
        chat_model=ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_SETUP,
            connection="stand_in",
            model="qwen3:8b",
            tools=["notify_shipping_manager"],
        ),
        prompt=REACT_PROMPT,
        output_schema=ReviewScore,
    )
