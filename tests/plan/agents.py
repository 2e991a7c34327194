"""Module-level agents for the plan tests (plans refer to code as module:qualname)."""

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, ResourceType, action, resource


class Greeted(Event):
    name: str


class GreeterAgent(Agent):
    """Two actions and a resource: enough to exercise every part of a plan."""

    config = {"greeting": "hello"}

    @action(InputEvent)
    @staticmethod
    def greet(event: InputEvent, ctx) -> None:
        ctx.short_term_memory.set("greeted", (ctx.short_term_memory.get("greeted") or 0) + 1)
        ctx.send_event(Greeted(name=event.input["name"]))

    @action(Greeted)
    @staticmethod
    def reply(event: Greeted, ctx) -> None:
        suffix = ctx.get_resource("suffix", ResourceType.CUSTOM)
        count = ctx.short_term_memory.get("greeted")
        text = f"{ctx.config['greeting']} {event.name}{suffix} #{count}"
        ctx.send_event(OutputEvent(output=text))

    @resource(ResourceType.CUSTOM, mark="!")
    @staticmethod
    def suffix(mark: str) -> str:
        return mark


class WrongSignatureAgent(Agent):
    @action(InputEvent)
    @staticmethod
    def greet(event: InputEvent) -> None:
        pass


class NoActionsAgent(Agent):
    pass
