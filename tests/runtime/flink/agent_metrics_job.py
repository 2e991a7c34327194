"""An agent job whose metrics the tests read from a Flink metric reporter while it runs
(``python -m tests.runtime.flink.agent_metrics_job``, in a child process): the Prometheus
reporter on ``--port``, or any reporter configured with ``--option KEY=VALUE`` (the
OpenTelemetry reporter's test).

Records: ``RUNS`` ordinary ones over two keys, one that pauses (so the dispatcher's metrics
flush interval passes), then a sentinel whose action holds the job until the test writes the
release file: every earlier run's metrics have reached Flink by then.
"""

from __future__ import annotations

import argparse
import os
import sys

from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.runtime.flink._environment import configure_python_workers
from tests.runtime.observed_agents import RELEASE_FILE, HeldAgent

PROMETHEUS_FACTORY = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
RUNS = [
    {"k": "a", "n": 1, "text": "hello"},
    {"k": "b", "n": 2, "text": "fail now"},
    {"k": "a", "n": 3, "text": "hi again"},
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", help="the Prometheus reporter's port (none: no such reporter)")
    parser.add_argument(
        "--option", action="append", default=[], help="more Flink configuration: KEY=VALUE"
    )
    parser.add_argument("--release-file", required=True)
    parser.add_argument("--mode", choices=("thread", "process"), default="thread")
    args = parser.parse_args(argv)
    os.environ[RELEASE_FILE] = args.release_file
    configuration = Configuration()
    if args.port is not None:
        configuration.set_string("metrics.reporter.prom.factory.class", PROMETHEUS_FACTORY)
        configuration.set_string("metrics.reporter.prom.port", args.port)
    for option in args.option:
        key, _, value = option.partition("=")
        configuration.set_string(key, value)
    configuration.set_string("python.execution-mode", args.mode)
    if args.mode == "process":
        # A bundle's metrics reach Flink when it ends; the sentinel's never does until the
        # test releases it, so each record is a bundle of its own.
        configuration.set_string("python.fn-execution.bundle.size", "1")
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_python_executable(sys.executable)
    configure_python_workers(env)
    env.set_parallelism(1)
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, error_policy="error-output", action_log="none"
    )
    records = [
        *RUNS,
        {"k": "a", "n": 8, "text": "pause", "pause": True},
        {"k": "a", "n": 9, "text": "sentinel", "sentinel": True},
    ]
    outputs = agents.from_list(records, "k").apply(HeldAgent).to_datastream()
    outputs.print()
    env.execute("agent-metrics-test")


if __name__ == "__main__":
    main()
