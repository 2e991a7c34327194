"""The erasure test's job, in a child process: ``python -m tests.runtime.flink.forget_job
<spec.json>``.

``Remembers`` (``tests/runtime/forgetting_agents.py``) reads JSON lines from a monitored
directory (``{"forget": KEY}`` lines become ``ForgetKey`` records) and commits its outputs
on checkpoints. Three steps:

1. The ``records`` (two keys') leave something everywhere (memory, the action log, long-term
   memory, knowledge, a scheduled follow-up, a run waiting for a signal, event-log lines);
   their outputs are committed, so a checkpoint holds it all.
2. The ``then`` records follow in one file, with a forget request among them: in the
   erasure test, the request for one key and a record of the other key that fails the job
   (``crash``), at once: Flink restores a checkpoint, most likely one taken before the
   erasure, and the erasure runs again with the input replayed. Once the output of the
   last of them is committed, a checkpoint after the erasure holds the state.
3. The job is stopped with a savepoint at once, which the test searches with the rest.

The last line of stdout is ``RESULT {"savepoint"}``: the savepoint's path.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.runtime.flink import read_json_files
from flink_agents.testing import stop_with_savepoint
from tests.json_lines import read_json_lines, write_json_lines
from tests.runtime.flink.stop_savepoint_job import drop, job_environment, until
from tests.runtime.forgetting_agents import Remembers, parse_record


def build_job(spec: dict[str, Any], restarts: int = 2, **options: Any) -> Any:
    """``Remembers`` over the spec's input directory, its outputs committed to its output
    directory, with ``options`` besides the spec's data directory and a standard event log."""
    env = job_environment(spec["mode"], None, restarts=restarts)
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, data_dir=spec["data_dir"], event_log_level="standard", **options
    )
    records = read_json_lines(env, spec["input_dir"], parse_record)
    outputs = agents.from_datastream(records, "user").apply(Remembers).to_datastream()
    write_json_lines(outputs, spec["output_dir"])
    return env


def committed(spec: dict[str, Any]) -> set[Any]:
    return {output.get("id") for output in read_json_files(Path(spec["output_dir"]))}


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    client = build_job(spec, action_log_job=spec["job"]).execute_async("forget")
    ended = client.get_job_execution_result()
    drop(spec, "records.jsonl", spec["records"])
    wanted = {r["id"] for r in spec["records"] if not r.get("ask")}
    until(lambda: wanted <= committed(spec), "the records' outputs", ended)
    drop(spec, "forget.jsonl", spec["then"])
    until(lambda: spec["then"][-1]["id"] in committed(spec), "the last record's output", ended)
    savepoint = stop_with_savepoint(client, spec["savepoint_dir"])
    ended.result()
    print("RESULT " + json.dumps({"savepoint": savepoint}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
