"""The agent dispatcher's built-in and custom metrics on MiniCluster (in both execution
modes), scraped from Flink's Prometheus reporter while the job runs: the same values as
the local runner counts for the same runs (tests/runtime/test_observability.py)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time

import pytest

from tests.runtime.flink.test_metrics_reporter import (
    REPO,
    child_environment,
    free_port,
    ours,
    scrape,
)

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
    port = free_port()
    release = tmp_path / "release"
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.runtime.flink.agent_metrics_job",
            "--port",
            str(port),
            "--release-file",
            str(release),
            "--mode",
            mode,
        ],
        cwd=REPO,
        env=child_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and job.poll() is None:
            with contextlib.suppress(OSError):
                found = ours(scrape(port), "agent:HeldAgent")
            if all(found.get(name) == value for name, value in EXPECTED.items()):
                break
            time.sleep(0.5)
    finally:
        release.touch()
        try:
            output, _ = job.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            job.kill()
            output, _ = job.communicate()
    assert job.returncode == 0, output[-4000:]
    assert {name: found.get(name) for name in EXPECTED} == EXPECTED, sorted(found)
    assert found["numOfParkedRuns"] == 0
    [calls] = [v for k, v in found.items() if k.startswith("function.") and k.endswith("Calls")]
    assert calls == 4  # per function: the agent's one durable function
