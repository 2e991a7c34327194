"""Deleting one key's points: its memory sets, and the knowledge items its runs wrote."""

from __future__ import annotations

from flink_agents.integrations.vector_stores import FieldMatch, FieldMatchAny, Filter, VectorStore
from flink_agents.memory.long_term._codec import ITEM_KINDS

KIND_KNOWLEDGE = "knowledge"


def delete_key_points(store: VectorStore, collection: str, key: str) -> int:
    """Delete every point of ``key`` (memory's spelling of it, ``memory_key_text``) from a
    memory collection: its sets' items and settings. Returns how many items went."""
    items = store.count(
        collection, Filter(must=[FieldMatch("key", key), FieldMatchAny("kind", list(ITEM_KINDS))])
    )
    store.delete(collection, filter=Filter(must=[FieldMatch("key", key)]))
    return items


def delete_owned_knowledge(store: VectorStore, collection: str, owner: str) -> int:
    """Delete the knowledge items ``owner`` (a key, as ``memory_key_text`` spells it) added
    or last updated, from a knowledge collection; how many."""
    owned = Filter(must=[FieldMatch("kind", KIND_KNOWLEDGE), FieldMatch("owner", owner)])
    count = store.count(collection, owned)
    if count:
        store.delete(collection, filter=owned)
    return count
