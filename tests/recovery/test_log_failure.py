"""When the action log itself fails, the job fails naming the log, in every runner, whatever
the error policy: no run is reported as failed and no retry is spent on it (the action is not
to blame; Flink restarts the job from its checkpoint)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import to_plan
from flink_agents.runtime.action_log import ActionLogError
from tests.recovery.log_failure_agents import LoggedAgent

RECORDS = [{"user": f"u{n % 3}", "n": n} for n in range(12)]


def plan_for(log_file: Path) -> Any:
    config = {"log_file": str(log_file), "delete_at": 5}
    return to_plan(LoggedAgent).model_copy(update={"config": config})


@pytest.mark.parametrize("policy", ["error-output", "retry"])
def test_local_runner_fails_naming_the_log(tmp_path: Path, policy: str) -> None:
    log_file = tmp_path / "log.db"
    agents = AgentsExecutionEnvironment.get_execution_environment(
        action_log=f"sqlite://{log_file}", error_policy=policy, retry_initial_backoff_ms=1
    )
    builder = agents.from_list(RECORDS, "user").apply(plan_for(log_file))
    with pytest.raises(ActionLogError, match=rf"action log sqlite://{log_file}: .*deleted"):
        builder.to_list()
    assert builder.runner.errors == []  # no run was charged with the log's failure


@pytest.mark.flink
def test_minicluster_job_fails_naming_the_log(tmp_path: Path) -> None:
    from pyflink.common import Configuration, Types
    from pyflink.datastream import StreamExecutionEnvironment

    config = Configuration()
    config.set_string("restart-strategy.type", "none")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    log_file = tmp_path / "log.db"
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, action_log=f"sqlite://{log_file}", error_policy="error-output"
    )
    builder = agents.from_list(RECORDS, "user").apply(plan_for(log_file))
    pickled = Types.PICKLED_BYTE_ARRAY()
    outputs = builder.to_datastream().map(lambda o: ("out", o), output_type=pickled)
    errors = builder.error_stream().map(lambda e: ("err", e), output_type=pickled)
    seen: list[Any] = []  # Py4J wraps the job's failure: any Exception
    with (
        pytest.raises(Exception) as failure,
        outputs.union(errors).execute_and_collect() as results,
    ):
        seen.extend(results)
    message = str(failure.value)
    assert f"action log sqlite://{log_file}" in message and "deleted" in message
    assert [tag for tag, _ in seen if tag == "err"] == []  # no run reported as failed
