"""Knowledge on a vector store: named sets shared by every key and job (no key field)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from flink_agents._ids import durable_name, knowledge_set_id
from flink_agents.api import (
    BaseEmbeddingModel,
    Knowledge,
    KnowledgeSet,
    KnowledgeSetItem,
    MemorySetNotFoundError,
)
from flink_agents.api.internal import knowledge_text
from flink_agents.integrations.vector_stores import (
    FieldMatch,
    Filter,
    HasId,
    OrderBy,
    Point,
    VectorStore,
)
from flink_agents.memory._identity import IdMinter
from flink_agents.memory.long_term._batcher import EmbeddingBatcher
from flink_agents.memory.long_term._codec import CLOCK, to_datetime
from flink_agents.memory.long_term._core import PendingWrites, landed_future, store_later
from flink_agents.memory.long_term._forget import KIND_KNOWLEDGE, delete_owned_knowledge
from flink_agents.memory.long_term._observer import LongTermObserver

KNOWLEDGE_COLLECTION = "flink_agents_knowledge"
_SCOPE = "knowledge"
"""The scope of knowledge writes in flight (``PendingWrites``): knowledge reads wait for
every one of them, whichever key added it."""
KIND_KNOWLEDGE_SET = "knowledge_set"


class VectorKnowledge(Knowledge):
    """Knowledge sets in one collection of a vector store.

    Args:
        store: the vector store; for knowledge shared by several processes, a Qdrant server.
        embedding_model: embeds values and queries.
        collection: the collection holding every knowledge set.
        ids: the writing action's id minter (one per action execution), so a re-executed
            action overwrites the items it added. None gives random ids.
        batcher: embeds added items in shared batches, off the adding thread (reads of
            knowledge in this process wait for them). None: ``add`` stores before it returns.
    """

    def __init__(
        self,
        store: VectorStore,
        embedding_model: BaseEmbeddingModel,
        collection: str = KNOWLEDGE_COLLECTION,
        ids: IdMinter | None = None,
        *,
        batcher: EmbeddingBatcher | None = None,
        owner: str | None = None,
        _pending: PendingWrites | None = None,
        _ensured: bool = False,
    ) -> None:
        self.store = store
        self.owner = owner
        """The key (its canonical string) whose runs write through this view: items it
        adds or updates carry it, so that forgetting the key removes them
        (``forget_owner``). None: items of no key (bulk loads, writes outside a run)."""
        self.embedding = embedding_model
        self.collection = collection
        self.ids = ids if ids is not None else IdMinter()
        self.batcher = batcher
        self.pending = _pending if _pending is not None else PendingWrites()
        self.observer: LongTermObserver | None = None
        """Told of adds and searches (the runtime's metrics)."""
        if not _ensured:
            store.ensure_collection(collection, embedding_model.dimension, embedding_model.model_id)

    def bound(self, ids: IdMinter | None, owner: str | None = None) -> VectorKnowledge:
        """The same knowledge, writing with ids from ``ids``, as ``owner``'s."""
        bound = VectorKnowledge(
            self.store,
            self.embedding,
            self.collection,
            ids,
            batcher=self.batcher,
            owner=owner,
            _pending=self.pending,
            _ensured=True,
        )
        bound.observer = self.observer
        return bound

    def create_knowledge_set(self, name: str) -> KnowledgeSet:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a knowledge set name is a non-empty str, got {name!r}")
        if not self._exists(name):
            vector = [1.0] + [0.0] * (self.embedding.dimension - 1)
            payload = {"kind": KIND_KNOWLEDGE_SET, "set": name, "created_time": CLOCK.now()}
            self.store.upsert(self.collection, [Point(_set_id(name), vector, payload)])
        return StoredKnowledgeSet(self, name)

    def get_knowledge_set(self, name: str) -> KnowledgeSet:
        if not self._exists(name):
            raise MemorySetNotFoundError(f"no knowledge set {name!r}")
        return StoredKnowledgeSet(self, name)

    def delete_knowledge_set(self, name: str) -> bool:
        self.pending.wait(_SCOPE)
        existed = self._exists(name)
        self.store.delete(self.collection, filter=Filter(must=[FieldMatch("set", name)]))
        return existed

    def forget_owner(self, owner: str) -> int:
        """Delete the items of every set that runs of ``owner`` (a key's canonical string)
        added or last updated, once the writes in flight have landed; how many."""
        self.pending.wait(_SCOPE)
        return delete_owned_knowledge(self.store, self.collection, owner)

    def _exists(self, name: str) -> bool:
        return bool(self.store.get(self.collection, [_set_id(name)]))

    def new_ids(self, name: str, count: int) -> list[str]:
        return self.ids.point_ids("knowledge", name, count)


def open_knowledge_set(
    name: str,
    store: str,
    *,
    api_key: str | None = None,
    embedding_model: BaseEmbeddingModel | None = None,
    create: bool = False,
) -> KnowledgeSet:
    """Knowledge set ``name`` on a store of its own: the provider of a ``vector_store``
    resource that ``ContextRetrievalRequestEvent(vector_store=...)`` searches.

    In a plan::

        - name: manuals
          type: vector_store
          provider: flink_agents.memory.long_term:open_knowledge_set
          args:
            name: manuals
            store: https://qdrant.internal:6333
            api_key: {env: QDRANT_API_KEY}

    Args:
        name: the knowledge set.
        store: a Qdrant server URL, or an embedded store's directory (shared with a store
            already open on it in this process; another process must not have it open).
        api_key: the server's key (use ``{env: NAME}`` in a plan, never the key itself).
        embedding_model: the model the set was loaded with; None: the offline MiniLM model.
        create: create the set when missing (default: a missing set is an error here, at
            the resource's creation, rather than an empty answer later).

    The set keeps its store open until its ``close()`` (a runner closes its resources when
    it ends).

    Raises:
        MemorySetNotFoundError: the set does not exist and ``create`` is False.
    """
    from flink_agents.integrations.vector_stores import open_vector_store

    if embedding_model is None:
        from flink_agents.integrations.embeddings import LocalEmbeddingModel

        embedding_model = LocalEmbeddingModel()
    opened = open_vector_store(store, api_key=api_key)
    try:
        knowledge = VectorKnowledge(opened, embedding_model)
        if create:
            knowledge.create_knowledge_set(name)
        else:
            knowledge.get_knowledge_set(name)  # raises for a missing set
    except BaseException:
        opened.close()
        raise
    return _OwnedKnowledgeSet(knowledge, name)


class StoredKnowledgeSet(KnowledgeSet):
    """One knowledge set: points of kind ``knowledge`` whose ``set`` is its name."""

    def __init__(self, knowledge: VectorKnowledge, name: str) -> None:
        self._k = knowledge
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def add(self, item: Any = None, *, items: Sequence[Any] | None = None) -> list[str]:
        if items is None:
            items = [item]
        elif item is not None:
            raise TypeError("give item= or items=, not both")
        values = [_json(v) for v in items]
        if not values:
            return []
        ids = self._k.new_ids(self._name, len(values))
        times = [CLOCK.now() for _ in values]  # strictly increasing: get() keeps add order
        self._k.ids.track(self._write_later(ids, values, times))
        if self._k.observer is not None:
            self._k.observer.long_term_memory_added(len(ids))
        return ids

    def update(self, id: str, item: Any) -> KnowledgeSetItem:
        found = self.get(id)
        if not found:
            raise KeyError(f"knowledge set {self._name!r} has no item {id!r}")
        created = found[0].created_time.timestamp()
        self._write([found[0].id], [_json(item)], [created], [CLOCK.now()])
        return self.get(id)[0]

    def get(self, ids: str | Sequence[str] | None = None) -> list[KnowledgeSetItem]:
        self._k.pending.wait(_SCOPE)
        if ids is None:
            records = self._k.store.scroll(
                self._k.collection, self._filter(), order_by=OrderBy("created_time")
            )
            return [_item(r.id, r.payload) for r in records]
        wanted = [ids] if isinstance(ids, str) else list(ids)
        if not wanted:
            return []
        records = self._k.store.scroll(self._k.collection, self._filter(HasId(wanted)))
        found = {r.id: _item(r.id, r.payload) for r in records}
        return [found[i] for i in dict.fromkeys(wanted) if i in found]

    @durable_name("flink_agents.memory.long_term._knowledge:StoredKnowledgeSet.search")
    def search(self, query: str, limit: int = 10) -> list[KnowledgeSetItem]:
        vector = self._k.embedding.embed_one(query)
        self._k.pending.wait(_SCOPE)
        hits = self._k.store.search(self._k.collection, vector, limit, self._filter())
        if self._k.observer is not None:
            self._k.observer.long_term_memory_searched()
        return [_item(h.id, h.payload, h.score) for h in hits]

    def delete(self, ids: str | Sequence[str] | None = None) -> None:
        wanted = [ids] if isinstance(ids, str) else ids
        self._k.pending.wait(_SCOPE)
        self._k.store.delete(self._k.collection, ids=wanted, filter=self._filter())

    def size(self) -> int:
        self._k.pending.wait(_SCOPE)
        return self._k.store.count(self._k.collection, self._filter())

    def _filter(self, *extra: Any) -> Filter:
        return Filter(
            must=[FieldMatch("kind", KIND_KNOWLEDGE), FieldMatch("set", self._name), *extra]
        )

    def _write(
        self, ids: list[str], values: list[Any], created: list[float], updated: list[float]
    ) -> None:
        vectors = self._k.embedding.embed([knowledge_text(v) for v in values])
        points = [
            Point(i, vector, item_payload(self._name, value, c, u, self._k.owner))
            for i, vector, value, c, u in zip(ids, vectors, values, created, updated, strict=True)
        ]
        self._k.store.upsert(self._k.collection, points)

    def _write_later(self, ids: list[str], values: list[Any], times: list[float]) -> Future[None]:
        """``_write`` of new items once the batcher has embedded them (at once without one)."""
        batcher = self._k.batcher
        if batcher is None:
            self._write(ids, values, times, times)
            return landed_future()
        payloads = [
            item_payload(self._name, value, t, t, self._k.owner)
            for value, t in zip(values, times, strict=True)
        ]
        store, collection = self._k.store, self._k.collection

        def write(vectors: list[list[float]]) -> None:
            store.upsert(
                collection,
                [Point(i, v, p) for i, v, p in zip(ids, vectors, payloads, strict=True)],
            )

        texts = [knowledge_text(v) for v in values]
        return store_later(batcher, self._k.pending, _SCOPE, texts, write)


class _OwnedKnowledgeSet(StoredKnowledgeSet):
    """A knowledge set on a store opened for it alone: closing it releases the store."""

    def __init__(self, knowledge: VectorKnowledge, name: str) -> None:
        super().__init__(knowledge, name)
        self._closed = False
        self._close_lock = threading.Lock()

    def close(self) -> None:
        """Release the store (once: a shared embedded store counts its openers)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._k.store.close()


def _set_id(name: str) -> str:
    return knowledge_set_id(name)


def item_payload(
    name: str, value: Any, created: float, updated: float, owner: str | None = None
) -> dict[str, Any]:
    """The payload of a knowledge item of set ``name`` (also written by the bulk loader),
    with the key whose run wrote it (``owner``), if one did."""
    payload = {
        "kind": KIND_KNOWLEDGE,
        "set": name,
        "value": value,
        "created_time": created,
        "updated_time": updated,
    }
    if owner is not None:
        payload["owner"] = owner
    return payload


def _json(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as error:
        raise TypeError(f"knowledge items are JSON values; {value!r} is not: {error}") from None


def _item(id: str, payload: dict[str, Any], score: float | None = None) -> KnowledgeSetItem:
    return KnowledgeSetItem(
        id=id,
        name=payload["set"],
        value=payload["value"],
        created_time=to_datetime(payload["created_time"]),
        updated_time=to_datetime(payload["updated_time"]),
        score=score,
    )
