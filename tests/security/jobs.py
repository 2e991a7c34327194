"""Small Flink jobs run in a child process by the log tests: ``python -m tests.security.jobs
KIND``, with a fake secret in the environment.

- ``pyflink``: a plain PyFlink job (Python ``map`` in a process-mode worker), nothing of ours;
- ``process``: an agent through ``AgentsExecutionEnvironment``, as users run one, with
  ``python.execution-mode: process`` set by the job (Python in a Beam worker process, whose
  environment Beam logs);
- ``thread``: the same agent job with no mode set: our default, PyFlink's thread mode.

An agent job prints its outputs, which say whether the agent ran in thread mode.
"""

import json
import sys

from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment

AGENT_MODES = {"process": "process", "thread": None}
"""The ``python.execution-mode`` each agent job sets (None: left to our default)."""


def main(kind: str) -> None:
    configuration = Configuration()
    mode = AGENT_MODES.get(kind)
    if mode is not None:
        configuration.set_string("python.execution-mode", mode)
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(1)
    if kind == "pyflink":
        env.set_python_executable(sys.executable)
        outputs = list(env.from_collection([1, 2, 3]).map(lambda x: x * 2).execute_and_collect())
    elif kind in AGENT_MODES:
        from flink_agents.api import AgentsExecutionEnvironment
        from tests.runtime.flink.parity_agents import ModeProbeAgent

        agents = AgentsExecutionEnvironment.get_execution_environment(env)
        records = [{"user": "a", "n": 1}, {"user": "b", "n": 2}]
        outputs = agents.from_list(records, "user").apply(ModeProbeAgent).to_list()
    else:
        raise SystemExit(f"unknown job kind {kind!r}")
    print(json.dumps(outputs))


if __name__ == "__main__":
    main(sys.argv[1])
