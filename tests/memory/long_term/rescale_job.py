"""One phase of the rescale test, run in a child process:
``python -m tests.memory.long_term.rescale_job <spec.json>``.

The job reads JSON lines from a continuously monitored directory, runs ``RescaleAgent``
keyed by ``key`` in the default configuration (embedded vector store under the data
directory, default action log), and writes its answers as JSON lines through a sink that
commits on every checkpoint. It runs until the phase is done: for each batch of the spec,
the batch's records are dropped into the input directory as a new file, and the phase waits
until the answer to each of them is committed, so a batch sees everything earlier batches
wrote. Then the job is stopped with a savepoint (or cancelled, after the last phase), and
the last line of stdout is ``RESULT {"savepoint": <path or null>}``.

The spec (JSON): ``mode`` (``thread`` or ``process``), ``parallelism``, ``savepoint`` (to
restore from, or null), ``savepoint_dir``, ``stop`` (``savepoint`` or ``cancel``),
``input_dir``, ``output_dir``, ``data_dir``, and ``batches``: ``[{"file": name, "records":
[...]}]``. Every operator keeps its uid from one phase to the next, so the savepoint's state
maps onto the rescaled job.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from pyflink.common import (
    Configuration,
)
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.runtime.flink import read_json_files
from flink_agents.testing import stop_with_savepoint
from tests.json_lines import read_json_lines, write_json_lines
from tests.memory.long_term.rescale_agents import RescaleAgent, parse_request

MAX_PARALLELISM = 128
"""Fixed, so every phase's key groups are the same whatever its parallelism."""
CHECKPOINT_INTERVAL_MS = 500
"""The sink commits answers on checkpoints: this bounds how long a batch waits for them."""
BATCH_TIMEOUT_S = 120.0


def build_job(spec: dict[str, Any]) -> StreamExecutionEnvironment:
    configuration = Configuration()
    configuration.set_string("python.execution-mode", spec["mode"])
    # A failure must end the phase with its cause, not restart it until the timeout.
    configuration.set_string("restart-strategy.type", "none")
    if spec["savepoint"]:
        configuration.set_string("execution.savepoint.path", spec["savepoint"])
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(spec["parallelism"])
    env.set_max_parallelism(MAX_PARALLELISM)
    env.enable_checkpointing(CHECKPOINT_INTERVAL_MS)
    # Before any Python operator: it sets the job's Python execution up.
    agents = AgentsExecutionEnvironment.get_execution_environment(env, data_dir=spec["data_dir"])
    records = read_json_lines(env, spec["input_dir"], parse_request, name="requests")
    answers = agents.from_datastream(records, "key").apply(RescaleAgent).to_datastream()
    write_json_lines(answers, spec["output_dir"], name="answers", prefix="answers")
    return env


def run_phase(spec: dict[str, Any]) -> str | None:
    """Run the spec's batches on a fresh job; the savepoint's path, or None if cancelled."""
    env = build_job(spec)
    client = env.execute_async(f"rescale-p{spec['parallelism']}")
    ended = client.get_job_execution_result()
    input_dir, output_dir = Path(spec["input_dir"]), Path(spec["output_dir"])
    for batch in spec["batches"]:
        # Written under a hidden name first: the source skips hidden files, so it never
        # reads a half-written one.
        hidden = input_dir / f".{batch['file']}"
        hidden.write_text("".join(json.dumps(record) + "\n" for record in batch["records"]))
        hidden.rename(input_dir / batch["file"])
        wait_for_answers(ended, output_dir, {record["id"] for record in batch["records"]})
    if spec["stop"] == "savepoint":
        return stop_with_savepoint(client, spec["savepoint_dir"])
    client.cancel().result()
    return None


def wait_for_answers(ended: Any, output_dir: Path, ids: set[str]) -> None:
    """Until an answer to each of ``ids`` is committed. Fails if the job ends first (with
    its failure: the MiniCluster shuts down with the job, so ``ended``, the future of its
    result, is the one place left to read it) or after ``BATCH_TIMEOUT_S``."""
    deadline = time.monotonic() + BATCH_TIMEOUT_S
    while True:
        answered = {answer["id"] for answer in read_json_files(output_dir)}
        if ids <= answered:
            return
        if ended.done():
            ended.result()  # raises the job's failure
            raise RuntimeError(f"the job ended before answering {sorted(ids - answered)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no answer after {BATCH_TIMEOUT_S} s to {sorted(ids - answered)}")
        time.sleep(0.2)


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    savepoint = run_phase(spec)
    print("RESULT " + json.dumps({"savepoint": savepoint}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
