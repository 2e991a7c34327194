"""Small agents of Apache Flink Agents' kind for the surface tests (module level, so plans can
name their functions)."""

from flink_agents.api.agents.agent import Agent
from flink_agents.api.decorators import action, chat_model_setup, java_resource
from flink_agents.api.events.event import InputEvent, OutputEvent
from flink_agents.api.resource import ResourceDescriptor, ResourceName


def echo(event, ctx):
    ctx.send_event(OutputEvent(output=(event.input, ctx.action_config.get("suffix"))))


def fail(event, ctx):
    raise ValueError(f"no {event.input}")


class Empty(Agent):
    """Actions and resources are added to instances in code."""


class Anthropic(Agent):
    @chat_model_setup
    @staticmethod
    def claude() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=ResourceName.ChatModel.ANTHROPIC_SETUP, connection="c", model="claude"
        )

    @action(InputEvent)
    @staticmethod
    def noop(event, ctx):
        pass


@java_resource
class JavaThing:
    pass


class UsesJava(Agent):
    @chat_model_setup
    @staticmethod
    def java_model():
        return JavaThing()

    @action(InputEvent)
    @staticmethod
    def noop(event, ctx):
        pass


class Notes(Agent):
    """Long-term memory as their agents use it."""

    @action(InputEvent)
    @staticmethod
    def note(event, ctx):
        from flink_agents.api.memory.long_term_memory import CompactionConfig

        notes = ctx.long_term_memory.get_or_create_memory_set(
            "notes", str, capacity=10, compaction_config=CompactionConfig(model="m")
        )
        notes.add(event.input)
        found = notes.search("a fruit", limit=1)
        ctx.send_event(OutputEvent(output=(notes.size(), [item.value for item in found])))


def look_up_missing(event, ctx):
    from flink_agents.api.resource import ResourceType

    try:
        ctx.get_resource("nowhere", ResourceType.TOOL)
    except KeyError:
        ctx.send_event(OutputEvent(output="no resource"))
