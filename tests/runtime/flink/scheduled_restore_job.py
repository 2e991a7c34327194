"""The scheduled events' restore test, run in a child process (a JVM of its own):
``python -m tests.runtime.flink.scheduled_restore_job <spec.json>``.

``Reminds`` (``reminder_agents.py``: each ``plan`` record schedules a reminder ``delay_s``
ahead) reads JSON lines from a monitored directory and writes its outputs through a sink
that commits on checkpoints (exactly once). Three steps, the reminders pending throughout:

1. The ``plans`` are read, their runs' outputs committed, and the job is stopped with a
   savepoint (before any reminder is due).
2. Restored from it (restarts allowed), the ``late_plans`` schedule reminders a few seconds
   ahead; once their outputs are committed (a checkpoint holds the reminders), a ``crash``
   record fails the job: Flink restores that checkpoint.
3. In process mode, whose restores fire no timer of a Python operator, one ``touch`` record
   per key after the reminders are due (``docs/waiting.md``); in thread mode none: the
   restored timers fire them. The job runs until every reminder's output is committed.

The last line of stdout is ``RESULT {"planned_at", "stopped_at", "late_at", "failed_at"}``:
when the plans were dropped, when the job was stopped, when the late plans were dropped and
when the job failed. A plan's reminder is due ``delay_s`` after its record ran, which its
output says (``at``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import to_plan
from flink_agents.runtime.flink import read_json_files
from tests.json_lines import read_json_lines, write_json_lines
from tests.memory.long_term.rescale_job import stop_with_savepoint, wait_for_answers
from tests.runtime.flink.held_call_agents import parse_record
from tests.runtime.flink.reminder_agents import Reminds
from tests.runtime.flink.stop_savepoint_job import drop, job_environment, until


def build_job(spec: dict[str, Any], savepoint: str | None, restarts: int = 0) -> Any:
    env = job_environment(spec["mode"], savepoint, restarts)
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, data_dir=spec["data_dir"], action_log_job=spec["job"]
    )
    records = read_json_lines(env, spec["input_dir"], parse_record)
    plan = to_plan(Reminds).model_copy(update={"config": {"marker": spec["marker"]}})
    outputs = agents.from_datastream(records, "key").apply(plan).to_datastream()
    write_json_lines(outputs, spec["output_dir"])
    return env


def later(record: dict[str, Any]) -> str:
    """The id of the output a plan's reminder (or a nap's waking) commits."""
    return f"{'woke' if record['kind'] == 'nap' else 'reminded'}-{record['id']}"


def committed(spec: dict[str, Any]) -> set[Any]:
    return {output["id"] for output in read_json_files(Path(spec["output_dir"]))}


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    plans, late = spec["plans"], spec["late_plans"]
    client = build_job(spec, None).execute_async("scheduled")
    ended = client.get_job_execution_result()
    drop(spec, "plans.jsonl", plans)
    planned_at = time.time()
    until(lambda: {r["id"] for r in plans} <= committed(spec), "plans committed", ended)
    savepoint = stop_with_savepoint(client, spec["savepoint_dir"])
    stopped_at = time.time()
    ended.result()

    client = build_job(spec, savepoint, restarts=2).execute_async("scheduled-restored")
    ended = client.get_job_execution_result()
    # Reminders scheduled by the restored job, committed (so a checkpoint holds them)...
    drop(spec, "late.jsonl", late)
    late_at = time.time()
    until(lambda: {r["id"] for r in late} <= committed(spec), "late plans committed", ended)
    # ... are pending when it fails (``failed_at`` is checked against their due time).
    drop(spec, "crash.jsonl", [spec["crash"]])
    until(lambda: Path(spec["marker"]).exists(), "the failure", ended)
    result = {
        "planned_at": planned_at,
        "stopped_at": stopped_at,
        "late_at": late_at,
        "failed_at": float(Path(spec["marker"]).read_text()),
    }
    if spec["touches"]:
        ran = {o["id"]: o["at"] for o in read_json_files(Path(spec["output_dir"])) if "at" in o}
        due = max(ran[r["id"]] + r["delay_s"] for r in plans + late)
        time.sleep(max(0.0, due + 0.5 - time.time()))
        drop(spec, "touches.jsonl", spec["touches"])
    everything = [*plans, *late, spec["crash"], *spec["touches"]]
    wanted = {later(r) for r in plans + late} | {r["id"] for r in everything}
    wait_for_answers(ended, Path(spec["output_dir"]), wanted)
    client.cancel().result()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
