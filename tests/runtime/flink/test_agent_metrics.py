"""The agent dispatcher's built-in and custom metrics on MiniCluster (in both execution
modes), scraped from Flink's Prometheus reporter while the job runs: the same values as
the local runner counts for the same runs (tests/runtime/test_observability.py)."""

from __future__ import annotations

import pytest

from tests.runtime.flink.test_metrics_reporter import scrape_while_running

pytestmark = [pytest.mark.flink, pytest.mark.slow]

# hello, fail now (to the error output), hi again, then the pause record: four runs, each
# running greet (one durable call), reply (fails for "fail now") and hold.
EXPECTED = {
    "numOfInputRunsStarted": 4,
    "numOfInputRunsSucceeded": 3,
    "numOfInputRunsFailed": 1,
    "numOfInputRunsToErrorOutput": 1,
    "numOfActionsExecuted": 4 + 3 + 4,
    "action.greet.numOfActionsExecuted": 4,
    "action.reply.numOfActionsExecuted": 3,
    "action.hold.numOfActionsExecuted": 4,
    "numOfDurableCalls": 4,
    "greetings": 4,
    "action.reply.replies": 4,  # a custom counter: the failed attempt counted too
}


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_prometheus_serves_the_dispatchers_metrics(mode, tmp_path):
    found = scrape_while_running(
        "tests.runtime.flink.agent_metrics_job", mode, tmp_path, "agent:HeldAgent", EXPECTED
    )
    assert {name: found.get(name) for name in EXPECTED} == EXPECTED, sorted(found)
    assert found["numOfParkedRuns"] == 0
    [calls] = [v for k, v in found.items() if k.startswith("function.") and k.endswith("Calls")]
    assert calls == 4  # per function: the agent's one durable function
