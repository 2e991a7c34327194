"""Retrieval events under Apache Flink Agents' module path: ours (``docs/migrating.md``)."""

from flink_agents.api._retrieval import ContextRetrievalRequestEvent, ContextRetrievalResponseEvent

__all__ = ["ContextRetrievalRequestEvent", "ContextRetrievalResponseEvent"]
