"""The built-in context-retrieval action, bound into every plan beside the chat and tool ones.

    ContextRetrievalRequestEvent ──► context_retrieval_action ──► ContextRetrievalResponseEvent

An agent sends the request from any action and listens to the response; nothing else to
declare. The search (embedding the query, then the store's nearest-neighbour search) is one
``ctx.durable_execute_async`` call: it runs off the operator thread, and after a restore the
action log hands back the documents found the first time, so the prompt built from them is
the one the model saw (and the recorded model call matches it) even if the knowledge changed
meanwhile.
"""

from __future__ import annotations

from functools import partial

from flink_agents._ids import durable_name
from flink_agents.api import (
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    FlinkAgentsError,
    Knowledge,
    KnowledgeSet,
    KnowledgeSetItem,
    MemorySetNotFoundError,
    ResourceType,
    RunnerContext,
)


async def context_retrieval_action(event: ContextRetrievalRequestEvent, ctx: RunnerContext) -> None:
    """Search the request's knowledge set or vector store; answer with what was found."""
    if event.knowledge_set is not None:
        search = partial(search_knowledge_set, ctx.knowledge)
        documents = await ctx.durable_execute_async(
            search, event.knowledge_set, event.query, event.max_results
        )
    else:
        store = ctx.get_resource(event.vector_store, ResourceType.VECTOR_STORE)
        if not isinstance(store, KnowledgeSet):
            raise FlinkAgentsError(
                f"resource {event.vector_store!r} is a {type(store).__name__}, not a "
                "KnowledgeSet (see flink_agents.memory.long_term:open_knowledge_set)"
            )
        documents = await ctx.durable_execute_async(store.search, event.query, event.max_results)
    ctx.send_event(
        ContextRetrievalResponseEvent(
            request_id=event.id,
            query=event.query,
            knowledge_set=event.knowledge_set,
            vector_store=event.vector_store,
            documents=documents,
        )
    )


@durable_name("flink_agents.agents._retrieval:search_knowledge_set")
def search_knowledge_set(
    knowledge: Knowledge, name: str, query: str, limit: int
) -> list[KnowledgeSetItem]:
    """The ``limit`` items of knowledge set ``name`` closest to ``query``.

    Raises:
        MemorySetNotFoundError: no such set, with how to load one.
    """
    try:
        found = knowledge.get_knowledge_set(name)
    except MemorySetNotFoundError:
        raise MemorySetNotFoundError(
            f"no knowledge set {name!r} in this runner's store: load one with "
            f"`flink-agents knowledge load {name} FILE.jsonl` (or create it through "
            "ctx.knowledge)"
        ) from None
    return found.search(query, limit)
