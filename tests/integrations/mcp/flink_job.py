"""A ReAct agent using the calendar server over stdio, run as a Flink job in MiniCluster
(thread mode, the default): ``python -m tests.integrations.mcp.flink_job``.

Run in a child process so that its JVM inherits the scripted model's address and the
ledger's path from the environment, as a job's TaskManagers would. Prints the outputs and
the error records, sorted, as one JSON object.
"""

from __future__ import annotations

import json

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.agents import ReActAgent
from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.integrations.mcp import MCPServer
from tests.integrations.mcp.agents import STDIO


def main() -> None:
    calendar = MCPServer(**STDIO, name="calendar")
    agent = ReActAgent(
        chat_model=OpenAIChatModel("scripted", api_key_env="TEST_LLM_KEY", max_retries=1),
        tools=[calendar],
        prompt=calendar.prompt("plan_day"),
    )
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    agents = AgentsExecutionEnvironment.get_execution_environment(env, error_policy="error-output")
    records = [
        {"user": "ana", "day": "Friday", "request": "Book the standup."},
        {"user": "bo", "day": "Monday", "request": "Book the review."},
    ]
    builder = agents.from_list(records, "user").apply(agent)
    outputs = builder.to_datastream().map(
        lambda value: json.dumps(["out", value]), output_type=Types.STRING()
    )
    errors = builder.error_stream().map(
        lambda value: json.dumps(["err", value]), output_type=Types.STRING()
    )
    with outputs.union(errors).execute_and_collect() as results:
        collected = [json.loads(line) for line in results]
    found = {"outputs": [], "errors": []}
    for kind, value in collected:
        found["outputs" if kind == "out" else "errors"].append(value)
    print(json.dumps({kind: sorted(values, key=str) for kind, values in found.items()}))


if __name__ == "__main__":
    main()
