"""Long-term memory and knowledge on a vector store (design section 3, seeds 001/003/004).

``VectorLongTermMemory`` keeps every key's memory sets in one collection and compacts them
on its own small thread pool; ``for_key(key, identity)`` is the ``LongTermMemory`` an action
sees. ``VectorKnowledge`` keeps knowledge sets, shared by every key, in another collection;
``read_documents`` and ``load_documents`` bulk-load documents into one, idempotently.
"""

from flink_agents.memory.long_term._batcher import EmbeddingBatcher
from flink_agents.memory.long_term._compaction import CompactionError, Compactor
from flink_agents.memory.long_term._forget import delete_key_points, delete_owned_knowledge
from flink_agents.memory.long_term._knowledge import (
    KNOWLEDGE_COLLECTION,
    StoredKnowledgeSet,
    VectorKnowledge,
    open_knowledge_set,
)
from flink_agents.memory.long_term._loader import (
    DEFAULT_BATCH_SIZE,
    DocumentFileError,
    KnowledgeDocument,
    LoadCounts,
    documents_from,
    load_documents,
    read_documents,
)
from flink_agents.memory.long_term._memory import MEMORY_COLLECTION, VectorLongTermMemory
from flink_agents.memory.long_term._sets import KeyedLongTermMemory, StoredMemorySet

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "KNOWLEDGE_COLLECTION",
    "MEMORY_COLLECTION",
    "CompactionError",
    "Compactor",
    "DocumentFileError",
    "EmbeddingBatcher",
    "KeyedLongTermMemory",
    "KnowledgeDocument",
    "LoadCounts",
    "StoredKnowledgeSet",
    "StoredMemorySet",
    "VectorKnowledge",
    "VectorLongTermMemory",
    "delete_key_points",
    "delete_owned_knowledge",
    "documents_from",
    "load_documents",
    "open_knowledge_set",
    "read_documents",
]
