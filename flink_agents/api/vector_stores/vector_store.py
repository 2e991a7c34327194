"""Vector stores under Apache Flink Agents' module path (``docs/migrating.md``).

A retrieval's documents are our ``KnowledgeSetItem`` s (``Document`` here): ``value`` and
``score`` where theirs have ``content`` and ``metadata``. Their vector store classes
(``BaseVectorStore`` with ``add``/``query`` of documents) have no counterpart: store
documents in a knowledge set (``docs/rag.md``), or declare one of our vector stores.
"""

from flink_agents.api._knowledge import KnowledgeSetItem

Document = KnowledgeSetItem

__all__ = ["Document"]
