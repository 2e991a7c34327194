"""Long-term memory and knowledge for a runner, opened on first use from the agent options.

One ``LongTermProvider`` per run engine (per Flink subtask): the vector store, the embedding
model and the compaction pool are created the first time an action touches
``ctx.long_term_memory`` or ``ctx.knowledge``, so agents that never do pay nothing.

The embedded store (qdrant-edge) locks its directory per process, and every PyFlink Python
worker is a process of its own: each runner therefore opens ``<store>/<subdirectory>`` when
given one (the Flink dispatcher's subtask). Memory of a key stays with the subtask that owns
the key; knowledge shared by several processes (or a rescaled job) needs a Qdrant server
(``long-term-memory-store: http://...``).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from flink_agents.api._embedding import BaseEmbeddingModel
from flink_agents.api._resources import ResourceType
from flink_agents.integrations.vector_stores import VectorStore, open_vector_store
from flink_agents.memory import IdMinter
from flink_agents.memory.long_term import VectorKnowledge, VectorLongTermMemory
from flink_agents.memory.long_term._sets import KeyedLongTermMemory
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime._resources import ResourceCache

API_KEY_ENV = "QDRANT_API_KEY"


def subtask_directory(index: int) -> str:
    """The subdirectory of the embedded store that Flink subtask ``index`` opens."""
    return f"subtask-{index}"


def store_location(options: AgentOptions, subdirectory: str | None = None) -> str:
    """The store a runner opens: a server URL, or an embedded directory.

    The local runner opens ``<long-term-memory-store>`` (default ``<data-dir>/vector-store``)
    itself; a Flink subtask opens ``subtask_directory(i)`` under it.
    """
    configured = options.long_term_memory_store
    if configured and configured.startswith(("http://", "https://", ":memory:")):
        return configured
    root = Path(configured or Path(options.data_dir) / "vector-store").expanduser()
    return str(root / subdirectory if subdirectory else root)


def open_store(location: str) -> VectorStore:
    """The vector store at ``location``; a server's key comes from ``$QDRANT_API_KEY``, never
    from options or plans."""
    remote = location.startswith(("http://", "https://"))
    return open_vector_store(location, api_key=os.environ.get(API_KEY_ENV) if remote else None)


class LongTermProvider:
    """Opens the store and models lazily; hands each action its key's view."""

    def __init__(
        self,
        options: AgentOptions,
        resources: ResourceCache,
        subdirectory: str | None = None,
    ) -> None:
        self.options = options
        self.resources = resources
        self.subdirectory = subdirectory
        self._lock = threading.Lock()
        self._store: VectorStore | None = None
        self._memory: VectorLongTermMemory | None = None
        self._knowledge: VectorKnowledge | None = None
        self.observer: Any = None
        """Told of long-term memory operations (the engine's metrics)."""

    def location(self) -> str:
        """The store this runner opens: a server URL, or an embedded directory."""
        return store_location(self.options, self.subdirectory)

    def memory(self, key: Any, ids: IdMinter) -> KeyedLongTermMemory:
        self._open()
        assert self._memory is not None
        return self._memory.for_key(key, ids)

    def knowledge(self, ids: IdMinter) -> VectorKnowledge:
        self._open()
        assert self._knowledge is not None
        return self._knowledge.bound(ids)

    def close(self, timeout: float | None = 60.0) -> None:
        """Let running compactions finish (up to ``timeout``), then release the store."""
        with self._lock:
            memory, store = self._memory, self._store
            self._memory = self._knowledge = self._store = None
        if memory is not None:
            memory.wait_for_compaction(timeout)
            memory.close()
        if store is not None:
            store.close()

    def _open(self) -> None:
        with self._lock:
            if self._memory is not None:
                return
            embedding = self._embedding()
            chat_name = self.options.long_term_memory_chat_model
            chat = self.resources.get(chat_name, ResourceType.CHAT_MODEL) if chat_name else None
            store = open_store(self.location())
            try:
                self._memory = VectorLongTermMemory(store, embedding, chat_model=chat)
                self._knowledge = VectorKnowledge(store, embedding)
            except BaseException:
                store.close()
                raise
            self._memory.observer = self._knowledge.observer = self.observer
            self._store = store

    def _embedding(self) -> BaseEmbeddingModel:
        name = self.options.long_term_memory_embedding
        if name:
            return self.resources.get(name, ResourceType.EMBEDDING_MODEL)
        from flink_agents.integrations.embeddings import LocalEmbeddingModel

        return LocalEmbeddingModel()
