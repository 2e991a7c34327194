"""An agent that remembers a user's preferences across runs and recalls them by meaning."""

from flink_agents.api import Agent, InputEvent, OutputEvent, action


class PreferenceAgent(Agent):
    """``{"user", "remember"}`` stores a preference; ``{"user", "ask"}`` recalls the closest."""

    @action(InputEvent)
    @staticmethod
    def handle(event: InputEvent, ctx) -> None:
        prefs = ctx.long_term_memory.create_memory_set("preferences", str, capacity=100)
        request = event.input
        if "remember" in request:
            prefs.add(request["remember"], source="user")
            ctx.send_event(OutputEvent(output="noted"))
        else:
            found = prefs.search(request["ask"], limit=1)
            ctx.send_event(OutputEvent(output=found[0].item if found else None))
