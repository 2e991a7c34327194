"""A one-file job, as users write them: the agent, its events, a tool, a resource provider and
the pipeline in one script, run with ``python one_file_job.py MODE OUT``.

MODE is ``thread``, ``process`` or ``default`` (no mode set: the agents environment
chooses); OUT is a file that gets one JSON line per output, sorted. ``--plan`` applies the
plan compiled from the agent instead of the class itself.
"""

import json
import sys
from dataclasses import dataclass

from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import (
    Agent,
    AgentsExecutionEnvironment,
    Event,
    InputEvent,
    OutputEvent,
    ResourceType,
    ToolCall,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
    resource,
    tool,
)
from flink_agents.plan import compile_agent

GREETING = "hello"


class Greeted(Event):
    """Sent, and listened to, within the script."""

    text: str


class Done(Event):
    """Sent by an action and listened to by none: shipped too, for the state that holds it."""

    text: str


@dataclass
class Salutation:
    """A resource made by a provider defined in the script."""

    word: str

    def greet(self, name: str) -> str:
        return f"{self.word}, {name}"


def shout(text: str) -> str:
    return text.upper()


class Greeter(Agent):
    @action(InputEvent)
    @staticmethod
    def greet(event, ctx):
        salutation = ctx.get_resource("salutation", ResourceType.CUSTOM)
        ctx.short_term_memory.set("seen", (ctx.short_term_memory.get("seen") or 0) + 1)
        ctx.send_event(Greeted(text=salutation.greet(event.input["user"])))

    @action(Greeted)
    @staticmethod
    def count_letters(event, ctx):
        call = ToolCall(id="1", name="letters", arguments={"text": event.text})
        ctx.short_term_memory.set("greeting", event.text)
        ctx.send_event(ToolRequestEvent(tool_calls=[call]))

    @action(ToolResponseEvent)
    @staticmethod
    def report(event, ctx):
        seen = ctx.short_term_memory.get("seen")
        text = shout(ctx.short_term_memory.get("greeting"))
        ctx.send_event(Done(text=text))
        ctx.send_event(
            OutputEvent(output={"text": text, "letters": event.results[0].content, "seen": seen})
        )

    @resource(ResourceType.CUSTOM, word=GREETING)
    @staticmethod
    def salutation(word):
        return Salutation(word)

    @tool
    @staticmethod
    def letters(text: str) -> int:
        """Counts the letters of a text.

        Args:
            text: the text.
        """
        return sum(c.isalpha() for c in text)


def main(mode: str, out: str, use_plan: bool) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    if mode != "default":
        env.configure(Configuration().set_string("python.execution-mode", mode))
    agents = AgentsExecutionEnvironment.get_execution_environment(env)
    lines = env.from_collection(["ana", "bo", "ana"], type_info=Types.STRING())
    records = lines.map(lambda user: {"user": user}, output_type=Types.PICKLED_BYTE_ARRAY())
    agent = compile_agent(Greeter) if use_plan else Greeter
    outputs = agents.from_datastream(records, key_selector="user").apply(agent).to_datastream()
    with outputs.execute_and_collect() as results:
        rows = sorted(json.dumps(r, sort_keys=True) for r in results)
    with open(out, "w") as file:
        file.writelines(row + "\n" for row in rows)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--plan" in sys.argv)
