"""Memory sets on both backends: writing, reading, searching, isolation, idempotent ids."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flink_agents.api import (
    CapacityManageStrategy,
    ChatMessage,
    MemorySetNotFoundError,
    MessageRole,
)
from flink_agents.memory import IdMinter
from flink_agents.memory.long_term import VectorLongTermMemory
from tests.memory.long_term.conftest import MemoryFactory


def test_items_read_back_with_their_fields(memory: VectorLongTermMemory) -> None:
    """An added item comes back with its value, set name, tags, source and times."""
    before = datetime.now(UTC)
    notes = memory.for_key("alice").create_memory_set("notes", str, capacity=10)
    [item_id] = notes.add("likes green tea", tags=["drinks"], source="chat")
    [item] = notes.get(item_id)
    assert item.id == item_id
    assert item.memory_set_name == "notes"
    assert item.item == "likes green tea"
    assert item.compacted is False
    assert item.tags == {"drinks": 1.0}
    assert item.source == "chat"
    assert isinstance(item.created_time, datetime)
    assert before <= item.created_time <= datetime.now(UTC)
    assert item.last_accessed_time is not None


def test_chat_messages_and_json_values_round_trip(memory: VectorLongTermMemory) -> None:
    """A ChatMessage set gives ChatMessages back; a JSON set any JSON value, lists included."""
    view = memory.for_key("alice")
    chat = view.create_memory_set("chat", ChatMessage)
    chat.add(
        [ChatMessage(role=MessageRole.USER, content="hi"), {"role": "assistant", "content": "yo"}]
    )
    assert [m.item for m in chat.get()] == [
        ChatMessage(role=MessageRole.USER, content="hi"),
        ChatMessage(role=MessageRole.ASSISTANT, content="yo"),
    ]
    facts = view.create_memory_set("facts", object)
    facts.add([1, 2, 3])
    facts.add({"city": "Lyon"})
    assert [f.item for f in facts.get()] == [[1, 2, 3], {"city": "Lyon"}]
    with pytest.raises(TypeError, match="holds str items"):
        view.create_memory_set("strings", str).add(42)
    with pytest.raises(TypeError, match="JSON"):
        facts.add({"when": datetime.now(UTC)})


def test_get_recent_returns_the_newest_oldest_first(memory: VectorLongTermMemory) -> None:
    """get_recent(n) holds the n newest items in the order they were added."""
    notes = memory.for_key("alice").create_memory_set("notes", str)
    for n in range(6):
        notes.add(f"note {n}")
    assert [i.item for i in notes.get_recent(3)] == ["note 3", "note 4", "note 5"]
    assert [i.item for i in notes.get_recent(10)] == [f"note {n}" for n in range(6)]
    assert notes.get_recent(0) == []
    assert [i.item for i in notes.get()] == [f"note {n}" for n in range(6)]


def test_delete_by_id_and_all(memory: VectorLongTermMemory) -> None:
    """delete(ids) removes those items only; delete() empties the set but keeps it."""
    view = memory.for_key("alice")
    notes = view.create_memory_set("notes", str)
    ids = notes.add(["a", "b", "c"])
    notes.delete(ids[1])
    assert [i.item for i in notes.get()] == ["a", "c"]
    assert notes.size() == 2
    notes.delete()
    assert notes.size() == 0
    assert view.get_memory_set("notes").name == "notes"


def test_a_paraphrase_ranks_above_unrelated_items(memory: VectorLongTermMemory) -> None:
    """With the offline model, a query in other words finds the item that means it."""
    prefs = memory.for_key("alice").create_memory_set("prefs", str)
    prefs.add(
        [
            "The quarterly revenue report is due on Friday.",
            "I am allergic to peanuts, so keep them out of my food.",
            "The printer on the third floor is out of toner.",
            "My favourite football team is playing tonight.",
        ]
    )
    hits = prefs.search("Which foods must this person avoid?", limit=4)
    assert hits[0].item == "I am allergic to peanuts, so keep them out of my food."
    assert len(hits) == 4


def test_search_filters(memory: VectorLongTermMemory) -> None:
    """Filters on tags, source and time narrow a search."""
    notes = memory.for_key("alice").create_memory_set("notes", str)
    notes.add("likes tea", tags=["drinks"], source="agent_a")
    cut = datetime.now(UTC)
    notes.add("likes coffee", tags=["drinks"], source="agent_b")
    notes.add("hikes on weekends", tags=["hobbies"], source="agent_a")
    assert {i.item for i in notes.search("drink", 5, {"tags": "drinks"})} == {
        "likes tea",
        "likes coffee",
    }
    assert [i.item for i in notes.search("drink", 5, {"source": ["agent_b"]})] == ["likes coffee"]
    assert {i.item for i in notes.search("x", 5, {"created_after": cut})} == {
        "likes coffee",
        "hikes on weekends",
    }
    assert notes.search("x", 5, {"compacted": True}) == []
    with pytest.raises(ValueError, match="unknown search filter"):
        notes.search("x", 5, {"colour": "red"})


def test_memory_sets_are_invisible_to_other_keys(memory: VectorLongTermMemory) -> None:
    """Another key sees neither the set nor its items, even under the same set name."""
    alice = memory.for_key("alice").create_memory_set("notes", str)
    alice.add("alice's secret: the safe code is 1234")
    with pytest.raises(MemorySetNotFoundError):
        memory.for_key("bob").get_memory_set("notes")
    bob = memory.for_key("bob").create_memory_set("notes", str)
    bob.add("bob likes jazz")
    assert [i.item for i in bob.search("safe code", 5)] == ["bob likes jazz"]
    assert [i.item for i in bob.get()] == ["bob likes jazz"]
    assert bob.retrieve_all(["x"]) == []
    assert memory.for_key(1).create_memory_set("notes", str).size() == 0  # int 1 != "alice"
    assert memory.for_key("1").create_memory_set("notes", str).size() == 0


def test_settings_persist_in_the_store(make_memory: MemoryFactory) -> None:
    """Another long-term memory object on the same store (a later run) sees a set's settings."""
    first = make_memory()
    first.for_key("k").create_memory_set(
        "chat", ChatMessage, capacity=7, capacity_manage_strategy="summarize"
    )
    again = make_memory().for_key("k").get_memory_set("chat")
    assert again.item_type is ChatMessage
    assert again.capacity == 7
    assert again.capacity_manage_strategy == CapacityManageStrategy.SUMMARIZE


def test_create_is_idempotent_but_refuses_other_settings(memory: VectorLongTermMemory) -> None:
    """Creating the same set again returns it; with other settings it is an error."""
    view = memory.for_key("k")
    view.create_memory_set("notes", str, capacity=3).add("kept")
    assert view.create_memory_set("notes", str, capacity=3).size() == 1
    with pytest.raises(ValueError, match="other settings"):
        view.create_memory_set("notes", str, capacity=4)
    assert view.delete_memory_set("notes") is True
    assert view.delete_memory_set("notes") is False
    assert view.create_memory_set("notes", str, capacity=4).size() == 0


def test_a_set_opened_again_is_not_read_from_the_store_again(
    memory: VectorLongTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Actions open their set on every run: after the first open (or the create), opening
    it again reads no settings from the store; a dropped set is read (and missed) again."""
    view = memory.for_key("k")
    view.create_memory_set("notes", str, capacity=3)
    store = memory.core.store
    reads: list[list[str]] = []
    real_get = store.get
    monkeypatch.setattr(
        store,
        "get",
        lambda collection, ids, **kw: reads.append(list(ids)) or real_get(collection, ids, **kw),
    )
    for _ in range(3):
        assert view.create_memory_set("notes", str, capacity=3).capacity == 3
        assert view.get_memory_set("notes").capacity == 3
    assert reads == []
    view.delete_memory_set("notes")
    with pytest.raises(MemorySetNotFoundError):
        view.get_memory_set("notes")
    assert len(reads) == 2  # the delete's check and the get's: neither remembered the set


def test_an_added_item_stores_no_field_that_repeats_another(memory: VectorLongTermMemory) -> None:
    """A plain add stores created_time once (no created_start, no last_accessed_time) and no
    empty tags: every payload field costs the store a conversion. Reads give the same item."""
    notes = memory.for_key("k").create_memory_set("notes", str)
    [plain] = notes.add("plain")
    [tagged] = notes.add("tagged", tags={"x": 0.5}, source="chat")
    payloads = {
        r.id: r.payload for r in memory.core.store.get(memory.core.collection, [plain, tagged])
    }
    assert set(payloads[plain]) == {"kind", "key", "set", "item_type", "value", "created_time"}
    assert payloads[tagged]["tags"] == ["x"]
    assert payloads[tagged]["source"] == "chat"
    item = memory.for_key("k").get_memory_set("notes").get(plain)[0]
    assert item.last_accessed_time == item.created_time
    assert item.tags == {}
    assert item.source is None


def test_a_reexecuted_action_overwrites_instead_of_duplicating(
    memory: VectorLongTermMemory,
) -> None:
    """The same action identity writes the same ids: running it twice leaves one copy."""
    identity = ("job-1", "alice", 3, 2, "remember")

    def action() -> list[str]:  # one execution: one minter
        view = memory.for_key("alice", IdMinter(identity))
        notes = view.create_memory_set("notes", str)
        return notes.add(["likes tea", "hikes"]) + notes.add("reads sci-fi")

    first = action()
    second = action()
    assert first == second
    notes = memory.for_key("alice").get_memory_set("notes")
    assert [i.item for i in notes.get()] == ["likes tea", "hikes", "reads sci-fi"]
    other = memory.for_key("alice", IdMinter(("job-1", "alice", 4, 2, "remember")))
    other.get_memory_set("notes").add("likes tea")
    assert notes.size() == 4
    anonymous = memory.for_key("alice").get_memory_set("notes")
    assert anonymous.add("x") != anonymous.add("x")


def test_reads_record_the_access_time(memory: VectorLongTermMemory) -> None:
    """A read rewrites last_accessed_time in the background, never resurrecting an item."""
    notes = memory.for_key("k").create_memory_set("notes", str)
    ids = notes.add(["a", "b"])
    written = notes.get(ids[0])[0].last_accessed_time
    assert memory.wait_for_compaction(10)
    assert notes.get(ids[0])[0].last_accessed_time > written
    notes.get()
    notes.delete(ids)
    assert memory.wait_for_compaction(10)
    assert notes.size() == 0


def test_every_view_of_one_execution_draws_from_its_minter(memory: VectorLongTermMemory) -> None:
    """Fresh views, repeated get_memory_set and other sets in one execution never collide,
    and the execution run again writes exactly the same ids."""
    identity = ("job-1", "alice", 3, 2, "remember")
    memory.for_key("alice").create_memory_set("notes", str)
    memory.for_key("alice").create_memory_set("todo", str)

    def action() -> list[str]:
        ids = IdMinter(identity)
        written = []
        for n in range(5):
            written += memory.for_key("alice", ids).get_memory_set("notes").add(f"note {n}")
            written += memory.for_key("alice", ids).get_memory_set("todo").add(f"todo {n}")
        return written

    first = action()
    assert len(set(first)) == 10
    assert action() == first
    assert memory.for_key("alice").get_memory_set("notes").size() == 5
    assert memory.for_key("alice").get_memory_set("todo").size() == 5
