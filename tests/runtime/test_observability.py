"""Metrics and the event log on the local runner: every built-in metric's value on a known
job, custom metrics from actions, and the event log's content, levels and redaction.
(tests/runtime/flink/test_agent_metrics.py checks the same metrics on MiniCluster.)"""

from __future__ import annotations

import json

import pytest

from flink_agents.api import AgentsExecutionEnvironment, FlinkAgentsError
from flink_agents.runtime import AgentOptions, LocalRunner, local_journal
from flink_agents.runtime._context import ActionContext, ActionServices
from tests.runtime.held_agents import HeldAgent, release_all, release_event, reset_release
from tests.runtime.observed_agents import ATTEMPTS, NamedCalls, ObservedAgent

SECRET = "sk-observed-secret-4242"


@pytest.fixture(autouse=True)
def _fresh():
    ATTEMPTS.clear()


def records() -> list[dict]:
    return [
        {"k": "a", "n": 1, "text": "hello"},
        {"k": "b", "n": 2, "text": "fail now"},
        {"k": "a", "n": 3, "text": "flaky one"},
        {"n": 4, "text": "no key"},  # rejected: its key cannot be taken
    ]


def run(tmp_path, **options):
    env = AgentsExecutionEnvironment.get_execution_environment(
        error_policy="retry",
        retry_max_attempts=2,
        retry_initial_backoff_ms=1,
        data_dir=str(tmp_path),
        **options,
    )
    builder = env.from_list(records(), "k").apply(ObservedAgent)
    outputs = builder.to_list()
    return builder, outputs


def test_every_built_in_metric_counts_a_known_job(tmp_path):
    builder, outputs = run(tmp_path)
    assert sorted(outputs) == ["FLAKY ONE", "HELLO"]
    m = builder.metrics()
    assert m["numOfInputsRejected"] == 1
    assert m["numOfInputRunsStarted"] == 3
    assert m["numOfInputRunsSucceeded"] == 2
    assert m["numOfInputRunsFailed"] == 1  # "fail now", after its retry
    assert m["numOfInputRunsToErrorOutput"] == 1
    assert m["numOfActionRetries"] == 2  # "fail now" once, "flaky one" once
    # greet x3; reply: hello, flaky (second attempt); the failed attempts do not count
    assert m["numOfActionsExecuted"] == 5
    assert m["action.greet.numOfActionsExecuted"] == 3
    assert m["action.reply.numOfActionsExecuted"] == 2
    # inputs 3, Shouted 3, outputs 2
    assert m["numOfEventProcessed"] == 8
    function = "function.tests.runtime.observed_agents:shout"
    assert m["numOfDurableCalls"] == m[f"{function}.numOfDurableCalls"] == 3
    assert m[f"{function}.durableCallLatencyMs.count"] == 3
    assert m["numOfActionLogWrites"] == 3  # the greet actions, which made a durable call
    assert m["numOfParkedRuns"] == 0 and m["numOfInFlightCalls"] == 0


def test_actions_count_in_custom_metrics(tmp_path):
    builder, _ = run(tmp_path)
    m = builder.metrics()
    assert m["greetings"] == 3
    # Every attempt of reply counts, failed ones too: hello 1, fail now 2, flaky one 2.
    assert m["action.reply.replies"] == 5
    assert m["action.reply.length.count"] == 5
    assert m["action.reply.length.max"] == len("FLAKY ONE")


def test_long_term_memory_operations_are_counted(tmp_path):
    options = AgentOptions(data_dir=str(tmp_path))
    runner = LocalRunner(ObservedAgent, options=options, journal=local_journal(options))
    for n in range(3):
        runner.run("k", {"n": n, "text": f"note {n}", "remember": True})
    runner.engine.close()
    m = runner.metrics.snapshot()
    assert m["numOfLongTermMemoryAdds"] == 3
    assert m["numOfLongTermMemorySearches"] == 3


def test_a_context_without_metrics_says_so():
    context = ActionContext("k", {}, {}, {}, ActionServices(None, lambda: None))
    with pytest.raises(FlinkAgentsError, match="reports no metrics"):
        context.agent_metric_group  # noqa: B018


def event_lines(tmp_path) -> list[dict]:
    files = sorted((tmp_path / "event-log" / "local").glob("events.jsonl*"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def test_the_event_log_records_every_run_event_and_action(tmp_path):
    run(tmp_path, event_log_level="standard")
    lines = event_lines(tmp_path)
    runs = [r for r in lines if r["kind"] == "run_finished"]
    assert sorted((r["key"], r["run"], r["outcome"]) for r in runs) == [
        ("a", 1, "succeeded"),
        ("a", 2, "succeeded"),
        ("b", 1, "error_output"),
    ]
    assert lines[-1]["kind"] == "metrics"  # written when the run closes
    assert lines[-1]["values"]["numOfInputRunsStarted"] == 3
    lines = lines[:-1]
    hello = [r for r in lines if r["key"] == "a" and r["run"] == 1]
    assert [r["kind"] for r in hello] == [
        "run_started",
        "action_finished",  # greet
        "event",  # Shouted
        "action_finished",  # reply
        "event",  # the output
        "run_finished",
    ]
    greet = hello[1]
    assert (greet["action"], greet["step"], greet["outcome"]) == ("greet", 1, "succeeded")
    assert greet["duration_ms"] >= 0 and greet["job"]
    assert hello[2]["event_type"] == "Shouted" and hello[2]["source"] == "greet"
    failed = [r for r in lines if r.get("outcome") == "failed"]
    assert sorted((r["key"], r["action"], r["error"]) for r in failed) == [
        ("a", "reply", "ConnectionError: first attempt fails"),
        ("b", "reply", "ValueError: cannot reply to that"),
        ("b", "reply", "ValueError: cannot reply to that"),
    ]


def test_standard_cuts_payloads_and_verbose_keeps_them(tmp_path):
    long_text = "x" * 5000
    for level, limit in (("standard", 100), ("verbose", 100)):
        directory = tmp_path / level
        env = AgentsExecutionEnvironment.get_execution_environment(
            data_dir=str(directory), event_log_level=level, event_log_max_payload_chars=limit
        )
        env.from_list([{"k": "a", "n": 1, "text": long_text}], "k").apply(ObservedAgent).to_list()
        started = next(r for r in event_lines(directory) if r["kind"] == "run_started")
        shown = json.dumps(started["input"])
        if level == "standard":
            assert len(shown) < 200
        else:
            assert long_text in shown


def test_secrets_never_reach_the_event_log(tmp_path, monkeypatch):
    monkeypatch.setenv("OBSERVED_API_KEY", SECRET)
    env = AgentsExecutionEnvironment.get_execution_environment(
        data_dir=str(tmp_path), event_log_level="verbose"
    )
    records = [{"k": "a", "n": 1, "text": f"my key is {SECRET}", "api_key": SECRET}]
    env.from_list(records, "k").apply(ObservedAgent).to_list()
    text = "".join(f.read_text() for f in (tmp_path / "event-log").rglob("*") if f.is_file())
    assert text and SECRET not in text and "***" in text


def test_the_event_log_is_off_by_default(tmp_path):
    run(tmp_path)
    assert not (tmp_path / "event-log").exists()


def test_the_gauges_follow_the_driver_of_a_restored_runner():
    reset_release()
    runner = LocalRunner(HeldAgent)
    runner.restore(runner.snapshot())  # a new driver over the same engine and metrics
    try:
        runner.feed("k", "held")  # parks on its call, in the new driver
        gauges = runner.metrics.snapshot()
        assert (gauges["numOfParkedRuns"], gauges["numOfInFlightCalls"]) == (1, 1)
        release_event("held").set()
        assert runner.finish() == ["HELD"]
        gauges = runner.metrics.snapshot()
        assert (gauges["numOfParkedRuns"], gauges["numOfInFlightCalls"]) == (0, 0)
    finally:
        release_all()
        runner.engine.close()


def test_a_durable_calls_arguments_may_have_any_names():
    for log in ("none", "memory://"):
        options = AgentOptions(action_log=log)
        runner = LocalRunner(NamedCalls, options=options, journal=local_journal(options))
        assert runner.run("k", 1) == [["f/n", "g/m"]]
        assert runner.metrics.snapshot()["numOfDurableCalls"] == 2
