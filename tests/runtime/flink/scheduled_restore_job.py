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

Besides, an ``ask`` record per key makes a run that waits for an ``Approval`` signal, from a
second monitored directory (``with_signals``): two are answered after the restore from the
savepoint (step 2), the third after the failure, when a signal no run waits for comes too.

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
from flink_agents.testing import stop_with_savepoint
from tests.json_lines import read_json_lines, write_json_lines
from tests.memory.long_term.rescale_job import wait_for_answers
from tests.runtime.flink.held_call_agents import parse_record
from tests.runtime.flink.reminder_agents import Approval, Reminds
from tests.runtime.flink.stop_savepoint_job import drop, job_environment, until


def build_job(spec: dict[str, Any], savepoint: str | None, restarts: int = 0) -> Any:
    env = job_environment(spec["mode"], savepoint, restarts)
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, data_dir=spec["data_dir"], action_log_job=spec["job"]
    )
    records = read_json_lines(env, spec["input_dir"], parse_record)
    signals = read_json_lines(env, spec["signals_dir"], parse_record, name="signals")
    plan = to_plan(Reminds).model_copy(update={"config": {"marker": spec["marker"]}})
    outputs = (
        agents.from_datastream(records, "key")
        .with_signals(signals, "key", event_type=Approval)
        .apply(plan)
        .to_datastream()
    )
    write_json_lines(outputs, spec["output_dir"])
    return env


def later(record: dict[str, Any]) -> str:
    """The id of the output a plan's reminder (a nap's waking, an ask's answer) commits."""
    kind = {"nap": "woke", "ask": "answered"}.get(record["kind"], "reminded")
    return f"{kind}-{record['id']}"


def committed(spec: dict[str, Any]) -> set[Any]:
    return {output["id"] for output in read_json_files(Path(spec["output_dir"]))}


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    plans, late, asks = spec["plans"], spec["late_plans"], spec["asks"]
    client = build_job(spec, None).execute_async("scheduled")
    ended = client.get_job_execution_result()
    drop(spec, "plans.jsonl", plans + asks)
    planned_at = time.time()
    until(lambda: {r["id"] for r in plans + asks} <= committed(spec), "plans committed", ended)
    savepoint = stop_with_savepoint(client, spec["savepoint_dir"])
    stopped_at = time.time()
    ended.result()

    client = build_job(spec, savepoint, restarts=2).execute_async("scheduled-restored")
    ended = client.get_job_execution_result()
    # Reminders scheduled by the restored job, committed (so a checkpoint holds them)...
    drop(spec, "late.jsonl", late)
    late_at = time.time()
    # ... and the first signals, answering asks that waited across the savepoint.
    signalled = spec["signals_after_restore"]
    drop_signals(spec, "restored.jsonl", signalled)
    wanted = {r["id"] for r in late} | {f"answered-{s['n']}" for s in signalled}
    until(lambda: wanted <= committed(spec), "late plans committed and asks answered", ended)
    # ... are pending when it fails (``failed_at`` is checked against their due time).
    drop(spec, "crash.jsonl", [spec["crash"]])
    until(lambda: Path(spec["marker"]).exists(), "the failure", ended)
    result = {
        "planned_at": planned_at,
        "stopped_at": stopped_at,
        "late_at": late_at,
        "failed_at": float(Path(spec["marker"]).read_text()),
    }
    # An ask that waited across the savepoint and the failure too, and a signal no run
    # waits for.
    drop_signals(spec, "failed.jsonl", spec["signals_after_failure"])
    if spec["touches"]:
        ran = {o["id"]: o["at"] for o in read_json_files(Path(spec["output_dir"])) if "at" in o}
        due = max(ran[r["id"]] + r["delay_s"] for r in plans + late)
        time.sleep(max(0.0, due + 0.5 - time.time()))
        drop(spec, "touches.jsonl", spec["touches"])
    everything = [*plans, *late, *asks, spec["crash"], *spec["touches"]]
    wanted = {later(r) for r in plans + late + asks} | {r["id"] for r in everything}
    wanted |= set(spec["unexpected"])
    wait_for_answers(ended, Path(spec["output_dir"]), wanted)
    client.cancel().result()
    print("RESULT " + json.dumps(result), flush=True)


def drop_signals(spec: dict[str, Any], name: str, signals: list[dict[str, Any]]) -> None:
    """``signals`` as a new file of the signal stream's directory."""
    drop({**spec, "input_dir": spec["signals_dir"]}, name, signals)


if __name__ == "__main__":
    main(sys.argv[1:])
