"""Seed 004's weighted tag retrieval and seed 003's sources and handed-over memories."""

from __future__ import annotations

import json

from flink_agents.api import ChatMessage, MessageRole, items_for_handoff
from flink_agents.memory.long_term import VectorLongTermMemory


def test_retrieve_returns_the_best_score_and_the_newest_on_a_tie(
    memory: VectorLongTermMemory,
) -> None:
    """Score is the sum of matching tags' weights; equal scores go to the newest item."""
    obs = memory.for_key("k").create_memory_set("obs", str)
    obs.add("old observation", tags=["observation"])
    obs.add("an action", tags=["action"])
    obs.add("new observation", tags=["observation"])
    obs.add("plan and action", tags=["plan", "action"])
    assert obs.retrieve(["observation"]).item == "new observation"
    assert obs.retrieve({"action": 1.0, "plan": 0.5}).item == "plan and action"
    assert obs.retrieve({"observation": 2.0, "action": 1.0}).item == "new observation"
    assert obs.retrieve("action").item == "plan and action"  # tie on 1.0: newest wins
    assert obs.retrieve(["thought"]) is None
    assert obs.retrieve({"observation": -1.0}) is None  # the best score is not above zero


def test_retrieve_all_returns_every_item_at_the_best_score(memory: VectorLongTermMemory) -> None:
    """All best matches, newest first; nothing when no tag matches."""
    obs = memory.for_key("k").create_memory_set("obs", str)
    obs.add("o1", tags=["observation"])
    obs.add("a1", tags=["action"])
    obs.add("o2", tags=["observation"])
    obs.add("o3 with action", tags=["observation", "action"])
    assert [i.item for i in obs.retrieve_all(["observation"])] == ["o3 with action", "o2", "o1"]
    both = obs.retrieve_all({"observation": 1, "action": 1})
    assert [i.item for i in both] == ["o3 with action"]
    assert [i.item for i in obs.retrieve_all({"action": 3, "observation": 1})] == ["o3 with action"]
    assert obs.retrieve_all({"thought": 1}) == []


def test_item_tag_weights_multiply_the_query_weights(memory: VectorLongTermMemory) -> None:
    """An item tagged with weights scores query weight times its own weight."""
    obs = memory.for_key("k").create_memory_set("obs", str)
    obs.add("weak", tags={"topic": 0.2})
    obs.add("strong", tags={"topic": 0.9})
    obs.add("newest but plain", tags={"other": 1.0})
    assert obs.retrieve(["topic"]).item == "strong"


def test_a_handed_over_memory_keeps_its_source(memory: VectorLongTermMemory) -> None:
    """Agent A's memories go through a JSON payload into B's memory, with A as source."""
    a = memory.for_key("session-1").create_memory_set("chat", ChatMessage)
    a.add(
        ChatMessage(role=MessageRole.USER, content="I am agent A, nice to meet you"),
        tags=["intro"],
        source="user",
    )
    a.add(ChatMessage(role=MessageRole.USER, content="private scratch note"))
    selected = a.retrieve_all(["intro"])
    payload = json.loads(json.dumps(items_for_handoff(selected, sender="agent_a")))

    b = memory.for_key("session-2").create_memory_set("chat", ChatMessage)
    b.add_from(payload)
    [received] = b.get()
    assert received.item.content == "I am agent A, nice to meet you"
    assert received.source == "agent_a"
    assert received.tags == {"intro": 1.0}
    assert b.search("greeting", 1, {"source": "agent_a"})[0].id == received.id
    assert a.size() == 2  # the sender keeps its own


def test_add_from_may_name_the_source(memory: VectorLongTermMemory) -> None:
    """The receiver may label the source itself; JSON values travel too."""
    sender = memory.for_key("a").create_memory_set("facts", object)
    sender.add({"city": "Lyon"})
    receiver = memory.for_key("b").create_memory_set("facts", object)
    receiver.add_from(items_for_handoff(sender.get(), "agent_a"), source="team-lead")
    assert [(i.item, i.source) for i in receiver.get()] == [({"city": "Lyon"}, "team-lead")]
