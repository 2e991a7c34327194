"""Running an agent on the local runner or on MiniCluster, the same way, for parity tests."""

from typing import Any

from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import AgentsExecutionEnvironment


def flink_environment(parallelism: int = 2) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    return env


def run_agent(runner: str, agent: Any, records: list, key: str, **options: Any) -> list:
    """The outputs of ``agent`` over ``records`` keyed by field ``key``."""
    if runner == "local":
        environment = AgentsExecutionEnvironment.get_execution_environment()
    else:
        environment = AgentsExecutionEnvironment.get_execution_environment(
            flink_environment(), **options
        )
    return environment.from_list(records, key).apply(agent).to_list()
