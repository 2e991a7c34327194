"""Agents for the retrieval tests (module level: plans name them, workers import them)."""

from flink_agents.api import (
    Agent,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    InputEvent,
    OutputEvent,
    action,
)


class AskAgent(Agent):
    """Input ``{"ask": query, "set" or "store": where, "limit": n}``; outputs what the
    response carried, and whether it answers the request this run sent."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx) -> None:
        record = event.input
        request = ContextRetrievalRequestEvent(
            query=record["ask"],
            knowledge_set=record.get("set"),
            vector_store=record.get("store"),
            max_results=record.get("limit", 3),
        )
        ctx.sensory_memory.set("request_id", str(request.id))
        ctx.send_event(request)

    @action(ContextRetrievalResponseEvent)
    @staticmethod
    def report(event: ContextRetrievalResponseEvent, ctx) -> None:
        sent = ctx.sensory_memory.get("request_id")
        ctx.send_event(
            OutputEvent(
                output={
                    "answers_request": str(event.request_id) == sent,
                    "query": event.query,
                    "source": event.knowledge_set or event.vector_store,
                    "ids": [document.value["id"] for document in event.documents],
                    "scores": [document.score for document in event.documents],
                    "texts": event.texts(),
                }
            )
        )


class TwoQuestionsAgent(Agent):
    """Sends two requests from one action and tells the answers apart by ``request_id``."""

    @action(InputEvent)
    @staticmethod
    def ask_both(event: InputEvent, ctx) -> None:
        for label, question in event.input.items():
            request = ContextRetrievalRequestEvent(
                query=question, knowledge_set="faq", max_results=1
            )
            ctx.sensory_memory.set(f"asked.{request.id.hex}", label)
            ctx.send_event(request)

    @action(ContextRetrievalResponseEvent)
    @staticmethod
    def collect(event: ContextRetrievalResponseEvent, ctx) -> None:
        label = ctx.sensory_memory.get(f"asked.{event.request_id.hex}")
        ctx.sensory_memory.set(f"found.{label}", event.documents[0].value["id"])
        found = ctx.sensory_memory.get_object("found")
        if len(found.get_field_names()) == 2:
            ctx.send_event(OutputEvent(output=found.get_fields()))
