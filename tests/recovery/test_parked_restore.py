"""A key parked at the checkpoint, with no input after the restore, still finishes (issue 12).

The input is one record of key ``parked``, then a stream of ``tick`` records. The parked
key's action awaits a durable call that holds until the job has failed. A tick fails the job
once, only after a checkpoint *triggered after* that call started has completed: that
checkpoint holds the parked run in the key's state and a source position past its record.
Flink restarts from it, so the parked key gets no record after the restore (checked: the
restarted attempt reads no tick before the second one, hence not the parked record before
them). Only a timer can wake it: the poll its run registered, which PyFlink's thread mode
restores (``docs/consistency.md``, "What is not guaranteed"), or the drain at the end of a
bounded input. (Process mode restores no processing-time timer of a Python operator: there
the run waited for the end of the input in the runs made while writing this test, and the
variant that showed it was not reliable enough to keep.) The driver must resume the run it
finds in state: the parked key's output appears exactly once, and while the ticks are still
being read (its restored poll woke it, as it would in a stream that never ends).

Ticks sleep until the failure so that the (bounded) source is still running when it happens:
its end would start the drain, which waits for the held call on the operator's thread, and
no checkpoint could complete. Padded lines in small network buffers (as
``test_minicluster_failure.py`` paces its input) keep few records ahead of a barrier, so
checkpoints complete while the ticks sleep.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.plan import to_plan
from flink_agents.runtime.flink import JobPaths, build_agent_job, read_json_files
from tests.recovery.checkpoints import bounded_checkpoints, execute

pytestmark = [pytest.mark.slow, pytest.mark.flink]

PARKED = "parked"
TICKS = 2000  # records of the other key: at most TICKS * TICK_S of input before the failure
TICK_S = 0.01
PAD = 1000  # bytes per tick line: a few lines fill a 4 KiB network buffer
HOLD_TIMEOUT_S = 120.0  # the held call gives up (the test then fails, it does not hang)
PACING = {
    "taskmanager.memory.segment-size": "4kb",
    "python.fn-execution.bundle.size": "20",
    "python.fn-execution.bundle.time": "100",
}


class InjectedFailure(RuntimeError):
    """Raised once by a tick, to make the job fail and restore its last checkpoint."""


class NotResumedByItsTimer(AssertionError):
    """The run parked at the checkpoint did not finish while the input was being read."""


def _completed_checkpoint(work: Path) -> int:
    """The id of the newest checkpoint whose metadata is written (0 if none)."""
    ids = [
        int(metadata.parent.name.removeprefix("chk-"))
        for metadata in (work / "checkpoints").glob("*/chk-*/_metadata")
    ]
    return max(ids, default=0)


def _append(path: Path, line: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, (line + "\n").encode())  # one small O_APPEND write
    finally:
        os.close(descriptor)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def hold(work: str) -> str:
    """The parked key's durable call: notes the newest completed checkpoint when it first
    starts, then returns once the job has failed (the failed attempt cannot resume the run:
    the tick that fails it holds the operator's thread until it raises)."""
    directory = Path(work)
    _append(directory / "hold-calls.txt", str(time.time()))
    started = directory / "hold-started.json"
    if not started.exists():
        temporary = directory / "hold-started.tmp"
        temporary.write_text(json.dumps({"checkpoint": _completed_checkpoint(directory)}))
        temporary.replace(started)  # whole, never read half-written
    deadline = time.monotonic() + HOLD_TIMEOUT_S
    while not (directory / "failed").exists():
        if time.monotonic() > deadline:
            return "timed out"
        time.sleep(0.02)
    return "released"


def tick(work: str, n: int) -> None:
    """A tick of the other key: logs which attempt ran it, fails the job once (see the
    module docstring), and sleeps until then."""
    directory = Path(work)
    failed = directory / "failed"
    _append(directory / "ticks.txt", f"{n} {2 if failed.exists() else 1}")
    if failed.exists():
        return
    started = directory / "hold-started.json"
    if started.exists():
        at_start = json.loads(started.read_text())["checkpoint"]
        # at_start + 1 may have been triggered before the call started; at_start + 2 was
        # triggered after at_start + 1 ended (one checkpoint at a time), so after the park.
        if _completed_checkpoint(directory) >= at_start + 2:
            failed.touch(exist_ok=False)
            raise InjectedFailure(f"injected failure at tick {n}")
    time.sleep(TICK_S)


class ParkingAgent(Agent):
    """The parked key awaits ``hold``; every other key ticks."""

    @action(InputEvent)
    async def route(event: InputEvent, ctx: RunnerContext) -> None:
        record, work = event.input, ctx.config["work"]
        if record["user"] == PARKED:
            result = await ctx.durable_execute_async(hold, work)
            # Outside the durable call, so written by the run that resumes after the restore:
            # how many ticks had been read then.
            directory = Path(work)
            _append(directory / "parked-resumed.txt", str(len(_lines(directory / "ticks.txt"))))
            ctx.send_event(OutputEvent(output={"user": PARKED, "n": record["n"], "result": result}))
            return
        tick(work, record["n"])
        ctx.send_event(OutputEvent(output={"user": record["user"], "n": record["n"]}))


def run_job(tmp_path: Path, mode: str) -> tuple[list[dict], Path]:
    """The job in PyFlink's ``mode``; returns its committed outputs and its work directory."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "input.jsonl"
    lines = [{"user": PARKED, "n": 0}]
    lines += [{"user": "tick", "n": n, "pad": "x" * PAD} for n in range(1, TICKS + 1)]
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    plan = to_plan(ParkingAgent).model_copy(update={"config": {"work": str(work)}})
    config = bounded_checkpoints()
    config.set_string("python.execution-mode", mode)
    config.set_string("execution.checkpointing.dir", f"file://{work}/checkpoints")
    config.set_string("restart-strategy.type", "fixed-delay")
    config.set_string("restart-strategy.fixed-delay.attempts", "1")
    config.set_string("restart-strategy.fixed-delay.delay", "100 ms")
    for name, value in PACING.items():
        config.set_string(name, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    out = tmp_path / "out"
    build_agent_job(
        env,
        plan,
        JobPaths(data, out / "outputs", out / "errors"),
        "user",
        checkpoint_interval_ms=200,
        action_log=f"sqlite://{tmp_path}/log.db",
    )
    execute(env, "parked-restore")
    assert (work / "failed").exists(), "the job never failed: the ticks ran out first"
    return read_json_files(out / "outputs"), work


def check_restored_without_input(work: Path) -> None:
    """The restarted attempt read the file from past the parked record: every input of the
    parked key came before the checkpoint it restored (an aligned checkpoint: the agent had
    run every record before the source's position when it took its snapshot)."""
    ticks = [line.split() for line in _lines(work / "ticks.txt")]
    restarted = [int(n) for n, attempt in ticks if attempt == "2"]
    assert restarted, "the restarted attempt read no tick"
    assert min(restarted) > 1, f"the restarted attempt re-read the input from tick {min(restarted)}"


def check_outputs(outputs: list[dict], work: Path) -> None:
    """Every tick once; the parked key's output once, written while ticks were still read."""
    assert sorted(o["n"] for o in outputs if o["user"] == "tick") == list(range(1, TICKS + 1))
    parked = [output for output in outputs if output["user"] == PARKED]
    if not parked:
        raise NotResumedByItsTimer("the run parked at the checkpoint never finished")
    assert parked == [{"user": PARKED, "n": 0, "result": "released"}]
    resumed_at = int(_lines(work / "parked-resumed.txt")[0])
    if resumed_at >= len(_lines(work / "ticks.txt")):
        raise NotResumedByItsTimer("the parked run finished only at the end of the input")


def test_thread_mode_finishes_a_run_parked_at_the_checkpoint(tmp_path):
    outputs, work = run_job(tmp_path, "thread")
    check_restored_without_input(work)
    check_outputs(outputs, work)
