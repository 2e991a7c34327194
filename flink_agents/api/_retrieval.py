"""Retrieval over knowledge (RAG): the events that ask for context from an action.

An action sends a ``ContextRetrievalRequestEvent`` with a query and where to search: a
knowledge set (``ctx.knowledge``, filled by ``flink-agents knowledge load``) or a
vector-store resource. The built-in context-retrieval action, bound into every plan,
searches through durable execution (a recovered job replays the documents it found instead
of searching again) and answers with a ``ContextRetrievalResponseEvent`` whose
``request_id`` is the request's ``id``::

    ContextRetrievalRequestEvent ──► context_retrieval_action ──► ContextRetrievalResponseEvent

The names follow Apache Flink Agents' Python API (``query``, ``vector_store``,
``max_results``, ``request_id``, ``documents``); ``knowledge_set`` is ours, for the
knowledge every runner already has.
"""

from __future__ import annotations

from typing import ClassVar
from uuid import UUID

from pydantic import Field, model_validator

from flink_agents.api._events import Event
from flink_agents.api._knowledge import KnowledgeSetItem, knowledge_text

DEFAULT_MAX_RESULTS = 3
"""Documents a request returns unless it asks for another number."""


class ContextRetrievalRequestEvent(Event):
    """Find the documents closest in meaning to ``query``.

    Give exactly one of ``knowledge_set`` and ``vector_store``.

    Attributes:
        query: the text to search by (a user's question, say).
        knowledge_set: a knowledge set of ``ctx.knowledge``, by name.
        vector_store: a resource of type ``vector_store``, by name: any ``KnowledgeSet``
            (``flink_agents.memory.long_term:open_knowledge_set`` opens one on a store of its
            own, such as a Qdrant server).
        max_results: at most this many documents, best first.
    """

    EVENT_TYPE: ClassVar[str | None] = "_context_retrieval_request_event"

    query: str
    knowledge_set: str | None = Field(None, min_length=1)
    vector_store: str | None = Field(None, min_length=1)
    max_results: int = Field(DEFAULT_MAX_RESULTS, ge=1)

    @model_validator(mode="after")
    def _one_source(self) -> ContextRetrievalRequestEvent:
        if (self.knowledge_set is None) == (self.vector_store is None):
            raise ValueError("give exactly one of knowledge_set and vector_store")
        return self

    @property
    def source(self) -> str:
        """Where the request searches, for messages: ``knowledge set 'faq'``."""
        if self.knowledge_set is not None:
            return f"knowledge set {self.knowledge_set!r}"
        return f"vector store {self.vector_store!r}"


class ContextRetrievalResponseEvent(Event):
    """The documents found for a ``ContextRetrievalRequestEvent``.

    Attributes:
        request_id: the ``id`` of the request it answers.
        query: the request's query.
        knowledge_set: the request's knowledge set, if it named one.
        vector_store: the request's vector-store resource, if it named one.
        documents: at most ``max_results`` items, best first, each with its ``score`` (the
            cosine similarity to the query: higher is closer); empty when nothing is stored.
    """

    EVENT_TYPE: ClassVar[str | None] = "_context_retrieval_response_event"

    request_id: UUID
    query: str
    knowledge_set: str | None = None
    vector_store: str | None = None
    documents: list[KnowledgeSetItem] = Field(default_factory=list)

    def texts(self) -> list[str]:
        """Each document's text, best first: a loaded document's ``text`` field, a string
        item itself, any other value as JSON (``knowledge_text``)."""
        return [knowledge_text(document.value) for document in self.documents]
