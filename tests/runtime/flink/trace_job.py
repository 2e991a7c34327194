"""The tracing test's job, in a child process: ``python -m tests.runtime.flink.trace_job
<spec.json>``.

``trip_planner`` (``tests/tracing/trace_agents.py``: a ReAct loop with a tool and a
sub-agent) at parallelism 1, with the default action log (SQLite under ``data_dir``) and
``tracing: otlp`` to the test's receiver, reads JSON lines ``{"k", "text"}`` from a
monitored directory and writes its outputs through a sink that commits on checkpoints. The
guide kills the run of ``Crashville`` once (``TRACE_TEST_CRASH_DIR``), so Flink restores the
last checkpoint and the job goes on. Once that happened, the ``then`` records follow: in
process mode a run restored parked resumes only at its key's next record (docs/consistency.md,
"What is not guaranteed"). Once every record has its output, the job is cancelled. The last
line of stdout is ``RESULT {}``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.runtime.flink import read_json_files
from tests.json_lines import read_json_lines, write_json_lines
from tests.runtime.flink.stop_savepoint_job import drop, job_environment, until
from tests.tracing.trace_agents import CRASH_DIR_ENV, trip_planner


def build_job(spec: dict[str, Any]) -> Any:
    env = job_environment(spec["mode"], None, restarts=2)
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env,
        data_dir=spec["data_dir"],
        tracing="otlp",
        tracing_endpoint=spec["endpoint"],
        tracing_protocol=spec["protocol"],
    )
    records = read_json_lines(env, spec["input_dir"], json.loads)
    outputs = agents.from_datastream(records, "k").apply(trip_planner()).to_datastream()
    write_json_lines(outputs, spec["output_dir"])
    return env


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    client = build_job(spec).execute_async("tracing")
    ended = client.get_job_execution_result()
    drop(spec, "input.jsonl", spec["records"])
    if spec["then"]:
        crashed = Path(os.environ[CRASH_DIR_ENV]) / "crashed"
        until(crashed.exists, "the kill", ended)
        drop(spec, "then.jsonl", spec["then"])
    output_dir = Path(spec["output_dir"])
    expected = len(spec["records"]) + len(spec["then"])
    until(lambda: len(read_json_files(output_dir)) >= expected, "the outputs", ended)
    client.cancel()
    print("RESULT {}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
