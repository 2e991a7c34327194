"""Actions that go wrong: raising under each error policy, awaiting something other than a
durable call, runaway event loops, sending what is not an event. Each ends its run with an
error naming the key, the action and the cause, and the records around it are unaffected.

Local runner here; MiniCluster through the shared ``catalogue_job`` (conftest.py). The Flink
``fail`` policy (the job fails naming key, action and input) is covered by
``tests/runtime/flink/test_dispatcher.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents.api import ActionExecutionError, AgentsExecutionEnvironment
from tests.bad_input import cases
from tests.bad_input.agents import CatalogueAgent
from tests.bad_input.conftest import RETRY_RECORDS

ERROR_FIELDS = {"kind", "key", "input", "run_sequence", "action", "error", "attempts"}


def local_builder(records: list[dict[str, Any]], **options: Any):
    env = AgentsExecutionEnvironment.get_execution_environment(
        max_steps_per_run=cases.MAX_STEPS, **options
    )
    return env.from_list(records, "user").apply(CatalogueAgent)


# -- local runner ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(cases.ACTIONS))
def test_fail_policy_raises_naming_key_action_and_cause(name):
    case = cases.ACTIONS[name]
    record = {"user": "u", "n": 7, **case.fields}
    with pytest.raises(ActionExecutionError) as caught:
        local_builder([record], error_policy="fail").to_list()
    error = caught.value
    assert (error.key, error.action, error.input, error.run_sequence) == (
        "u",
        case.action,
        record,
        1,
    )
    assert f"{type(error.cause).__name__}: {error.cause}" == case.error.format(n=7)
    assert str(error).startswith(f"action '{case.action}' failed for key 'u' (run 1, input {{")


def test_error_output_policy_keeps_every_other_run_and_reports_the_failed_ones():
    records = cases.interleaved(cases.ACTIONS)
    builder = local_builder(records, error_policy="error-output")
    outputs = builder.to_list()
    assert {o["n"]: o["seen"] for o in outputs} == cases.expected_seen(records, cases.ACTIONS)
    failed = [r for r in records if r.get("label")]
    assert builder.error_stream() == [
        {
            "kind": "failed_run",
            "key": "u",
            "input": record,
            "run_sequence": record["n"] + 1,
            "action": cases.ACTIONS[record["label"]].action,
            "error": cases.ACTIONS[record["label"]].error.format(n=record["n"]),
            "attempts": 1,
        }
        for record in failed
    ]


def test_retry_policy_retries_then_gives_up_into_the_error_output(tmp_path):
    records = [{**r, "counter_dir": str(tmp_path)} for r in RETRY_RECORDS]
    builder = local_builder(
        records, error_policy="retry", retry_max_attempts=3, retry_initial_backoff_ms=50
    )
    outputs = builder.to_list()
    assert [(o["n"], o.get("attempts"), o["seen"]) for o in outputs] == [
        (3000, 3, [3000]),
        (3001, None, [3000, 3001]),
        (3003, None, [3000, 3001, 3003]),
    ]
    [error] = builder.error_stream()
    assert error == {
        "kind": "failed_run",
        "key": "r",
        "input": records[2],
        "run_sequence": 3,
        "action": "handle",
        "error": "ConnectionError: attempt 3 of record 3002 failed",
        "attempts": 3,
    }
    assert (tmp_path / "3002").read_text() == "3"  # no fourth attempt
    # The backoff runs on the local runner's simulated clock (no wall time to measure).


# -- MiniCluster ---------------------------------------------------------------------------


@pytest.mark.flink
@pytest.mark.parametrize("name", list(cases.ACTIONS))
def test_minicluster_error_output_names_the_action_and_the_cause(catalogue_job, name):
    case = cases.ACTIONS[name]
    [record] = [r for r in catalogue_job.records if r.get("label") == name]
    error = catalogue_job.error(record["n"])
    assert (error["key"], error["input"], error["action"]) == ("u", record, case.action)
    assert error["error"] == case.error.format(n=record["n"])
    assert (error["run_sequence"], error["attempts"]) == (record["n"] + 1, 1)


@pytest.mark.flink
def test_minicluster_runs_around_the_failed_ones_keep_their_outputs_and_memory(catalogue_job):
    records = [r for r in catalogue_job.records if r["user"] == "u"]
    outputs = [o for o in catalogue_job.outputs["error-output"] if o["user"] == "u"]
    assert {o["n"]: o["seen"] for o in outputs} == cases.expected_seen(records, cases.ACTIONS)


@pytest.mark.flink
def test_minicluster_error_records_have_the_same_fields_as_the_local_runner(catalogue_job):
    errors = catalogue_job.errors["error-output"]
    assert {frozenset(e) for e in errors} == {frozenset(ERROR_FIELDS)}
    assert {e["kind"] for e in errors} == {"failed_run"}


@pytest.mark.flink
def test_minicluster_retry_policy_retries_then_gives_up_into_the_error_output(catalogue_job):
    outputs = sorted(catalogue_job.outputs["retry"], key=lambda o: o["n"])
    assert [(o["n"], o.get("attempts"), o["seen"]) for o in outputs] == [
        (3000, 3, [3000]),
        (3001, None, [3000, 3001]),
        (3003, None, [3000, 3001, 3003]),
    ]
    [error] = catalogue_job.errors["retry"]
    assert (error["input"]["n"], error["action"], error["attempts"]) == (3002, "handle", 3)
    assert error["error"] == "ConnectionError: attempt 3 of record 3002 failed"
