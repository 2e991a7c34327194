"""A small PyFlink job that reports agent metrics through ``FlinkMetricsMirror``, for the
reporter test (run as ``python -m tests.runtime.flink.metrics_job``, in a child process).

Its ``KeyedProcessFunction`` is not the agent dispatcher: it drives an ``AgentMetrics`` by
hand with known numbers, so the test knows every value to expect. After the last counted
record it flushes, and the final record (a sentinel) holds the job open until the test
writes the release file, so the reporter is scraped while the job runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from pyflink.common import Configuration, Types
from pyflink.datastream import KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment

from flink_agents.runtime._metrics import AgentMetrics
from flink_agents.runtime.flink._environment import configure_python_workers
from flink_agents.runtime.flink._metrics import FlinkMetricsMirror

VALUES = [1, 2, 3, 4]
"""One record per value; the sentinel (-1) follows them."""
SENTINEL = -1
PARKED_RUNS = 7
PROMETHEUS_FACTORY = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"


class MeteredFunction(KeyedProcessFunction):
    """Counts each record as one run with one event and one ``echo`` action, one durable
    call of ``lookup`` taking ``10 * value`` ms, and a chat request of ``value`` prompt
    tokens and 2 completion tokens; plus a custom counter and gauge."""

    def __init__(self, release_file: str) -> None:
        self._release_file = release_file

    def open(self, runtime_context: RuntimeContext) -> None:
        self.metrics = AgentMetrics()
        self.metrics.watch(lambda: PARKED_RUNS, lambda: 0)
        # Flushed on every record here, so that each value reaches Flink before the
        # sentinel holds the job (in process mode, a bundle's metrics reach Flink when the
        # bundle ends).
        self.mirror = FlinkMetricsMirror(
            self.metrics, runtime_context.get_metrics_group(), interval_ms=0
        )

    def process_element(self, value: int, ctx: Any) -> Any:
        if value == SENTINEL:
            self._hold()
            return
        metrics = self.metrics
        metrics.run_started()
        metrics.event_processed()
        metrics.action_executed("echo")
        metrics.durable_call("lookup", 10.0 * value)
        metrics.chat_request("scripted", prompt_tokens=value, completion_tokens=2)
        metrics.run_succeeded()
        metrics.action_group("echo").get_counter("customSeen").inc(value)
        metrics.agent_group.get_sub_group("custom").get_gauge("lastValue").update(value)
        self.mirror.maybe_flush()
        yield value

    def close(self) -> None:
        self.mirror.flush()

    def _hold(self) -> None:
        deadline = time.monotonic() + 120
        while not os.path.exists(self._release_file) and time.monotonic() < deadline:
            time.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", required=True)
    parser.add_argument("--release-file", required=True)
    parser.add_argument("--mode", choices=("thread", "process"), default="thread")
    args = parser.parse_args(argv)

    configuration = Configuration()
    configuration.set_string("python.execution-mode", args.mode)
    configuration.set_string("metrics.reporter.prom.factory.class", PROMETHEUS_FACTORY)
    configuration.set_string("metrics.reporter.prom.port", args.port)
    if args.mode == "process":
        # One record per bundle: a bundle's metrics reach Flink when it ends, and the
        # sentinel's bundle does not end until the test releases it.
        configuration.set_string("python.fn-execution.bundle.size", "1")
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_python_executable(sys.executable)
    configure_python_workers(env)
    env.set_parallelism(1)
    records = env.from_collection([*VALUES, SENTINEL], type_info=Types.INT())
    (
        records.key_by(lambda v: 0, key_type=Types.INT())
        .process(MeteredFunction(args.release_file), output_type=Types.INT())
        .name("metered")
        .print()
    )
    env.execute("metrics-reporter-test")


if __name__ == "__main__":
    main()
