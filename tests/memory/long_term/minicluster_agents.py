"""Agents for the MiniCluster long-term memory test (module level: the Python worker imports
them by name)."""

from flink_agents.api import Agent, InputEvent, OutputEvent, action


class LibrarianAgent(Agent):
    """``teach`` adds a fact to the shared ``facts`` knowledge set; ``look_up`` finds the
    closest fact; ``remember`` / ``ask`` use the key's own ``notes`` memory set."""

    @action(InputEvent)
    @staticmethod
    def handle(event: InputEvent, ctx) -> None:
        request = event.input
        notes = ctx.long_term_memory.create_memory_set("notes", str, capacity=10)
        facts = ctx.knowledge.create_knowledge_set("facts")
        if "teach" in request:
            facts.add(request["teach"])
            answer = "taught"
        elif "look_up" in request:
            found = facts.search(request["look_up"], limit=1)
            answer = found[0].value if found else None
        elif "remember" in request:
            notes.add(request["remember"], source=f"user:{ctx.key}")
            answer = "noted"
        else:
            found = notes.search(request["ask"], limit=1)
            answer = [found[0].item, found[0].source] if found else None
        ctx.send_event(OutputEvent(output={"id": request["id"], "answer": answer}))
