"""``VectorLongTermMemory``: long-term memory on a vector store, one per runner (process)."""

from __future__ import annotations

from functools import partial
from typing import Any

from flink_agents.api import BaseChatModel, BaseEmbeddingModel
from flink_agents.integrations.vector_stores import VectorStore
from flink_agents.memory._identity import IdMinter
from flink_agents.memory.long_term._access import AccessRecorder
from flink_agents.memory.long_term._batcher import EmbeddingBatcher
from flink_agents.memory.long_term._codec import key_text
from flink_agents.memory.long_term._compaction import Compactor
from flink_agents.memory.long_term._core import MemoryCore
from flink_agents.memory.long_term._observer import LongTermObserver
from flink_agents.memory.long_term._sets import KeyedLongTermMemory

MEMORY_COLLECTION = "flink_agents_memory"


class VectorLongTermMemory:
    """Every key's memory sets in one collection, and the pool that compacts them.

    Shared by all keys of a runner; ``for_key`` gives the ``LongTermMemory`` an action sees.
    Thread-safe. The store and models are not closed by ``close`` (they belong to the caller).

    Args:
        store: the vector store (``open_vector_store``).
        embedding_model: embeds items and queries; the collection is bound to its model id.
        chat_model: summarizes for ``SUMMARIZE`` sets; None if no set summarizes.
        collection: the collection to keep memory sets in.
        track_access: record ``last_accessed_time`` on reads (background rewrites, batched
            at most every ``access_interval`` seconds: precise to about that).
        compaction_workers: threads of the compaction pool.
        retry_attempts, retry_initial_wait, retry_max_wait: retries of a failed compaction.
        summarize_target: see ``Compactor``.
        batcher: embeds added items in shared batches, off the adding thread (``add``
            returns at once; the key's reads wait for its writes). None: ``add`` embeds and
            stores before it returns.
    """

    def __init__(
        self,
        store: VectorStore,
        embedding_model: BaseEmbeddingModel,
        *,
        chat_model: BaseChatModel | None = None,
        collection: str = MEMORY_COLLECTION,
        track_access: bool = True,
        compaction_workers: int = 1,
        retry_attempts: int = 5,
        retry_initial_wait: float = 0.5,
        retry_max_wait: float = 30.0,
        summarize_target: float = 0.5,
        access_interval: float = 1.0,
        batcher: EmbeddingBatcher | None = None,
    ) -> None:
        self.core = MemoryCore(store, embedding_model, collection, batcher)
        self.track_access = track_access
        self.compactor = Compactor(
            self.core,
            chat_model,
            summarize_target=summarize_target,
            workers=compaction_workers,
            attempts=retry_attempts,
            initial_wait=retry_initial_wait,
            max_wait=retry_max_wait,
        )
        self.access = AccessRecorder(
            self.core.touch, partial(self.compactor.submit, beside=True), access_interval
        )

    @property
    def observer(self) -> LongTermObserver | None:
        """Told of adds, searches and compactions (the runtime's metrics)."""
        return self.compactor.observer

    @observer.setter
    def observer(self, observer: LongTermObserver | None) -> None:
        self.compactor.observer = observer

    def for_key(self, key: Any, ids: IdMinter | None = None) -> KeyedLongTermMemory:
        """The memory sets of ``key``; ``ids`` (the action execution's minter) makes item
        ids deterministic so that a re-executed action overwrites what it wrote."""
        return KeyedLongTermMemory(self, key_text(key), ids)

    def forget_key(self, key: Any) -> int:
        """Delete all of ``key``'s memory sets (items and settings), after the compactions
        queued or running (one of the key's must not write a summary back); the number of
        items deleted. The caller runs no action of the key meanwhile (``ForgetKey``)."""
        self.compactor.wait()
        return self.core.forget_key(key_text(key))

    def wait_for_compaction(self, timeout: float | None = None) -> bool:
        """Wait until no compaction (or access record) is queued or running.

        Returns:
            False if ``timeout`` seconds passed first.
        """
        return self.compactor.wait(timeout)

    @property
    def compaction_errors(self) -> list[BaseException]:
        """Compactions given up after their last retry (they run again on the next add): the
        latest ``ERRORS_KEPT`` (100), newest last."""
        return list(self.compactor.errors)

    def wait_for_writes(self, timeout: float | None = None) -> bool:
        """Wait until every added item is stored; False if ``timeout`` seconds passed first."""
        return self.core.pending.wait_all(timeout)

    def close(self, timeout: float | None = 60.0) -> None:
        """Store added items (waiting up to ``timeout`` seconds), write gathered reads,
        finish running background work and stop the pool (the store and the batcher stay
        open)."""
        self.wait_for_writes(timeout)
        self.access.flush()
        self.compactor.close()
