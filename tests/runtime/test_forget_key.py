"""Forgetting a key (``ForgetKey``) in the local runner: nothing of the key is left in any
store we write (state, action log, long-term memory, knowledge, event log, timers), the
other keys keep theirs, and the key's later records start afresh."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from flink_agents._ids import key_text
from flink_agents.api import AgentsExecutionEnvironment, ForgetKey
from flink_agents.integrations.vector_stores import open_vector_store
from flink_agents.memory.long_term import KNOWLEDGE_COLLECTION, MEMORY_COLLECTION
from flink_agents.runtime import AgentOptions, LocalRunner, local_journal
from flink_agents.runtime._erasure import keyed_input
from tests.runtime.forgetting_agents import RELEASE, Remembers

SECRET = "alice-secret-7f3a"
"""Text only alice's records carry: found nowhere once she is forgotten."""
KEPT = "bob-note-51c2"


def by_user(record: dict) -> str:
    return record["user"]


def records(user: str, marker: str) -> list[dict]:
    return [
        {"user": user, "text": f"{marker} one", "long_term": True, "follow_up": True},
        {"user": user, "text": f"{marker} two", "ask": True},
    ]


def options(tmp_path: Path, **more) -> dict:
    return {
        "data_dir": str(tmp_path),
        "action_log": str(tmp_path / "log.db"),
        "event_log_level": "verbose",
        **more,
    }


def event_lines(tmp_path: Path) -> list[str]:
    return [
        line
        for file in sorted((tmp_path / "event-log").rglob("events.jsonl*"))
        for line in file.read_text().splitlines()
    ]


def stored_texts(tmp_path: Path) -> str:
    """Every point of the memory and knowledge collections, as one text."""
    store = open_vector_store(str(tmp_path / "vector-store"))
    try:
        points = [
            record.payload
            for collection in (MEMORY_COLLECTION, KNOWLEDGE_COLLECTION)
            for record in store.scroll(collection)
        ]
    finally:
        store.close()
    return json.dumps(points)


def log_rows(tmp_path: Path, key: str, name: str = "log.db") -> int:
    """The rows of ``key`` in the SQLite action log ``tmp_path/name``."""
    with sqlite3.connect(tmp_path / name) as db:
        return sum(
            db.execute(
                f"SELECT COUNT(*) FROM {table} WHERE run_key = ?", (key_text(key),)
            ).fetchone()[0]
            for table in ("action_log_records", "action_log_calls")
        )


def log_bytes(tmp_path: Path, name: str = "log.db") -> bytes:
    """Every byte of the SQLite action log ``tmp_path/name``, with its write-ahead file."""
    return b"".join(file.read_bytes() for file in tmp_path.glob(f"{name}*"))


def test_forgetting_a_key_leaves_nothing_of_it(tmp_path):
    env = AgentsExecutionEnvironment.get_execution_environment(**options(tmp_path))
    requests = [*records("alice", SECRET), *records("bob", KEPT)]
    builder = env.from_list([*requests, ForgetKey("alice", request_id="ticket-7")], by_user)
    builder = builder.apply(Remembers)
    outputs = builder.to_list()
    runner = builder.runner

    # Bob's wait timed out at the end of input (his action then ran to its end) and his
    # follow-up fired; alice's waiting run and follow-up went with her (her first run's
    # output went out before).
    assert [o for o in outputs if o["user"] == "alice"] == [
        {"user": "alice", "text": f"{SECRET} ONE".upper(), "count": 1}
    ]
    assert [o for o in outputs if o["user"] == "bob"] == [
        {"user": "bob", "text": f"{KEPT} ONE".upper(), "count": 1},
        {"user": "bob", "text": f"{KEPT} TWO".upper(), "count": 2},
        {"user": "bob", "answer": None, "last": f"{KEPT} two"},
        {"user": "bob", "follow_up": f"{KEPT} one", "count": 2},
    ]

    # Flink state (the runner's dicts) and timers.
    assert "alice" not in runner.keys
    assert runner.short_term_memory("bob")["notes"]["last"] == f"{KEPT} two"
    assert not [entry for entry in runner._timers if entry[2] == "alice"]
    metrics = runner.metrics.snapshot()
    assert metrics["numOfKeysForgotten"] == 1

    # The action log: no row, and no byte of the text (deleted securely).
    assert log_rows(tmp_path, "alice") == 0
    assert log_rows(tmp_path, "bob") > 0
    raw = log_bytes(tmp_path)
    assert SECRET.encode() not in raw and SECRET.upper().encode() not in raw
    assert KEPT.encode() in raw

    # Long-term memory and knowledge.
    stored = stored_texts(tmp_path)
    assert SECRET not in stored and "alice" not in stored
    assert KEPT in stored

    # The event log: alice's lines are gone; one record confirms, naming nothing of hers.
    lines = event_lines(tmp_path)
    assert not [line for line in lines if "alice" in line or SECRET in line]
    assert [line for line in lines if KEPT in line]
    confirmations = [json.loads(line) for line in lines if '"key_forgotten"' in line]
    assert len(confirmations) == 1
    confirmation = confirmations[0]
    assert confirmation["request_id"] == "ticket-7"
    assert "key" not in confirmation
    removed = confirmation["removed"]
    assert removed["scheduled_events"] == 1
    assert removed["waiting_runs"] == 1
    assert removed["action_log_records"] > 0
    assert removed["long_term_items"] == 1
    assert removed["knowledge_items"] == 1
    assert removed["event_log_lines"] > 0


def test_a_forgotten_key_starts_afresh(tmp_path):
    env = AgentsExecutionEnvironment.get_execution_environment(**options(tmp_path))
    builder = env.from_list(
        [
            {"user": "alice", "text": f"{SECRET} one", "follow_up": True},
            ForgetKey("alice"),
            {"user": "alice", "text": "again"},
        ],
        by_user,
    )
    outputs = builder.apply(Remembers).to_list()
    assert outputs == [
        {"user": "alice", "text": f"{SECRET} ONE".upper(), "count": 1},
        {"user": "alice", "text": "AGAIN", "count": 1},  # a new key's first run
    ]
    runner = builder.runner
    assert runner.runs("alice") == 1
    assert runner.short_term_memory("alice") == {"count": 1, "notes": {"last": "again"}}
    assert SECRET.encode() not in log_bytes(tmp_path)


def test_a_forget_request_waits_for_the_run_in_progress(tmp_path):
    """The request takes its turn: the run in progress and the input before it end (their
    outputs go out), the erasure follows, and the input after it runs as a new key's."""
    runner_options = AgentOptions(**options(tmp_path))
    runner = LocalRunner(Remembers, options=runner_options, journal=local_journal(runner_options))
    RELEASE.clear()
    try:
        runner.feed("alice", {"user": "alice", "text": "first", "hold": True})
        runner.feed("alice", {"user": "alice", "text": "second", "follow_up": True})
        runner.feed(*keyed_input(None, ForgetKey("alice")))
        runner.feed("alice", {"user": "alice", "text": "third"})
        assert runner.keyed_outputs == []  # the first run is parked: all of them queue
    finally:
        RELEASE.set()
    runner.finish()
    runner.engine.close()
    assert [output for _, output in runner.keyed_outputs] == [
        {"user": "alice", "text": "FIRST", "count": 1},
        {"user": "alice", "text": "SECOND", "count": 2},
        {"user": "alice", "text": "THIRD", "count": 1},  # after the erasure; no follow-up
    ]
    assert runner.runs("alice") == 1
    assert log_rows(tmp_path, "alice") == 1  # the third run's record alone


def test_the_local_runner_forgets_a_key_on_request(tmp_path):
    runner_options = AgentOptions(**options(tmp_path))
    runner = LocalRunner(Remembers, options=runner_options, journal=local_journal(runner_options))
    runner.run("alice", {"user": "alice", "text": SECRET, "follow_up": True})
    assert runner.forget("alice", request_id="r-1") == []
    assert "alice" not in runner.keys
    assert runner.run("alice", {"user": "alice", "text": "again"})[0]["count"] == 1
    runner.engine.close()
    assert SECRET.encode() not in log_bytes(tmp_path)


def test_a_runner_that_never_opened_the_store_erases_there_too(tmp_path):
    """After a restart, say: the key's long-term memory and knowledge are deleted from the
    store alone, without loading an embedding model."""
    runner_options = AgentOptions(**options(tmp_path))
    first = LocalRunner(Remembers, options=runner_options, journal=local_journal(runner_options))
    first.run("alice", {"user": "alice", "text": SECRET, "long_term": True})
    first.run("bob", {"user": "bob", "text": KEPT, "long_term": True})
    first.engine.close()
    second = LocalRunner(Remembers, options=runner_options, journal=local_journal(runner_options))
    second.forget("alice")
    assert second.engine.long_term._memory is None  # (never opened)
    second.engine.close()
    stored = stored_texts(tmp_path)
    assert SECRET not in stored and KEPT in stored


def test_forget_requests_come_on_the_signal_stream_too(tmp_path):
    env = AgentsExecutionEnvironment.get_execution_environment(**options(tmp_path))
    builder = env.from_list([{"user": "alice", "text": SECRET, "ask": True}], by_user)
    builder = builder.apply(Remembers)
    builder.with_signals([ForgetKey("alice", request_id="by-signal")], key_selector=lambda s: s)
    outputs = builder.to_list()
    # The waiting run was dropped with the key: its action never ran to its end, so
    # nothing went out, not even at the timeout.
    assert outputs == []
    assert "alice" not in builder.runner.keys
    confirmations = [line for line in event_lines(tmp_path) if '"key_forgotten"' in line]
    assert len(confirmations) == 1 and '"by-signal"' in confirmations[0]


@pytest.mark.parametrize("request_id", [7, b"x"])
def test_a_request_id_is_text(request_id):
    with pytest.raises(TypeError, match="request_id"):
        ForgetKey("alice", request_id=request_id)


def test_a_forgotten_key_called_back_before_its_next_record_keeps_that_records_memory(tmp_path):
    """A timer of the key set before its erasure (its async action's polls) fires after it,
    before the key's next record: that record's memory is still the key's, not written
    over the state the runner dropped (which the driver's cache entry for the callback
    held, until ``state_dropped``). Timing-dependent in the parity scenario; here not."""
    runner_options = AgentOptions(**options(tmp_path))
    runner = LocalRunner(Remembers, options=runner_options, journal=local_journal(runner_options))
    runner.run("alice", {"user": "alice", "text": SECRET})
    runner.forget("alice")
    assert runner.advance_time(timedelta(seconds=10)) == []
    assert "alice" not in runner.keys
    assert runner.run("alice", {"user": "alice", "text": "again"})[0]["count"] == 1
    runner.engine.close()
    assert runner.short_term_memory("alice") == {"count": 1, "notes": {"last": "again"}}
