"""The memory TTL test's job, in a child process: ``python -m tests.runtime.flink.ttl_job
<spec.json>``.

``Remembers`` (``tests/runtime/forgetting_agents.py``) with a short
``short-term-memory-ttl`` reads JSON lines from a monitored directory and commits its
outputs on checkpoints. One key gets its ``first`` records and then nothing for longer than
the TTL, while the other gets a record every ``beat_s`` seconds (``beats``); then each gets
one more record (``last``), and the job is stopped with a savepoint, which the test
searches. The last line of stdout is ``RESULT {"savepoint", "last_at"}``: the savepoint's
path, and when the last records were dropped.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.runtime.flink import read_json_files
from tests.json_lines import read_json_lines, write_json_lines
from tests.memory.long_term.rescale_job import stop_with_savepoint
from tests.runtime.flink.stop_savepoint_job import drop, job_environment, until
from tests.runtime.forgetting_agents import Remembers, parse_record


def build_job(spec: dict[str, Any]) -> Any:
    env = job_environment(spec["mode"], None)
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env,
        data_dir=spec["data_dir"],
        short_term_memory_ttl=spec["ttl_s"],
        event_log_level="standard",
    )
    records = read_json_lines(env, spec["input_dir"], parse_record)
    outputs = agents.from_datastream(records, "user").apply(Remembers).to_datastream()
    write_json_lines(outputs, spec["output_dir"])
    return env


def committed(spec: dict[str, Any]) -> set[Any]:
    return {output.get("id") for output in read_json_files(Path(spec["output_dir"]))}


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    client = build_job(spec).execute_async("ttl")
    ended = client.get_job_execution_result()
    drop(spec, "first.jsonl", spec["first"])
    until(lambda: {r["id"] for r in spec["first"]} <= committed(spec), "first outputs", ended)
    for n, beat in enumerate(spec["beats"]):
        time.sleep(spec["beat_s"])
        drop(spec, f"beat-{n}.jsonl", [beat])
    until(lambda: {r["id"] for r in spec["beats"]} <= committed(spec), "beats' outputs", ended)
    last_at = time.time()
    drop(spec, "last.jsonl", spec["last"])
    until(lambda: {r["id"] for r in spec["last"]} <= committed(spec), "last outputs", ended)
    savepoint = stop_with_savepoint(client, spec["savepoint_dir"])
    ended.result()
    print("RESULT " + json.dumps({"savepoint": savepoint, "last_at": last_at}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
