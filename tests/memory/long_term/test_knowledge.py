"""Knowledge sets: shared by every key and job, searchable, with created/updated times."""

from __future__ import annotations

import pytest

from flink_agents.api import MemorySetNotFoundError
from flink_agents.integrations.embeddings import LocalEmbeddingModel
from flink_agents.integrations.vector_stores import VectorStore
from flink_agents.memory import IdMinter
from flink_agents.memory.long_term import VectorKnowledge, VectorLongTermMemory


def test_knowledge_add_get_search_update_delete(knowledge: VectorKnowledge) -> None:
    """The whole life of a knowledge item."""
    profiles = knowledge.create_knowledge_set("profiles")
    ids = profiles.add(
        items=[
            {"name": "john", "interest": "table tennis"},
            {"name": "mary", "interest": "baking sourdough bread"},
        ]
    )
    assert [p.value["name"] for p in profiles.get()] == ["john", "mary"]
    hits = profiles.search("who enjoys ping pong?", 1)
    assert hits[0].value["name"] == "john"
    assert hits[0].created_time == hits[0].updated_time

    updated = profiles.update(ids[0], {"name": "john", "interest": "chess"})
    assert updated.value["interest"] == "chess"
    assert updated.created_time < updated.updated_time
    assert profiles.search("board games and strategy", 1)[0].id == ids[0]

    profiles.delete(ids[1])
    assert [p.id for p in profiles.get()] == [ids[0]]
    with pytest.raises(KeyError):
        profiles.update(ids[1], {})
    assert profiles.size() == 1


def test_knowledge_is_shared_by_every_key_and_job(
    knowledge: VectorKnowledge,
    memory: VectorLongTermMemory,
    store: VectorStore,
    embedding: LocalEmbeddingModel,
) -> None:
    """No key scopes it: another knowledge object (another job) sees the same sets."""
    knowledge.create_knowledge_set("faq").add("Refunds take five business days.")
    memory.for_key("alice").create_memory_set("faq", str).add("alice's own note")
    other_job = VectorKnowledge(store, embedding)
    [hit] = other_job.get_knowledge_set("faq").search("how long until I get my money back", 5)
    assert hit.value == "Refunds take five business days."


def test_knowledge_sets_are_separate_and_deletable(knowledge: VectorKnowledge) -> None:
    """Sets do not see each other's items; deleting one removes its items."""
    knowledge.create_knowledge_set("a").add("apple")
    knowledge.create_knowledge_set("b").add("banana")
    assert [i.value for i in knowledge.get_knowledge_set("a").search("fruit", 5)] == ["apple"]
    assert knowledge.create_knowledge_set("a").size() == 1  # creating again keeps it
    assert knowledge.delete_knowledge_set("a") is True
    assert knowledge.delete_knowledge_set("a") is False
    with pytest.raises(MemorySetNotFoundError):
        knowledge.get_knowledge_set("a")
    assert knowledge.get_knowledge_set("b").size() == 1


def test_a_reexecuted_action_adds_knowledge_once(knowledge: VectorKnowledge) -> None:
    """Ids derived from the action identity overwrite on a second run; two adds of one
    execution through fresh views keep both items."""
    knowledge.create_knowledge_set("facts")
    for _ in range(2):
        ids = IdMinter(("job", "k", 1, 1, "learn"))
        knowledge.bound(ids).get_knowledge_set("facts").add("sky is blue")
        knowledge.bound(ids).get_knowledge_set("facts").add("grass is green")
    assert sorted(i.value for i in knowledge.get_knowledge_set("facts").get()) == [
        "grass is green",
        "sky is blue",
    ]
