"""Agents written as Apache Flink Agents 0.3's documentation writes them: actions listening to
event type strings, ``Event(type=..., attributes=...)``, ``X.from_event``, and skills
declared with ``@skills`` and offered by a chat model setup. (Our own code, their style.)"""

import os

from flink_agents.api.agents.agent import STRUCTURED_OUTPUT, Agent
from flink_agents.api.chat_message import ChatMessage, MessageRole
from flink_agents.api.decorators import action, chat_model_connection, chat_model_setup, skills
from flink_agents.api.events.chat_event import ChatRequestEvent, ChatResponseEvent
from flink_agents.api.events.event import Event, InputEvent, OutputEvent
from flink_agents.api.resource import ResourceDescriptor, ResourceName
from flink_agents.api.runner_context import RunnerContext
from flink_agents.api.skills import Skills

STAND_IN = "MIGRATION_STAND_IN_URL"
ASKED = "QuestionAsked"


class Asks(Agent):
    """Input -> an event of a type string -> a request to the model ``converter``."""

    @action(InputEvent.EVENT_TYPE)
    @staticmethod
    def ask(event: Event, ctx: RunnerContext) -> None:
        question = InputEvent.from_event(event).input
        ctx.send_event(Event(type=ASKED, attributes={"question": question}))

    @action(ASKED)
    @staticmethod
    def to_model(event: Event, ctx: RunnerContext) -> None:
        message = ChatMessage(role=MessageRole.USER, content=event.get_attr("question"))
        ctx.send_event(ChatRequestEvent(model="converter", messages=[message]))


class TypedAgent(Asks):
    @skills
    @staticmethod
    def pack() -> Skills:
        return Skills.from_package(("tests.integrations.skill_pack", "skills"))

    @chat_model_connection
    @staticmethod
    def stand_in() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=ResourceName.ChatModel.OPENAI_CONNECTION,
            api_base_url=os.environ[STAND_IN] + "/v1",
            api_key=os.environ["MIGRATION_API_KEY"],
        )

    @chat_model_setup
    @staticmethod
    def converter() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=ResourceName.ChatModel.OPENAI_SETUP,
            connection="stand_in",
            model="gpt-4o-mini",
            skills=["unit-converter"],
        )

    @action(ChatResponseEvent.EVENT_TYPE)
    @staticmethod
    def answer(event: Event, ctx: RunnerContext) -> None:
        response = ChatResponseEvent.from_event(event).response
        structured = response.extra_args.get(STRUCTURED_OUTPUT)
        ctx.send_event(OutputEvent(output=structured or response.content))


CRASH_ONCE: set[str] = set()
"""Keys whose next answer action crashes (the process dying after the model answered)."""


class Crash(Exception):
    """The process dying, as far as the run can tell."""


class RestoredAgent(Asks):
    """0.3 style: input -> a typed event -> a model call -> the answer (crashes once)."""

    @chat_model_connection
    @staticmethod
    def stand_in() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_CONNECTION, base_url=os.environ[STAND_IN]
        )

    @chat_model_setup
    @staticmethod
    def converter() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_SETUP, connection="stand_in", model="qwen3:8b"
        )

    @action(ChatResponseEvent.EVENT_TYPE)
    @staticmethod
    def answer(event: Event, ctx: RunnerContext) -> None:
        if ctx.key in CRASH_ONCE:
            CRASH_ONCE.discard(ctx.key)
            raise Crash(f"crashed after the model answered {ctx.key}")
        ctx.send_event(OutputEvent(output=ChatResponseEvent.from_event(event).response.content))
