"""The runtime logs at INFO, one line each, when it replays an action after a restore,
retries an action, prunes the action log or compacts long-term memory; nothing at INFO for
a record that needs none of these."""

from __future__ import annotations

import logging

import pytest

from flink_agents.runtime import AgentOptions, LocalRunner, local_journal
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal
from tests.runtime.fan_out_agents import CALLS, Members


@pytest.fixture(autouse=True)
def _clear_calls():
    CALLS.clear()


def info_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.INFO
            and r.name.startswith("flink_agents")]


def gather(n: int = 1, fail: str | None = None) -> dict:
    return {"n": n, "delays": [0, 0, 0], "fail": fail}


def test_records_that_need_nothing_special_log_nothing_at_info(caplog):
    caplog.set_level(logging.INFO)
    options = AgentOptions()
    runner = LocalRunner(Members, options=options, journal=local_journal(options))
    for n in range(20):
        runner.run(f"k{n % 3}", gather(n))
    assert info_lines(caplog) == []


def test_a_retry_is_one_line_naming_the_action_key_run_and_error(caplog):
    caplog.set_level(logging.INFO)
    options = AgentOptions(error_policy="retry", retry_initial_backoff_ms=1)
    runner = LocalRunner(Members, options=options, journal=local_journal(options))
    runner.run("k", gather(fail="!second"))
    [line] = info_lines(caplog)
    assert line.startswith("retrying action 'second' of key 'k' (run 1) in 1 ms, attempt 2 of 3")
    assert "RuntimeError: second failed once on record 1" in line


def test_a_restore_logs_the_index_once_and_each_replayed_action(caplog):
    log = InMemoryActionLog()
    first_attempt = ActionJournal(log, "job")
    first = LocalRunner(Members, journal=first_attempt)
    checkpoint = first.snapshot()
    first.run("k", gather())
    first_attempt.flush()

    caplog.set_level(logging.INFO)
    second = LocalRunner(Members, journal=ActionJournal(log, "job"))
    second.restore(checkpoint)
    second.run("k", gather())
    lines = info_lines(caplog)
    assert "holds runs of 1 keys of job job from an earlier attempt" in lines[0]
    assert [line.split(" of key")[0] for line in lines[1:]] == [
        "replaying action 'first'",
        "replaying action 'second'",
        "replaying action 'third'",
    ]


def test_a_prune_that_removes_records_is_one_line(caplog):
    now = [0]
    log = InMemoryActionLog()
    journal = ActionJournal(log, "job", retention_ms=1000, clock=lambda: now[0])
    runner = LocalRunner(Members, journal=journal)
    runner.run("k", gather())
    journal.flush()
    caplog.set_level(logging.INFO)
    now[0] = 5000
    assert journal.maybe_prune() > 0
    [line] = info_lines(caplog)
    assert line.startswith("pruned ") and "of job job older than the retention of 1000 ms" in line
