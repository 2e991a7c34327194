"""The stop-with-savepoint test's jobs, run in a child process (a JVM of their own):
``python -m tests.runtime.flink.stop_savepoint_job <spec.json>``.

``HeldCallAgent`` under a pinned ``action-log-job``, with the default action log (SQLite
under ``data_dir``), reads JSON lines from a continuously monitored directory and writes its
outputs through a sink that commits on checkpoints. Two submissions:

1. The first batch is dropped into the input directory; once every call of it has started
   (the scripted server holds them), the job is stopped with a savepoint. Then, in process
   mode, the Python worker processes the job had are waited for until they exit. What is
   recorded then is read from the log: the outcomes of the calls in flight at the stop. In
   thread mode a second, tiny job lists the threads of ours alive in the JVM's embedded
   interpreter, the one the agent ran in.
2. Restored from the savepoint, the job reads the second batch (the same keys: in process
   mode a parked run resumes on its key's next record) until every id of both batches has
   an output, and is cancelled.

The last line of stdout is ``RESULT {...}``: ``recorded`` (the call results in the log
after the stop), ``threads`` (thread mode: names of ours still alive), ``workers`` and
``workers_left`` (process mode: the job's worker processes, and those still alive).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents._shipping import ShippedFunction
from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import to_plan
from flink_agents.runtime.action_log import open_action_log
from tests.json_lines import read_json_lines, write_json_lines
from tests.memory.long_term.rescale_job import stop_with_savepoint, wait_for_answers
from tests.runtime.flink.held_call_agents import HeldCallAgent, parse_record, thread_names

CHECKPOINT_INTERVAL_MS = 300
WAIT_TIMEOUT_S = 120.0


def job_environment(
    mode: str, savepoint: str | None, restarts: int = 0
) -> StreamExecutionEnvironment:
    """A streaming job's environment at parallelism 1, checkpointing every
    ``CHECKPOINT_INTERVAL_MS``, restored from ``savepoint`` if given, restarted after a
    failure up to ``restarts`` times (0: a failure ends the test)."""
    configuration = Configuration()
    configuration.set_string("python.execution-mode", mode)
    if restarts:
        configuration.set_string("restart-strategy.type", "fixed-delay")
        configuration.set_string("restart-strategy.fixed-delay.attempts", str(restarts))
        configuration.set_string("restart-strategy.fixed-delay.delay", "200 ms")
    else:
        configuration.set_string("restart-strategy.type", "none")
    if savepoint:
        configuration.set_string("execution.savepoint.path", savepoint)
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(1)
    env.enable_checkpointing(CHECKPOINT_INTERVAL_MS)
    return env


def build_job(spec: dict[str, Any], savepoint: str | None) -> StreamExecutionEnvironment:
    env = job_environment(spec["mode"], savepoint)
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, data_dir=spec["data_dir"], action_log_job=spec["job"]
    )
    records = read_json_lines(env, spec["input_dir"], parse_record)
    plan = to_plan(HeldCallAgent).model_copy(
        update={"config": {"base_url": spec["base_url"], "started": spec["started"]}}
    )
    outputs = agents.from_datastream(records, "key").apply(plan).to_datastream()
    write_json_lines(outputs, spec["output_dir"])
    return env


def drop(spec: dict[str, Any], name: str, records: list[dict[str, Any]]) -> None:
    """``records`` as a new input file (under a hidden name first: the source skips those)."""
    hidden = Path(spec["input_dir"]) / f".{name}"
    hidden.write_text("".join(json.dumps(record) + "\n" for record in records))
    hidden.rename(hidden.with_name(name))


def until(done: Any, what: str, ended: Any = None) -> None:
    """Until ``done()``; fails after ``WAIT_TIMEOUT_S`` or if the job (``ended``) ends."""
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while not done():
        if ended is not None and ended.done():
            ended.result()  # raises the job's failure
            raise RuntimeError(f"the job ended before {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {WAIT_TIMEOUT_S} s")
        time.sleep(0.05)


def started_ids(spec: dict[str, Any]) -> set[int]:
    path = Path(spec["started"])
    return {int(line) for line in path.read_text().split()} if path.exists() else set()


def recorded_results(spec: dict[str, Any]) -> list[Any]:
    """The results of every durable call the job's log holds."""
    url = f"sqlite://{(Path(spec['data_dir']) / 'action-log.db').resolve()}"
    with open_action_log(url) as log:
        keys = log.run_index(spec["job"])
        interrupted = [a for key in keys for a in log.key_interrupted(spec["job"], key)]
        completed = [r for key in keys for r in log.key_records(spec["job"], key)]
    return [call.result for action in interrupted + completed for call in action.calls]


def threads_left_in_the_jvm(spec: dict[str, Any]) -> list[str]:
    """Our threads alive in the JVM's embedded interpreter, seen by a job that runs there."""
    configuration = Configuration()
    configuration.set_string("python.execution-mode", "thread")
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(1)
    AgentsExecutionEnvironment.get_execution_environment(env, data_dir=spec["data_dir"])
    probe = env.from_collection([0], Types.INT()).map(
        ShippedFunction(thread_names), output_type=Types.STRING()
    )
    with probe.execute_and_collect() as results:
        return json.loads(next(iter(results)))


def python_workers() -> list[int]:
    """The processes below this one that run PyFlink's Python worker (process mode)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(parent, []).append(int(entry.name))
    below, todo = [], [os.getpid()]
    while todo:
        for child in parents.get(todo.pop(), []):
            below.append(child)
            todo.append(child)
    return sorted(pid for pid in below if is_worker(pid))


def is_worker(pid: int) -> bool:
    try:
        return b"beam_boot" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    result: dict[str, Any] = {}
    client = build_job(spec, None).execute_async("stop-savepoint")
    ended = client.get_job_execution_result()
    drop(spec, "first.jsonl", spec["first"])
    first_ids = {record["id"] for record in spec["first"]}
    until(lambda: first_ids <= started_ids(spec), "calls started", ended)
    workers = python_workers()
    savepoint = stop_with_savepoint(client, spec["savepoint_dir"])
    ended.result()  # the job is finished
    if spec["mode"] == "process":
        # Beam stops the worker's wrapper script, not the worker: it is on its own now.
        result["workers"] = workers
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while any(map(is_worker, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        result["workers_left"] = [pid for pid in workers if is_worker(pid)]
    result["recorded"] = recorded_results(spec)
    if spec["mode"] == "thread":
        result["threads"] = threads_left_in_the_jvm(spec)

    client = build_job(spec, savepoint).execute_async("stop-savepoint-restored")
    drop(spec, "second.jsonl", spec["second"])
    ids = {record["id"] for record in spec["first"] + spec["second"]}
    wait_for_answers(client.get_job_execution_result(), Path(spec["output_dir"]), ids)
    client.cancel().result()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
