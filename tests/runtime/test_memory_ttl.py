"""``short-term-memory-ttl`` in the local runner, on its simulated clock: a key idle for the
TTL loses its short-term memory, whole; a key with a scheduled event or a waiting run is not
idle; a restored key whose check was lost expires when it is next seen."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from flink_agents.api import FlinkAgentsError
from flink_agents.runtime import AgentOptions, LocalRunner, load_options
from flink_agents.runtime._scheduling import signal_input
from tests.runtime.forgetting_agents import Answer, Remembers

HOUR = timedelta(hours=1)


def runner(tmp_path: Path, ttl: timedelta = HOUR) -> LocalRunner:
    options = AgentOptions(
        data_dir=str(tmp_path), short_term_memory_ttl=ttl, event_log_level="standard"
    )
    return LocalRunner(Remembers, options=options)


def note(text: str, **more) -> dict:
    return {"user": "ada", "text": text, **more}


def test_an_idle_keys_memory_expires_whole_after_the_ttl(tmp_path):
    agent = runner(tmp_path)
    assert agent.run("ada", note("one")) == [{"user": "ada", "text": "ONE", "count": 1}]
    agent.advance_time(HOUR * 0.9)
    assert agent.run("ada", note("two"))[0]["count"] == 2  # active again: the TTL restarts
    agent.advance_time(HOUR * 0.9)
    assert agent.short_term_memory("ada") == {"count": 2, "notes": {"last": "two"}}
    agent.advance_time(HOUR * 0.2)  # an hour after the last run: its check fires
    assert agent.short_term_memory("ada") == {}
    assert agent.runs("ada") == 2  # the key's run count stays (its action-log records too)
    assert agent.metrics.snapshot()["numOfShortTermMemoriesExpired"] == 1
    assert agent.run("ada", note("three"))[0]["count"] == 1
    agent.engine.close()
    lines = [
        json.loads(line)
        for file in (tmp_path / "event-log").rglob("events.jsonl*")
        for line in file.read_text().splitlines()
    ]
    (expired,) = [line for line in lines if line["kind"] == "memory_expired"]
    assert (expired["key"], expired["run"]) == ("ada", 2)


def test_a_key_with_a_scheduled_event_is_not_idle(tmp_path):
    agent = runner(tmp_path)
    agent.run("ada", note("one", follow_up=True))  # a follow-up in a day
    outputs = agent.advance_time(timedelta(days=1))
    # The follow-up's run saw the memory: nothing expired while it was pending.
    assert outputs == [{"user": "ada", "follow_up": "one", "count": 1}]
    agent.advance_time(HOUR * 0.5)
    assert agent.short_term_memory("ada")["count"] == 1
    agent.advance_time(HOUR * 0.6)  # an hour after the follow-up's run
    assert agent.short_term_memory("ada") == {}


def test_a_key_with_a_run_waiting_for_a_signal_is_not_idle(tmp_path):
    agent = runner(tmp_path)
    agent.run("ada", note("one", ask=True))  # waits up to four hours for an Answer
    agent.advance_time(HOUR * 3)
    outputs = agent.run("ada", signal_input(Answer(text="yes")))
    assert outputs == [
        {"user": "ada", "text": "ONE", "count": 1},
        {"user": "ada", "answer": "yes", "last": "one"},
    ]
    agent.advance_time(HOUR * 1.01)
    assert agent.short_term_memory("ada") == {}


def test_a_restored_key_whose_check_was_lost_expires_when_it_is_next_seen(tmp_path):
    """As in PyFlink's process mode, which restores no timer: the key's next record finds
    its memory expired."""
    agent = runner(tmp_path)
    agent.run("ada", note("one"))
    snapshot = agent.snapshot()
    agent.restore(snapshot)
    agent._timers.clear()  # the check's timer lost with the restore
    agent.advance_time(HOUR * 2)
    assert agent.short_term_memory("ada")["count"] == 1  # no check ran
    assert agent.run("ada", note("two"))[0]["count"] == 1  # expired when seen


def test_turning_the_ttl_off_keeps_the_memory_of_keys_checked_before(tmp_path):
    """A job restored without the option, from state written with it: the pending checks
    fire, find the option off, and leave the memory (and the key's control value is
    written as before again)."""
    agent = runner(tmp_path)
    agent.run("ada", note("one"))
    snapshot = agent.snapshot()
    assert snapshot.states["ada"].stored_control.cleanup_ms is not None
    off = LocalRunner(Remembers, options=AgentOptions(data_dir=str(tmp_path)))
    off.restore(snapshot)
    off.advance_time(HOUR * 2)  # the restored check fires
    assert off.short_term_memory("ada")["count"] == 1
    control = off._states["ada"].stored_control
    assert (control.active_ms, control.cleanup_ms) == (None, None)
    assert off.run("ada", note("two"))[0]["count"] == 2
    # A key that ran with the option and had no check pending drops its fields when seen.
    busy = runner(tmp_path)
    busy.run("bob", note("one", follow_up=True))  # not idle: no check
    snapshot = busy.snapshot()
    assert snapshot.states["bob"].stored_control.active_ms is not None
    off.restore(snapshot)
    off.run("bob", note("two"))
    assert off._states["bob"].stored_control.active_ms is None


def test_without_a_ttl_memory_stays(tmp_path):
    agent = LocalRunner(Remembers, options=AgentOptions(data_dir=str(tmp_path)))
    agent.run("ada", note("one"))
    agent.advance_time(timedelta(days=365))
    assert agent.run("ada", note("two"))[0]["count"] == 2
    # (only the polls of its durable calls: no expiry check)
    assert not [t for t in agent._timers if t[0] > agent.now_ms() + 60_000]


def test_the_ttl_is_a_positive_duration_in_code_and_in_config_files(tmp_path):
    assert AgentOptions(short_term_memory_ttl=HOUR).short_term_memory_ttl_ms() == 3_600_000
    config = tmp_path / "config.yaml"
    config.write_text("agent:\n  short-term-memory-ttl: P30D\n")
    options = load_options(conf_dir=str(tmp_path))
    assert options.short_term_memory_ttl == timedelta(days=30)
    config.write_text("agent:\n  short-term-memory-ttl: 90\n")
    assert load_options(conf_dir=str(tmp_path)).short_term_memory_ttl_ms() == 90_000
    with pytest.raises(ValidationError, match="positive duration"):
        AgentOptions(short_term_memory_ttl=-HOUR)
    config.write_text("agent:\n  short-term-memory-ttl: -5\n")
    with pytest.raises(FlinkAgentsError, match="short-term-memory-ttl"):
        load_options(conf_dir=str(tmp_path))
