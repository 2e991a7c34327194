"""One submission of the pinned-restore test, run in a child process:
``python -m tests.recovery.pinned_job <spec.json>``.

The ledger agent (``flink_agents.testing.recovery``) under a pinned ``action-log-job``, with
the default action log (SQLite under ``data_dir``), reads JSON lines from a continuously
monitored directory and writes its outputs through a sink that commits on checkpoints. For
each batch of the spec, the batch's file is dropped into the input directory unless it is
there already (a file an earlier submission read, which a submission restored from an older
savepoint reads again), and the submission waits until every record of it has an output.
Then it is stopped with a savepoint or cancelled; the last line of stdout is
``RESULT {"savepoint": <path or null>}``.

The spec (JSON): ``job`` (the pinned name), ``savepoint`` (to restore from, or null),
``savepoint_dir``, ``stop`` (``savepoint`` or ``cancel``), ``input_dir``, ``output_dir``,
``data_dir``, ``ledger`` and ``batches``: ``[{"file": name, "records": [...]}]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import to_plan
from flink_agents.testing.recovery import LedgerAgent
from tests.json_lines import read_json_lines, write_json_lines
from tests.memory.long_term.rescale_agents import parse_request
from tests.memory.long_term.rescale_job import stop_with_savepoint, wait_for_answers

CHECKPOINT_INTERVAL_MS = 300


def build_job(spec: dict[str, Any]) -> StreamExecutionEnvironment:
    configuration = Configuration()
    configuration.set_string("python.execution-mode", "thread")
    configuration.set_string("restart-strategy.type", "none")  # a failure ends the phase
    if spec["savepoint"]:
        configuration.set_string("execution.savepoint.path", spec["savepoint"])
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(2)
    env.enable_checkpointing(CHECKPOINT_INTERVAL_MS)
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, data_dir=spec["data_dir"], action_log_job=spec["job"]
    )
    records = read_json_lines(env, spec["input_dir"], parse_request)
    plan = to_plan(LedgerAgent).model_copy(
        update={"config": {"ledger": spec["ledger"], "delay_s": 0.01}}
    )
    outputs = agents.from_datastream(records, "user").apply(plan).to_datastream()
    write_json_lines(outputs, spec["output_dir"])
    return env


def run_submission(spec: dict[str, Any]) -> str | None:
    """Run the spec's batches; the savepoint's path, or None if cancelled."""
    client = build_job(spec).execute_async("pinned-restore")
    ended = client.get_job_execution_result()
    input_dir, output_dir = Path(spec["input_dir"]), Path(spec["output_dir"])
    for batch in spec["batches"]:
        if not (input_dir / batch["file"]).exists():
            # Under a hidden name first: the source skips hidden files, never reading half.
            hidden = input_dir / f".{batch['file']}"
            hidden.write_text("".join(json.dumps(record) + "\n" for record in batch["records"]))
            hidden.rename(input_dir / batch["file"])
        wait_for_answers(ended, output_dir, {record["id"] for record in batch["records"]})
    if spec["stop"] == "savepoint":
        return stop_with_savepoint(client, spec["savepoint_dir"])
    client.cancel().result()
    return None


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    savepoint = run_submission(spec)
    print("RESULT " + json.dumps({"savepoint": savepoint}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
