"""The spend test's job, in a child process: ``python -m tests.runtime.flink.spend_job
<spec.json>``.

``PacedAsks`` (``tests/integrations/spend_agents.py``) at parallelism 1 reads JSON lines from a
monitored directory, under a key budget (``primary`` twice an hour per key, then switch to
``backup``), a key budget that waits (``last`` once a window of ``wait_window_s``) and an
agent budget (``backup`` ``agent_calls`` times an hour in all, then fail)
with ``error-policy: error-output``, ``primary`` paced at ``PACE`` a minute. Outputs
and error records are committed on checkpoints. Three batches:

1. ``first``: the budgets fill up, and key ``w`` asks ``last`` three times (each call
   waits for a window of its own); its outputs are committed.
2. ``second``: a record that fails the job the first time it is read comes among the
   records that reach the limits, so Flink restores a checkpoint and replays them: the
   budgets' verdicts and the calls are answered from the action log, charged once.
3. ``burst``: many keys at once, to measure the pace of the rate limit.

The last line of stdout is ``RESULT {}``.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from flink_agents.api import AgentsExecutionEnvironment, Budget
from flink_agents.runtime.flink import read_json_files
from tests.integrations.spend_agents import PacedAsks, parse_record
from tests.json_lines import read_json_lines, write_json_lines
from tests.runtime.flink.stop_savepoint_job import drop, job_environment, until


def build_job(spec: dict[str, Any]) -> Any:
    env = job_environment(spec["mode"], None, restarts=2)
    budgets = [
        Budget(
            name="per-key",
            window="hour",
            max_calls=2,
            models=["primary"],
            on_exceeded="switch",
            switch_to="backup",
        ),
        Budget(
            name="one-last-each",
            window=timedelta(seconds=spec["wait_window_s"]),
            max_calls=1,
            models=["last"],
            on_exceeded="wait",
        ),
        Budget(
            name="agent-calls",
            scope="agent",
            window="hour",
            max_calls=spec["agent_calls"],
            models=["backup"],
        ),
    ]
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, data_dir=spec["data_dir"], error_policy="error-output", budgets=budgets
    )
    records = read_json_lines(env, spec["input_dir"], parse_record)
    built = agents.from_datastream(records, "k").apply(PacedAsks)
    write_json_lines(built.to_datastream(), spec["output_dir"])
    write_json_lines(built.error_stream(), spec["error_dir"], name="errors", prefix="err")
    return env


def done(spec: dict[str, Any], batch: list[dict[str, Any]]) -> bool:
    """Whether every record of ``batch`` has its output or error record committed."""
    seen = {o["text"] for o in read_json_files(Path(spec["output_dir"]))}
    seen |= {e["input"]["text"] for e in read_json_files(Path(spec["error_dir"]))}
    return all(any(r["text"] in text for text in seen) for r in batch if not r.get("crash"))


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    client = build_job(spec).execute_async("spend")
    ended = client.get_job_execution_result()
    for batch in ("first", "second", "burst"):
        drop(spec, f"{batch}.jsonl", spec[batch])
        until(lambda batch=batch: done(spec, spec[batch]), f"the {batch} batch's results", ended)
    client.cancel()
    print("RESULT {}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
