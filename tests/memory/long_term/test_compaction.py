"""Capacity management in the background: trim, summarize (scripted LLM), user functions."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

from flink_agents.api import ChatMessage, MemorySetItem
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.testing.llm_server import ScriptedLLMServer
from tests.memory.long_term.conftest import SUMMARY, MemoryFactory


def keep_tagged(items: list[MemorySetItem], target: int) -> list[object]:
    """A user strategy: keep the items tagged 'keep', fold the others into a count."""
    kept = [i for i in items if "keep" in i.tags][: target - 1]
    return [*kept, f"{len(items) - len(kept)} notes dropped"]


GATE = threading.Event()
COMPACTED = threading.Event()


def gated_keep_newest(items: list[MemorySetItem], target: int) -> list[object]:
    """A user strategy that waits for the test to open ``GATE``, then keeps the newest."""
    GATE.wait(30)
    COMPACTED.set()
    return list(items[-target:])


def test_trim_keeps_the_newest_items(make_memory: MemoryFactory) -> None:
    """Over capacity, trim drops the oldest; once settled the count is at the capacity."""
    memory = make_memory()
    notes = memory.for_key("k").create_memory_set("notes", str, capacity=5)
    for n in range(12):
        notes.add(f"note {n}")
        assert memory.wait_for_compaction(10)
        assert notes.size() <= 5
    assert [i.item for i in notes.get()] == [f"note {n}" for n in range(7, 12)]
    assert memory.compaction_errors == []


def test_trim_settles_under_capacity_after_a_burst(make_memory: MemoryFactory) -> None:
    """Many adds without waiting: compaction catches up and the count settles."""
    memory = make_memory()
    notes = memory.for_key("k").create_memory_set("notes", str, capacity=4)
    for n in range(15):
        notes.add(f"note {n}")
    assert memory.wait_for_compaction(20)
    assert [i.item for i in notes.get()] == [f"note {n}" for n in range(11, 15)]


def test_a_trim_deletes_exactly_the_oldest_items_over_capacity(make_memory: MemoryFactory) -> None:
    """One trim of a set four over its capacity deletes its four oldest items, and a trim of
    a set at its capacity deletes nothing (the set has no capacity: nothing else trims)."""
    memory = make_memory()
    notes = memory.for_key("k").create_memory_set("notes", str)
    notes.add([f"note {n}" for n in range(7)])
    other = memory.for_key("other").create_memory_set("notes", str)
    other.add("another key's note")
    assert memory.core.trim("k", "notes", 3) == 4
    assert [i.item for i in notes.get()] == ["note 4", "note 5", "note 6"]
    assert memory.core.trim("k", "notes", 3) == 0
    assert [i.item for i in other.get()] == ["another key's note"]


def test_a_pausing_access_record_holds_up_no_compaction(make_memory: MemoryFactory) -> None:
    """Recording reads pauses (it gathers reads over an interval, and paces its writes);
    a compaction scheduled meanwhile runs beside it rather than after it."""
    memory = make_memory(access_interval=60)
    released = threading.Event()
    memory.access._sleep = released.wait  # a pause that ends when the test says so
    notes = memory.for_key("k").create_memory_set("notes", str, capacity=3)
    notes.add(["a", "b"])
    notes.get()  # the first access record is written at once
    assert memory.wait_for_compaction(10)
    notes.get()  # the next one waits out the interval (60 s) before it writes
    try:
        notes.add(["c", "d", "e"])  # over capacity: a compaction is scheduled
        deadline = time.monotonic() + 30
        while notes.size() > 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [i.item for i in notes.get()] == ["c", "d", "e"]
        assert not memory.wait_for_compaction(0.05)  # the access record still pauses
    finally:
        released.set()
    assert memory.wait_for_compaction(10)


def test_summarize_folds_the_oldest_into_one_compacted_item(
    make_memory: MemoryFactory, summarizer: OpenAIChatModel, llm_server: ScriptedLLMServer
) -> None:
    """The chat model's summary replaces the oldest items and covers their time range."""
    memory = make_memory(chat_model=summarizer)
    chat = memory.for_key("k").create_memory_set(
        "chat", ChatMessage, capacity=4, capacity_manage_strategy="summarize"
    )
    for n in range(10):
        chat.add({"role": "user", "content": f"message {n}"}, tags=["chat"])
        assert memory.wait_for_compaction(20)
        assert chat.size() <= 4
    items = chat.get()
    summaries = [i for i in items if i.compacted]
    assert summaries and all(s.item.content == SUMMARY for s in summaries)
    assert items[-1].item.content == "message 9"
    first = summaries[0]
    start, end = first.created_time
    assert isinstance(start, datetime) and start < end
    assert first.tags == {"chat": 1.0}
    request = llm_server.calls[0].request["messages"][-1]["content"]
    assert "user: message 0" in request and "user: message 1" in request
    assert memory.compaction_errors == []
    assert [s.item.content for s in chat.search("tea", 1)] == [SUMMARY]


def test_a_failed_summary_loses_nothing_and_is_retried(
    make_memory: MemoryFactory, summarizer: OpenAIChatModel, llm_server: ScriptedLLMServer
) -> None:
    """500s from the model: every item stays; a retry with backoff then compacts."""
    memory = make_memory(chat_model=summarizer, retry_attempts=3)
    notes = memory.for_key("k").create_memory_set(
        "notes", str, capacity=4, capacity_manage_strategy="summarize"
    )
    notes.add([f"note {n}" for n in range(4)])
    llm_server.fail_next(3, 500)  # every attempt of the first pass fails
    notes.add("note 4")
    assert memory.wait_for_compaction(20)
    assert len(memory.compaction_errors) == 1
    assert [i.item for i in notes.get()] == [f"note {n}" for n in range(5)]

    llm_server.fail_next(2, 500)  # the next pass succeeds on its third attempt
    notes.add("note 5")
    assert memory.wait_for_compaction(20)
    assert len(memory.compaction_errors) == 1
    items = notes.get()  # folded down to half the capacity: the summary and the newest
    assert [i.item for i in items] == [SUMMARY, "note 5"]
    assert items[0].compacted
    assert [c.status for c in llm_server.calls] == [500, 500, 500, 500, 500, 200]


def test_adding_never_waits_for_compaction(make_memory: MemoryFactory) -> None:
    """A compaction that cannot finish does not hold up add: both adds return while the
    strategy is still blocked, and the count settles once it is let go. (If add waited, it
    would return only after the strategy's 30 s wait had ended and set ``COMPACTED``.)"""
    GATE.clear()
    COMPACTED.clear()
    memory = make_memory()
    notes = memory.for_key("k").create_memory_set(
        "notes", str, capacity=2, capacity_manage_strategy=gated_keep_newest
    )
    notes.add(["a", "b", "c"])  # over capacity: a compaction starts and blocks on the gate
    notes.add("d")
    assert not COMPACTED.is_set()
    assert notes.size() == 4  # nothing folded yet
    GATE.set()
    assert memory.wait_for_compaction(20)
    assert COMPACTED.is_set()
    assert [i.item for i in notes.get()] == ["c", "d"]


def test_a_user_function_chooses_the_replacements(make_memory: MemoryFactory) -> None:
    """The function gets every item and returns what stays; new values become compacted."""
    memory = make_memory()
    notes = memory.for_key("k").create_memory_set(
        "notes", str, capacity=3, capacity_manage_strategy=keep_tagged
    )
    notes.add("important", tags=["keep"])
    notes.add(["x", "y", "z"])
    assert memory.wait_for_compaction(10)
    items = notes.get()
    assert sorted(i.item for i in items) == ["3 notes dropped", "important"]
    assert [i.compacted for i in items if i.item == "3 notes dropped"] == [True]
    reopened = make_memory().for_key("k").get_memory_set("notes")
    assert reopened.capacity_manage_strategy is keep_tagged


def test_each_compaction_is_one_info_line(make_memory: MemoryFactory, caplog) -> None:
    caplog.set_level(logging.INFO, logger="flink_agents")
    memory = make_memory()
    notes = memory.for_key("k").create_memory_set("notes", str, capacity=2)
    for n in range(3):
        notes.add(f"note {n}")
        assert memory.wait_for_compaction(10)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("flink_agents")]
    assert lines == [
        "compacted memory set 'notes' of key 'k': 3 items over its capacity of 2 (trim)"
    ]
