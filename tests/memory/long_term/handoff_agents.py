"""Two agents that pass memories (module level: runners import them by name)."""

from flink_agents.api import Agent, InputEvent, OutputEvent, action, items_for_handoff


class Researcher(Agent):
    """Remembers findings; on ``share`` hands the closest ones over in its output."""

    @action(InputEvent)
    @staticmethod
    def handle(event: InputEvent, ctx) -> None:
        findings = ctx.long_term_memory.create_memory_set("findings", str, capacity=50)
        if "finding" in event.input:
            findings.add(event.input["finding"])
            return
        chosen = findings.search(event.input["share"], limit=1)
        handoff = items_for_handoff(chosen, sender="researcher")
        ctx.send_event(OutputEvent(output={"user": ctx.key, "handoff": handoff}))


class Writer(Agent):
    """Takes memories handed over in its input; answers ``ask`` with the item and source."""

    @action(InputEvent)
    @staticmethod
    def handle(event: InputEvent, ctx) -> None:
        inbox = ctx.long_term_memory.create_memory_set("inbox", str, capacity=50)
        if "handoff" in event.input:
            inbox.add_from(event.input["handoff"])
            return
        found = inbox.search(event.input["ask"], limit=1)
        answer = [found[0].item, found[0].source] if found else None
        ctx.send_event(OutputEvent(output=answer))
