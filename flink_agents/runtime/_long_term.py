"""Long-term memory and knowledge for a runner, opened on first use from the agent options.

One ``LongTermProvider`` per run engine (per Flink subtask): the vector store, the embedding
model and the compaction pool are created the first time an action touches
``ctx.long_term_memory`` or ``ctx.knowledge``, so agents that never do pay nothing.

Every runner of a machine opens the same store: one embedded directory, which the first
process to open it serves to the others (``vector_stores.shared``), or a Qdrant server. So
wherever Flink places a key (any subtask, at any parallelism, after any rescale), its
memories and all knowledge are there. A job spread over several machines needs the server
(``long-term-memory-store: http://...``): an embedded directory is one machine's.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flink_agents._ids import memory_key_text
from flink_agents.api import BaseEmbeddingModel, ResourceType
from flink_agents.memory import IdMinter
from flink_agents.runtime._deadline import Deadline
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime._resources import ResourceCache

if TYPE_CHECKING:  # imported on first use: most agents never open a store (start-up)
    from flink_agents.integrations.vector_stores import VectorStore
    from flink_agents.memory.long_term import (
        EmbeddingBatcher,
        KeyedLongTermMemory,
        VectorKnowledge,
        VectorLongTermMemory,
    )

API_KEY_ENV = "QDRANT_API_KEY"


def store_location(options: AgentOptions) -> str:
    """The store every runner opens: a server URL, or the embedded directory
    ``long-term-memory-store`` (default ``<data-dir>/vector-store``)."""
    configured = options.long_term_memory_store
    if configured and configured.startswith(("http://", "https://", ":memory:")):
        return configured
    return str(Path(configured or Path(options.data_dir) / "vector-store").expanduser())


def open_store(location: str) -> VectorStore:
    """The vector store at ``location`` (an embedded directory shared with this machine's other
    processes); a server's key comes from ``$QDRANT_API_KEY``, never from options or plans."""
    from flink_agents.integrations.vector_stores import open_vector_store

    remote = location.startswith(("http://", "https://"))
    return open_vector_store(location, api_key=os.environ.get(API_KEY_ENV) if remote else None)


def forget_in_store(location: str, key: Any) -> dict[str, int]:
    """Delete ``key``'s memory sets and the knowledge items its runs wrote from the store at
    ``location``, opened for this alone (nothing where no store was ever made), by kind."""
    from flink_agents.memory.long_term import (
        KNOWLEDGE_COLLECTION,
        MEMORY_COLLECTION,
        delete_key_points,
        delete_owned_knowledge,
    )

    remote = location.startswith(("http://", "https://"))
    if not remote and (location == ":memory:" or not Path(location).is_dir()):
        return {}
    store = open_store(location)
    removed: dict[str, int] = {}
    try:
        collections = store.collections()
        text = memory_key_text(key)
        if MEMORY_COLLECTION in collections:
            removed["long_term_items"] = delete_key_points(store, MEMORY_COLLECTION, text)
        if KNOWLEDGE_COLLECTION in collections:
            removed["knowledge_items"] = delete_owned_knowledge(store, KNOWLEDGE_COLLECTION, text)
    finally:
        store.close()
    return removed


class LongTermProvider:
    """Opens the store and models lazily; hands each action its key's view."""

    def __init__(self, options: AgentOptions, resources: ResourceCache) -> None:
        self.options = options
        self.resources = resources
        self._lock = threading.Lock()
        self._store: VectorStore | None = None
        self._batcher: EmbeddingBatcher | None = None
        self._memory: VectorLongTermMemory | None = None
        self._knowledge: VectorKnowledge | None = None
        self.observer: Any = None
        """Told of long-term memory operations (the engine's metrics)."""

    def location(self) -> str:
        """The store this runner opens: a server URL, or an embedded directory."""
        return store_location(self.options)

    def memory(self, key: Any, ids: IdMinter) -> KeyedLongTermMemory:
        self._open()
        assert self._memory is not None
        return self._memory.for_key(key, ids)

    def knowledge(self, ids: IdMinter, key: Any = None) -> VectorKnowledge:
        """Knowledge as an action of ``key`` sees it: the items it writes are the key's
        (``forget_key``)."""
        self._open()
        assert self._knowledge is not None
        return self._knowledge.bound(ids, None if key is None else memory_key_text(key))

    def forget_key(self, key: Any) -> dict[str, int]:
        """Delete ``key``'s long-term memory and the knowledge items its runs wrote, by
        kind: through the open memory (after its writes and compactions in flight), else
        in the store alone (no model is loaded: ``forget_in_store``)."""
        with self._lock:
            memory, knowledge = self._memory, self._knowledge
        if memory is None or knowledge is None:
            return forget_in_store(self.location(), key)
        return {
            "long_term_items": memory.forget_key(key),
            "knowledge_items": knowledge.forget_owner(memory_key_text(key)),
        }

    def close(self, timeout: float | None = 60.0) -> None:
        """Store added items and let running compactions finish, all within ``timeout``
        seconds (None: until they end), then release the store (which the next attempt of
        a failed job may be waiting for)."""
        left = Deadline(timeout).left
        with self._lock:
            memory, knowledge, store = self._memory, self._knowledge, self._store
            batcher = self._batcher
            self._memory = self._knowledge = self._store = self._batcher = None
        try:
            if memory is not None:
                memory.wait_for_writes(left())
                memory.wait_for_compaction(left())
                memory.close(left())
            if knowledge is not None:
                knowledge.pending.wait_all(left())
        finally:
            if batcher is not None:
                batcher.close(left())
            if store is not None:
                store.close()

    def _open(self) -> None:
        with self._lock:
            if self._memory is not None:
                return
            from flink_agents.memory.long_term import (
                EmbeddingBatcher,
                VectorKnowledge,
                VectorLongTermMemory,
            )

            embedding = self._embedding()
            chat_name = self.options.long_term_memory_chat_model
            chat = self.resources.get(chat_name, ResourceType.CHAT_MODEL) if chat_name else None
            store = open_store(self.location())
            # One batcher for memory and knowledge: items added by any action of any key are
            # embedded together, off the operator thread.
            batcher = EmbeddingBatcher(embedding)
            try:
                self._memory = VectorLongTermMemory(
                    store, embedding, chat_model=chat, batcher=batcher
                )
                self._knowledge = VectorKnowledge(store, embedding, batcher=batcher)
            except BaseException:
                batcher.close()
                store.close()
                raise
            self._batcher = batcher
            self._memory.observer = self._knowledge.observer = self.observer
            self._store = store

    def _embedding(self) -> BaseEmbeddingModel:
        name = self.options.long_term_memory_embedding
        if name:
            return self.resources.get(name, ResourceType.EMBEDDING_MODEL)
        from flink_agents.integrations.embeddings import LocalEmbeddingModel

        return LocalEmbeddingModel()
