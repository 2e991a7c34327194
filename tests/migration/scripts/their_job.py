"""A one-file job written as Apache Flink Agents' documentation writes one, run with
``python their_job.py OUT [process]``: their import paths, decorators, a chat model
connection added to the environment and a setup declared by the agent, a prompt and a tool,
events of their 0.2 kind (classes) and of their 0.3 kind (type strings), a pyflink ``Row`` in
an event, a memory reference, a ``KeySelector``, and ``execute()``.

The model is the scripted stand-in at ``$MIGRATION_STAND_IN_URL`` (given as Ollama's root
URL); OUT gets one JSON line per output.
"""

import json
import os
import sys

from pyflink.common import Configuration, Row, Types
from pyflink.datastream import KeySelector, StreamExecutionEnvironment

from flink_agents.api.agents.agent import Agent
from flink_agents.api.chat_message import ChatMessage, MessageRole
from flink_agents.api.core_options import AgentExecutionOptions
from flink_agents.api.decorators import action, chat_model_setup, prompt, tool
from flink_agents.api.events.chat_event import ChatRequestEvent, ChatResponseEvent
from flink_agents.api.events.event import Event, InputEvent, OutputEvent
from flink_agents.api.execution_environment import AgentsExecutionEnvironment
from flink_agents.api.prompts.prompt import Prompt
from flink_agents.api.resource import ResourceDescriptor, ResourceName, ResourceType
from flink_agents.api.runner_context import RunnerContext

FLAGGED = "Flagged"
"""A type string of their 0.3 event API."""


class Scored(Event):
    """An event of their 0.2 kind: a class, here with a pyflink Row."""

    row: Row


class ReviewAgent(Agent):
    @prompt
    @staticmethod
    def review_prompt() -> Prompt:
        return Prompt.from_messages(
            messages=[
                ChatMessage(role=MessageRole.SYSTEM, content='Score it. JSON: {{"score": 0}}'),
                ChatMessage(role=MessageRole.USER, content="{input}"),
            ]
        )

    @tool
    @staticmethod
    def flag_shipping(id: str) -> str:
        """Flag a product whose reviews complain about shipping.

        Args:
            id: the product.
        """
        return f"flagged {id}"

    @chat_model_setup
    @staticmethod
    def reviewer() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_SETUP,
            connection="stand_in",
            model="qwen3:8b",
            prompt="review_prompt",
            tools=["flag_shipping"],
        )

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        record = event.input
        ref = ctx.short_term_memory.set("review", record["review"])
        ctx.sensory_memory.set("ref", ref)
        message = ChatMessage(role=MessageRole.USER, extra_args={"input": record["review"]})
        ctx.send_event(ChatRequestEvent(model="reviewer", messages=[message]))

    @action(ChatResponseEvent)
    @staticmethod
    def score(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        score = json.loads(event.response.content)["score"]
        review = ctx.short_term_memory.get(ctx.sensory_memory.get("ref"))
        ctx.send_event(Scored(row=Row(review=review, score=score)))

    @action(Scored)
    @staticmethod
    def judge(event: Scored, ctx: RunnerContext) -> None:
        if event.row.score < 3:
            ctx.send_event(Event(type=FLAGGED, attributes={"review": event.row.review}))
        else:
            ctx.send_event(OutputEvent(output={"review": event.row.review, "flagged": False}))

    @action(FLAGGED)
    @staticmethod
    def flagged(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"review": event.get_attr("review"), "flagged": True}))


class ByProduct(KeySelector):
    def get_key(self, value):
        return value["id"]


def main(out: str, mode: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    if mode == "process":
        env.configure(Configuration().set_string("python.execution-mode", "process"))
    agents_env = AgentsExecutionEnvironment.get_execution_environment(env)
    agents_env.get_config().set(AgentExecutionOptions.NUM_ASYNC_THREADS, 4)
    agents_env.add_resource(
        "stand_in",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_CONNECTION,
            base_url=os.environ["MIGRATION_STAND_IN_URL"],
            request_timeout=60,
        ),
    )
    reviews = env.from_collection(
        [
            json.dumps({"id": "p1", "review": "box arrived crushed"}),
            json.dumps({"id": "p2", "review": "great sound"}),
            json.dumps({"id": "p1", "review": "works fine"}),
        ],
        type_info=Types.STRING(),
    ).map(json.loads, output_type=Types.PICKLED_BYTE_ARRAY())

    def write(output):
        with open(out, "a") as file:
            file.write(json.dumps(output, sort_keys=True) + "\n")
        return output

    outputs = (
        agents_env.from_datastream(input=reviews, key_selector=ByProduct())
        .apply(ReviewAgent())
        .to_datastream()
    )
    outputs.map(write, output_type=Types.PICKLED_BYTE_ARRAY())
    agents_env.execute()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "default")
