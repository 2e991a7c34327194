"""Reads and writes of memory-set points, shared by the sets, compaction and access tracking.

Every write to a set's points (adding, compacting, recording an access, deleting) holds that
set's lock for the store calls only (never during an embedding batch or an LLM call), so a
background write can never bring back an item that was just deleted.

Items added by actions are embedded in shared batches (``EmbeddingBatcher``) and written by
the batcher's threads: ``write_later`` returns their ids at once. Every read or delete of a
key's items first waits for that key's writes still in flight (``PendingWrites``), so a key
always reads its own writes, and a delete never races an add that lands after it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, wait
from typing import Any

from flink_agents._ids import memory_set_id
from flink_agents.api import BaseEmbeddingModel, MemorySetItem
from flink_agents.integrations.vector_stores import HasId, OrderBy, Point, VectorStore
from flink_agents.memory.long_term._batcher import EmbeddingBatcher, Vectors
from flink_agents.memory.long_term._codec import (
    CLOCK,
    EXTRA_INDEXES,
    KIND_SET,
    SetSettings,
    decode_value,
    item_from,
    item_payload,
    text_of,
)
from flink_agents.memory.long_term._filters import items_filter, set_filter
from flink_agents.memory.long_term._forget import delete_key_points

_STRIPES = 64
_KNOWN_SETS = 65_536  # settings of memory sets remembered per collection, at most
_OLDEST_FIRST = OrderBy("created_time")


class PendingWrites:
    """Writes in flight per scope (a key's memory sets, or all knowledge), so that reads of
    the scope can wait for them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_scope: dict[str, set[Future[None]]] = {}

    def track(self, scope: str, write: Future[None]) -> None:
        with self._lock:
            self._by_scope.setdefault(scope, set()).add(write)
        write.add_done_callback(lambda done: self._forget(scope, done))

    def wait(self, scope: str) -> None:
        """Return once every write of ``scope`` tracked so far has landed (or failed)."""
        if not self._by_scope:  # the common case, read without the lock
            return
        with self._lock:
            writes = list(self._by_scope.get(scope, ()))
        if writes:
            wait(writes)

    def wait_all(self, timeout: float | None = None) -> bool:
        """Wait for every write in flight; False if ``timeout`` seconds passed first."""
        with self._lock:
            writes = [write for scope in self._by_scope.values() for write in scope]
        return not wait(writes, timeout).not_done

    def _forget(self, scope: str, write: Future[None]) -> None:
        with self._lock:
            writes = self._by_scope.get(scope)
            if writes is not None:
                writes.discard(write)
                if not writes:
                    del self._by_scope[scope]


def landed_future() -> Future[None]:
    """A write that has already landed (nothing was deferred)."""
    done: Future[None] = Future()
    done.set_result(None)
    return done


def store_later(
    batcher: EmbeddingBatcher,
    pending: PendingWrites,
    scope: str,
    texts: Sequence[str],
    write: Callable[[Vectors], None],
    then: Callable[[], None] | None = None,
) -> Future[None]:
    """Have ``batcher`` embed ``texts``, then ``write(vectors)`` (on the batcher's thread):
    a future done once written, failing with the embedding's or the write's error, and
    tracked in ``pending`` under ``scope`` until then (reads of the scope wait for it).
    ``then`` runs after a successful write, on the batcher's thread too; it must not wait
    for writes."""
    landed: Future[None] = Future()
    pending.track(scope, landed)

    def embedded(vectors: Vectors | None, error: BaseException | None) -> None:
        if error is None:
            try:
                write(vectors or [])
            except BaseException as failure:
                error = failure
        if error is not None:
            landed.set_exception(error)
            return
        landed.set_result(None)
        if then is not None:
            then()

    try:
        batcher.then(texts, embedded)
    except BaseException as error:  # a closed batcher: nothing will land, readers must not wait
        landed.set_exception(error)
        raise
    return landed


class MemoryCore:
    """One collection of memory sets: points in, ``MemorySetItem`` out."""

    def __init__(
        self,
        store: VectorStore,
        embedding: BaseEmbeddingModel,
        collection: str,
        batcher: EmbeddingBatcher | None = None,
    ) -> None:
        self.store = store
        self.embedding = embedding
        self.collection = collection
        self.batcher = batcher
        self.pending = PendingWrites()
        store.ensure_collection(
            collection, embedding.dimension, embedding.model_id, indexes=EXTRA_INDEXES
        )
        self._locks = [threading.Lock() for _ in range(_STRIPES)]
        self._settings_vector = [1.0] + [0.0] * (embedding.dimension - 1)
        # Settings of sets seen through ``settings(known=True)`` or saved here: an action
        # opens its set on every run, and a store read per open cost more than its add.
        # Only this object creates and drops the sets of the keys it serves (a key is served
        # by one subtask at a time; a new subtask starts with a new object).
        self._known: dict[tuple[str, str], SetSettings] = {}

    def lock(self, key: str, name: str) -> threading.Lock:
        """The lock guarding writes to one key's set (striped: bounded however many keys)."""
        return self._locks[hash((key, name)) % _STRIPES]

    # -- settings ----------------------------------------------------------------------------

    @staticmethod
    def settings_id(key: str, name: str) -> str:
        return memory_set_id(key, name)

    def settings(self, key: str, name: str, *, known: bool = False) -> SetSettings | None:
        """A set's settings, None if it does not exist. ``known``: as remembered from an
        earlier call or save (the path of actions opening their sets); else read from the
        store (background work, which must see a set dropped meanwhile)."""
        if known:
            settings = self._known.get((key, name))
            if settings is not None:
                return settings
        found = self.store.get(self.collection, [self.settings_id(key, name)])
        if not found:
            return None
        settings = SetSettings.from_payload(found[0].payload)
        if known:
            self._remember(key, settings)
        return settings

    def save_settings(self, key: str, settings: SetSettings) -> None:
        # The settings point needs some vector; searches never see it (they filter on kind).
        point = Point(
            self.settings_id(key, settings.name), self._settings_vector, settings.payload(key)
        )
        with self.lock(key, settings.name):
            self.store.upsert(self.collection, [point])
            self._remember(key, settings)

    def drop_set(self, key: str, name: str) -> bool:
        self.pending.wait(key)
        with self.lock(key, name):
            self._known.pop((key, name), None)
            existed = self.settings(key, name) is not None
            self.store.delete(self.collection, filter=set_filter(key, name))
        return existed

    def forget_key(self, key: str) -> int:
        """Delete every point of ``key`` (its sets' items and settings), once its writes in
        flight have landed; the number of items deleted."""
        self.pending.wait(key)
        items = delete_key_points(self.store, self.collection, key)
        for known in [known for known in self._known if known[0] == key]:
            self._known.pop(known, None)
        return items

    def _remember(self, key: str, settings: SetSettings) -> None:
        known = self._known
        if len(known) >= _KNOWN_SETS:
            known.clear()  # rare (that many sets open): read them again
        known[(key, settings.name)] = settings

    # -- items -------------------------------------------------------------------------------

    def write(
        self,
        key: str,
        settings: SetSettings,
        values: Sequence[Any],
        *,
        ids: Sequence[str] | None = None,
        tags: Sequence[Mapping[str, float]] | None = None,
        source: str | None = None,
        created: tuple[float, float] | None = None,
        compacted: bool = False,
        require_set: bool = False,
    ) -> list[str]:
        """Embed and upsert encoded ``values``; returns their ids.

        Args:
            tags: one mapping per value (None: no tags).
            created: a (start, end) range for compacted items; None means now.
            require_set: write nothing if the set was deleted meanwhile (background writers).
        """
        if not values:
            return []
        ids = list(ids) if ids is not None else [str(uuid.uuid4()) for _ in values]
        tags = list(tags) if tags is not None else [{}] * len(values)
        vectors = self.embedding.embed(
            [text_of(decode_value(settings.item_type, v)) for v in values]
        )
        points = [
            Point(
                i,
                vector,
                item_payload(key, settings, value, t, source, created=created, compacted=compacted),
            )
            for i, vector, value, t in zip(ids, vectors, values, tags, strict=True)
        ]
        with self.lock(key, settings.name):
            if require_set and self.settings(key, settings.name) is None:
                return []
            self.store.upsert(self.collection, points)
        return ids

    def write_later(
        self,
        key: str,
        settings: SetSettings,
        values: Sequence[Any],
        *,
        ids: Sequence[str],
        tags: Sequence[Mapping[str, float]],
        source: str | None,
        then: Callable[[], None] | None = None,
    ) -> Future[None]:
        """Write encoded ``values`` once the batcher has embedded them (at once, on this
        thread, without a batcher): a future done when the points are stored, failing with
        the embedding's or the store's error. ``then`` runs after they are (on the
        batcher's thread; it must not wait for writes)."""
        if self.batcher is None:
            self.write(key, settings, values, ids=ids, tags=tags, source=source)
            if then is not None:
                then()
            return landed_future()
        # Payloads (and their created_time) are made now: items keep the order of their adds.
        payloads = [
            item_payload(key, settings, value, t, source)
            for value, t in zip(values, tags, strict=True)
        ]
        lock = self.lock(key, settings.name)

        def write(vectors: Vectors) -> None:
            points = [
                Point(i, vector, payload)
                for i, vector, payload in zip(ids, vectors, payloads, strict=True)
            ]
            with lock:
                self.store.upsert(self.collection, points)

        texts = [text_of(decode_value(settings.item_type, v)) for v in values]
        return store_later(self.batcher, self.pending, key, texts, write, then)

    def stored_count(self, key: str, name: str) -> int:
        """The items of one key's set in the store now (not waiting for writes in flight)."""
        return self.store.count(self.collection, items_filter(key, name))

    def delete(self, key: str, name: str, ids: Sequence[str] | None) -> None:
        """Delete items of one key's set by id (None: all items, the settings stay)."""
        self.pending.wait(key)
        with self.lock(key, name):
            self.store.delete(self.collection, ids=ids, filter=items_filter(key, name))

    def trim(self, key: str, name: str, capacity: int) -> int:
        """Delete the oldest items of one key's set beyond ``capacity``; how many it deleted.

        Reads those items only, for their ids (nothing is decoded), and counts once. Holds
        the set's lock from the count to the delete, so the items counted are the items
        trimmed: this core's adds and deletes of the set landing meanwhile wait, and a
        concurrent delete never makes it trim below ``capacity``.
        """
        self.pending.wait(key)
        with self.lock(key, name):
            excess = self.stored_count(key, name) - capacity
            if excess <= 0:
                return 0
            oldest = self.store.scroll(
                self.collection, items_filter(key, name), limit=excess, order_by=_OLDEST_FIRST
            )
            # By id alone: read under the lock from this set, they are its items.
            self.store.delete(self.collection, ids=[r.id for r in oldest])
        return len(oldest)

    def items(
        self,
        key: str,
        name: str,
        *conditions: Any,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[MemorySetItem]:
        """Items of one key's set ordered by ``created_time`` (oldest first by default)."""
        self.pending.wait(key)
        records = self.store.scroll(
            self.collection,
            items_filter(key, name, *conditions),
            limit=limit,
            order_by=OrderBy("created_time", descending=newest_first),
        )
        return [item_from(r.id, r.payload) for r in records]

    def by_ids(self, key: str, name: str, ids: Sequence[str]) -> list[MemorySetItem]:
        if not ids:
            return []
        self.pending.wait(key)
        records = self.store.scroll(self.collection, items_filter(key, name, HasId(ids)))
        found = {r.id: item_from(r.id, r.payload) for r in records}
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def count(self, key: str, name: str) -> int:
        self.pending.wait(key)
        return self.stored_count(key, name)

    def search(
        self, key: str, name: str, query: str, limit: int, conditions: Sequence[Any]
    ) -> list[MemorySetItem]:
        vector = self.embedding.embed_one(query)
        self.pending.wait(key)
        hits = self.store.search(
            self.collection, vector, limit, items_filter(key, name, *conditions)
        )
        return [item_from(h.id, h.payload) for h in hits]

    def touch(self, key: str, name: str, ids: Sequence[str]) -> None:
        """Record that these items were read now: one payload field of the points that
        still exist (under the set's lock, which deletes also take: a late record never
        brings a deleted item back)."""
        now = CLOCK.now()
        with self.lock(key, name):
            records = self.store.get(self.collection, ids)
            alive = [
                r.id
                for r in records
                if r.payload.get("key") == key and r.payload.get("kind") != KIND_SET
            ]
            if alive:
                self.store.set_payload(self.collection, alive, {"last_accessed_time": now})
