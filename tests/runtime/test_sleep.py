"""``await ctx.sleep(delay)`` on the local runner: the run is set aside while the key's later
inputs run, and wakes once, on the simulated clock, after a restore too, with its sensory
memory and the short-term memory of its time; the end of input; retries; misuse. The parity
suite runs sleeping runs on MiniCluster in both execution modes
(``parity_scenarios.scheduling_records``)."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest

from flink_agents.runtime import LocalRunner
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal
from tests.runtime.scheduling_agents import CALLS
from tests.runtime.sleeping_agents import DelegatesSleep, MisusesSleep, Naps, SleepsInALoop

HOUR = timedelta(hours=1)
SECOND = timedelta(seconds=1)


@pytest.fixture(autouse=True)
def _fresh_calls():
    CALLS.clear()
    yield
    CALLS.clear()


def test_later_inputs_run_while_a_run_sleeps_and_it_wakes_with_the_memory_of_its_time():
    runner = LocalRunner(Naps)
    assert runner.run("k", {"n": 1, "nap": 2}) == []  # set aside: the key is free
    assert runner.run("k", {"n": 2}) == [{"n": 2, "count": 2}]
    assert runner.run("k", {"n": 3}) == [{"n": 3, "count": 3}]
    assert runner.advance_time(HOUR) == []
    # It sees the short-term memory of its time, and its own run's sensory memory.
    assert runner.advance_time(HOUR + SECOND) == [{"woke": 1, "count": 3, "record": 1}]
    assert runner.advance_time(10 * HOUR) == []
    assert CALLS["woke 1"] == 1
    assert runner.runs("k") == 3
    assert runner.sensory_memory("k") == {}
    metrics = runner.metrics.snapshot()
    assert (metrics["numOfSleeps"], metrics["numOfRunsWoken"]) == (1, 1)
    assert metrics["numOfInputRunsSucceeded"] == 3


def test_keys_sleep_apart_and_wake_in_order():
    runner = LocalRunner(Naps)
    runner.run("a", {"n": 1, "nap": 3})
    runner.run("b", {"n": 2, "nap": 1})
    runner.run("a", {"n": 3, "nap": 2})
    assert runner.advance_time(4 * HOUR) == [
        {"woke": 2, "count": 1, "record": 2},
        {"woke": 3, "count": 2, "record": 3},
        {"woke": 1, "count": 2, "record": 1},
    ]


@pytest.mark.parametrize("logged", [True, False])
def test_a_call_before_the_sleep_is_made_again_only_without_the_action_log(logged):
    journal = ActionJournal(InMemoryActionLog(), "job") if logged else None
    runner = LocalRunner(Naps, journal=journal)
    runner.run("k", {"n": 1, "nap": 1})
    assert CALLS["nap 1"] == 1
    assert runner.advance_time(2 * HOUR) == [{"woke": 1, "count": 1, "record": 1}]
    # The action runs again from its start when it wakes: the log answers its call.
    assert CALLS["nap 1"] == (1 if logged else 2)


def test_a_sleeping_run_survives_a_restore_and_wakes_once():
    first = LocalRunner(Naps)
    first.run("k", {"n": 1, "nap": 5})
    first.run("k", {"n": 2})
    checkpoint = first.snapshot()
    second = LocalRunner(Naps)
    second.restore(checkpoint)
    assert second.advance_time(4 * HOUR) == []
    assert second.advance_time(2 * HOUR) == [{"woke": 1, "count": 2, "record": 1}]
    assert second.advance_time(10 * HOUR) == []
    assert second.finish() == []
    assert CALLS["woke 1"] == 1


def test_a_run_that_wakes_while_its_key_is_busy_resumes_after_the_run_in_progress():
    # Record 2 fails once and waits an hour and a half for its retry: the nap's wake (in an
    # hour) queues behind it, and the inputs queued before it came due run first.
    options = AgentOptions(
        error_policy="retry", retry_initial_backoff_ms=90 * 60 * 1000, retry_max_backoff_ms=10**8
    )
    runner = LocalRunner(Naps, options=options)
    runner.run("k", {"n": 1, "nap": 1})
    runner.feed("k", {"n": 2, "fail": 1})
    runner.feed("k", {"n": 3})
    assert runner.advance_time(3 * HOUR) == [
        {"n": 2, "count": 2},
        {"n": 3, "count": 3},
        {"woke": 1, "count": 3, "record": 1},
    ]


def test_an_action_that_fails_after_waking_is_retried_without_sleeping_again():
    options = AgentOptions(error_policy="retry", retry_initial_backoff_ms=10)
    runner = LocalRunner(Naps, options=options)
    runner.run("k", {"n": 1, "nap": 2, "fail_on_waking": True})
    assert runner.advance_time(2 * HOUR + SECOND) == [{"woke": 1, "count": 1, "record": 1}]
    assert CALLS["woke 1"] == 2
    assert runner.metrics.snapshot()["numOfSleeps"] == 1


def test_the_end_of_input_wakes_sleeping_runs_up_to_the_last_wake_time(caplog):
    runner = LocalRunner(Naps)
    runner.run("k", {"n": 1, "nap": 24 * 30})
    runner.run("k", {"n": 2, "nap": 1})
    assert runner.finish() == [
        {"woke": 2, "count": 2, "record": 2},
        {"woke": 1, "count": 2, "record": 1},
    ]
    # A loop of sleeps ends with the input: its second sleep ends after the last wake time
    # pending when the input ended.
    loop = LocalRunner(SleepsInALoop)
    loop.run("k", 1)
    loop.run("j", 3)
    with caplog.at_level(logging.INFO, logger="flink_agents.runtime._driver"):
        assert loop.finish() == ["1 naps"]
    assert "1 waiting run(s) are due after the end of the input" in caplog.text


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("negative", "FlinkAgentsError: sleep's delay must not be negative"),
        ("not-a-timedelta", "TypeError: sleep takes a timedelta, got int"),
        ("fan-out", "nor one of a fan-out group"),
    ],
)
def test_misuse_fails_clearly(how, says):
    [error] = LocalRunner(MisusesSleep).run("k", how)
    assert says in error


def test_a_sub_agents_action_cannot_sleep():
    [error] = LocalRunner(DelegatesSleep).run("k", "topic")
    assert "not an action of a sub-agent" in error


def test_the_log_keeps_the_calls_of_a_sleeping_run_however_long_it_sleeps():
    journal = ActionJournal(InMemoryActionLog(), "job", retention_ms=60_000)
    runner = LocalRunner(Naps, journal=journal)
    journal.clock = runner.now_ms  # the log's time is the runner's simulated time
    runner.run("k", {"n": 1, "nap": 5})
    # Records ask for the log to be pruned (every 64), past its retention: the call made
    # before the sleep would go (it does if the driver does not say the run sleeps).
    for n in range(2, 140):
        runner.advance_time(2 * timedelta(minutes=1))
        runner.run("other", {"n": n})
    assert runner.advance_time(2 * HOUR) == [{"woke": 1, "count": 1, "record": 1}]
    assert CALLS["nap 1"] == 1


def test_the_event_log_shows_the_sleep_and_the_action_that_ran_again(tmp_path):
    options = AgentOptions(event_log_level="standard", event_log_dir=str(tmp_path))
    runner = LocalRunner(Naps, options=options)
    runner.run("k", {"n": 1, "nap": 1})
    wake_ms = runner.now_ms() + HOUR // timedelta(milliseconds=1)
    runner.advance_time(2 * HOUR)
    runner.engine.event_log.close()
    lines = [json.loads(line) for f in sorted(tmp_path.rglob("*.jsonl*")) for line in f.open()]
    naps = [(r["outcome"], r.get("until_ms")) for r in lines if r.get("action") == "nap"]
    assert naps[0][0] == "sleeping"
    assert 0 <= wake_ms - naps[0][1] < 1000  # an hour from when it slept
    assert naps[1:] == [("succeeded", None)]
