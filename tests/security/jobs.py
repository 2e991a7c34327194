"""Small Flink jobs run in a child process by the log tests: ``python -m tests.security.jobs
KIND``, with a fake secret in the environment.

- ``pyflink``: a plain PyFlink job (Python ``map`` in a process-mode worker), nothing of ours;
- ``agents``: an agent through ``AgentsExecutionEnvironment``, as users run one;
- ``thread``: the agent job in PyFlink's thread mode.
"""

import json
import sys

from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment


def main(kind: str) -> None:
    configuration = Configuration()
    if kind == "thread":
        configuration.set_string("python.execution-mode", "thread")
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(1)
    if kind == "pyflink":
        env.set_python_executable(sys.executable)
        outputs = list(env.from_collection([1, 2, 3]).map(lambda x: x * 2).execute_and_collect())
    else:
        from flink_agents.api import AgentsExecutionEnvironment
        from tests.runtime.agents import EchoAgent

        agents = AgentsExecutionEnvironment.get_execution_environment(env)
        records = [{"user": "a", "n": 1}, {"user": "b", "n": 2}]
        outputs = agents.from_list(records, "user").apply(EchoAgent).to_list()
    print(json.dumps(outputs))


if __name__ == "__main__":
    main(sys.argv[1])
