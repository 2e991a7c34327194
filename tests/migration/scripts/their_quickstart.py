"""Apache Flink Agents' quickstart, as its users write it, in one file: product reviews read
from a JSON file as a table, analysed by a workflow agent (a chat model setup with a prompt
and a tool), the scores of each product gathered (a count window), improvements suggested by
a second agent; and the same reviews scored by a ReAct agent over a setup that names its
tool. Run with ``python their_quickstart.py REVIEWS OUT``; the model is the scripted
stand-in at ``$MIGRATION_STAND_IN_URL`` (Ollama's root URL). OUT gets a JSON line per output
of either pipeline, tagged.
"""

import json
import os
import sys
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from pyflink.common import Types
from pyflink.datastream import KeySelector, ProcessWindowFunction, StreamExecutionEnvironment
from pyflink.table import DataTypes, Schema, StreamTableEnvironment, TableDescriptor

from flink_agents.api.agents.agent import Agent
from flink_agents.api.agents.react_agent import ReActAgent
from flink_agents.api.chat_message import ChatMessage, MessageRole
from flink_agents.api.core_options import AgentExecutionOptions
from flink_agents.api.decorators import action, chat_model_setup, prompt, tool
from flink_agents.api.events.chat_event import ChatRequestEvent, ChatResponseEvent
from flink_agents.api.events.event import InputEvent, OutputEvent
from flink_agents.api.execution_environment import AgentsExecutionEnvironment
from flink_agents.api.prompts.prompt import Prompt
from flink_agents.api.resource import ResourceDescriptor, ResourceName, ResourceType
from flink_agents.api.runner_context import RunnerContext
from flink_agents.api.tools.tool import Tool


class Analysis(BaseModel):
    id: str
    score: int
    reasons: list[str]


class Summary(BaseModel):
    id: str
    score_hist: list[str]
    unsatisfied_reasons: list[str]


def notify_shipping_manager(id: str, review: str) -> str:
    """Tell the shipping manager about a review that complains of shipping.

    Args:
        id: the product.
        review: the review.
    """
    return f"shipping manager told about {id}"


ANALYSIS_PROMPT = Prompt.from_messages(
    messages=[
        ChatMessage(
            role=MessageRole.SYSTEM,
            content='Score the review 1-5 with reasons, as JSON: {{"score": 1, "reasons": []}}',
        ),
        ChatMessage(role=MessageRole.USER, content="input: {input}"),
    ]
)


class TableKeySelector(KeySelector):
    def get_key(self, value: Any) -> str:
        return str(value["id"])


class RowKeySelector(KeySelector):
    """Reads the row as a pyflink Row."""

    def get_key(self, value: Any) -> str:
        return value.id


class ReviewAnalysisAgent(Agent):
    @prompt
    @staticmethod
    def review_analysis_prompt() -> Prompt:
        return ANALYSIS_PROMPT

    @tool
    @staticmethod
    def notify_shipping_manager(id: str, review: str) -> str:
        """Tell the shipping manager about a review that complains of shipping.

        Args:
            id: the product.
            review: the review.
        """
        return notify_shipping_manager(id=id, review=review)

    @chat_model_setup
    @staticmethod
    def review_analysis_model() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_SETUP,
            connection="ollama_server",
            model="qwen3:8b",
            prompt="review_analysis_prompt",
            tools=["notify_shipping_manager"],
            extract_reasoning=True,
        )

    @action(InputEvent)
    @staticmethod
    def process_input(event: InputEvent, ctx: RunnerContext) -> None:
        row = event.input
        ctx.short_term_memory.set("id", row["id"])
        content = json.dumps({"id": row["id"], "review": row["review"]})
        message = ChatMessage(role=MessageRole.USER, extra_args={"input": content})
        ctx.send_event(ChatRequestEvent(model="review_analysis_model", messages=[message]))

    @action(ChatResponseEvent)
    @staticmethod
    def process_chat_response(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        answer = json.loads(event.response.content)
        ctx.send_event(
            OutputEvent(
                output=Analysis(
                    id=ctx.short_term_memory.get("id"),
                    score=answer["score"],
                    reasons=answer["reasons"],
                )
            )
        )


class ProductSuggestionAgent(Agent):
    @chat_model_setup
    @staticmethod
    def generate_suggestion_model() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_SETUP,
            connection="ollama_server",
            model="qwen3:8b",
            extract_reasoning=True,
        )

    @action(InputEvent)
    @staticmethod
    def process_input(event: InputEvent, ctx: RunnerContext) -> None:
        summary: Summary = event.input
        ctx.short_term_memory.set("summary", summary)
        content = f"Suggest improvements. Scores: {summary.score_hist}; "
        content += f"complaints: {summary.unsatisfied_reasons}"
        ctx.send_event(
            ChatRequestEvent(
                model="generate_suggestion_model",
                messages=[ChatMessage(role=MessageRole.USER, content=content)],
            )
        )

    @action(ChatResponseEvent)
    @staticmethod
    def process_chat_response(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        summary = ctx.short_term_memory.get("summary")
        suggestions = json.loads(event.response.content)["suggestion_list"]
        ctx.send_event(OutputEvent(output={"id": summary.id, "suggestions": suggestions}))


class Gather(ProcessWindowFunction):
    def process(self, key: str, context: Any, elements: Iterable[Analysis]) -> Iterable[Summary]:
        counts = [0] * 5
        reasons: list[str] = []
        for element in elements:
            counts[element.score - 1] += 1
            reasons += element.reasons
        total = sum(counts)
        return [
            Summary(
                id=key,
                score_hist=[f"{round(100 * c / total)}%" for c in counts],
                unsatisfied_reasons=reasons,
            )
        ]


def main(reviews: str, out: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    t_env = StreamTableEnvironment.create(stream_execution_environment=env)
    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env, t_env=t_env)
    agents_env.get_config().set(AgentExecutionOptions.NUM_ASYNC_THREADS, 2)
    agents_env.add_resource(
        "ollama_server",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_CONNECTION,
            base_url=os.environ["MIGRATION_STAND_IN_URL"],
            request_timeout=120,
        ),
    ).add_resource(
        "notify_shipping_manager", ResourceType.TOOL, Tool.from_callable(notify_shipping_manager)
    )
    t_env.create_temporary_table(
        "product_reviews",
        TableDescriptor.for_connector("filesystem")
        .schema(
            Schema.new_builder()
            .column("id", DataTypes.STRING())
            .column("review", DataTypes.STRING())
            .build()
        )
        .option("format", "json")
        .option("path", reviews)
        .build(),
    )

    def write(tag: str):
        def emit(output):
            shown = output.model_dump() if isinstance(output, BaseModel) else output
            with open(out, "a") as file:
                file.write(json.dumps({"tag": tag, "output": shown}, sort_keys=True) + "\n")
            return tag

        return emit

    analyses = (
        agents_env.from_table(
            input=t_env.from_path("product_reviews"), key_selector=TableKeySelector()
        )
        .apply(ReviewAnalysisAgent())
        .to_datastream()
    )
    summaries = (
        analyses.key_by(lambda analysis: analysis.id, key_type=Types.STRING())
        .count_window(2)
        .process(Gather(), output_type=Types.PICKLED_BYTE_ARRAY())
    )
    suggestions = (
        agents_env.from_datastream(input=summaries, key_selector=lambda summary: summary.id)
        .apply(ProductSuggestionAgent())
        .to_datastream()
    )
    suggestions.map(write("suggestion"), output_type=Types.STRING())

    react = ReActAgent(
        chat_model=ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_SETUP,
            connection="ollama_server",
            model="qwen3:8b",
            tools=["notify_shipping_manager"],
        ),
        prompt=Prompt.from_messages(
            messages=[
                ChatMessage(role=MessageRole.SYSTEM, content="Score the review."),
                ChatMessage(role=MessageRole.USER, content='"id": {id}, "review": {review}'),
            ]
        ),
        output_schema=Analysis,
    )
    scored = (
        agents_env.from_table(
            input=t_env.from_path("product_reviews"), key_selector=RowKeySelector()
        )
        .apply(react)
        .to_datastream()
    )
    scored.map(write("react"), output_type=Types.STRING())
    agents_env.execute()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
