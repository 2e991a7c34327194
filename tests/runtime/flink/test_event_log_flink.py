"""The event log on MiniCluster (thread mode, the default): as a side output the user sinks
anywhere, and as rolled files per subtask; the same records as on the local runner."""

from __future__ import annotations

import json

import pytest

from flink_agents.api import AgentsExecutionEnvironment
from tests.runtime.flink.runners import flink_environment
from tests.runtime.observed_agents import ObservedAgent

pytestmark = pytest.mark.flink

RECORDS = [
    {"k": "a", "n": 1, "text": "hello"},
    {"k": "b", "n": 2, "text": "fail now"},
    {"k": "a", "n": 3, "text": "hi again"},
]


def summary(lines: list[dict]) -> list[tuple]:
    """The run records (a closing operator's ``metrics`` record belongs to no run)."""
    return sorted(
        (r["key"], r["run"], r["kind"], r.get("action") or r.get("event_type"), r.get("outcome"))
        for r in lines
        if r["kind"] != "metrics"
    )


def agents(**options):
    return AgentsExecutionEnvironment.get_execution_environment(
        flink_environment(parallelism=1),
        error_policy="error-output",
        action_log="none",
        event_log_level="standard",
        **options,
    )


def test_the_event_log_as_a_stream_and_as_files_says_what_the_local_runner_says(tmp_path):
    builder = agents(event_log_output="stream").from_list(RECORDS, "k").apply(ObservedAgent)
    builder.to_datastream()
    with builder.event_log_stream().execute_and_collect() as results:
        streamed = [json.loads(line) for line in results]

    files = tmp_path / "flink"
    agents(event_log_dir=str(files)).from_list(RECORDS, "k").apply(ObservedAgent).to_list()
    written = [
        json.loads(line)
        for path in sorted((files / "subtask-0").glob("events.jsonl*"))
        for line in path.read_text().splitlines()
    ]

    local_dir = tmp_path / "local"
    AgentsExecutionEnvironment.get_execution_environment(
        error_policy="error-output",
        action_log="none",
        event_log_level="standard",
        event_log_dir=str(local_dir),
    ).from_list(RECORDS, "k").apply(ObservedAgent).to_list()
    local = [
        json.loads(line)
        for path in sorted((local_dir / "local").glob("events.jsonl*"))
        for line in path.read_text().splitlines()
    ]

    assert summary(streamed) == summary(written) == summary(local)
    # Files end with the operator's final metrics (the stream has ended by then).
    [final] = [r["values"] for r in written if r["kind"] == "metrics"]
    assert final["numOfInputRunsStarted"] == 3 and final["numOfInputRunsToErrorOutput"] == 1
    assert ("b", 1, "run_finished", None, "error_output") in summary(streamed)


def test_each_subtask_writes_its_own_files_in_thread_mode(tmp_path):
    """Thread mode runs every subtask in one process; each must still know its index (PyFlink
    2.3's thread-mode context cannot tell it directly) and write only its own directory."""
    files = tmp_path / "flink"
    AgentsExecutionEnvironment.get_execution_environment(
        flink_environment(parallelism=2),
        error_policy="error-output",
        action_log="none",
        event_log_level="standard",
        event_log_dir=str(files),
    ).from_list(RECORDS, "k").apply(ObservedAgent).to_list()
    assert sorted(path.name for path in files.iterdir()) == ["subtask-0", "subtask-1"]
    finals = [
        json.loads(line)["values"]["numOfInputRunsStarted"]
        for path in files.glob("subtask-*/events.jsonl*")
        for line in path.read_text().splitlines()
        if json.loads(line)["kind"] == "metrics"
    ]
    assert len(finals) == 2 and sum(finals) == 3  # one final record per subtask
