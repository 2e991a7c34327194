"""A thread-mode subtask that fails closes what it opened (its call threads, its action log,
the collector settings of ``_YoungGenerationThreshold``) as the failure leaves it, whether or
not its dispatcher is then freed.

Flink calls no ``close`` on a failing Python function, and the dispatcher's finalizer runs
only once the dispatcher is gone. A failure's traceback holds the frames it passed through,
the dispatcher's among them, and the same exception object may be held elsewhere: in a job
that batches embeddings, a failed batch fails the futures of several parked runs with one
exception, and the cycle through those runs, the metrics and the finalizer kept the failed
attempt's dispatcher, its threads and its log connection in the TaskManager's interpreter
for good (a long-running job gained them again at each failover). Here the agent keeps its
dispatcher alive itself, which any such reference amounts to.

The job runs in a MiniCluster of its own (a child process): in thread mode the interpreter
is the MiniCluster JVM's, shared by every job run in it."""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import Agent, AgentsExecutionEnvironment, InputEvent, OutputEvent, action
from tests.children import run_child_main
from tests.runtime.flink.runners import in_thread_mode_interpreter

pytestmark = pytest.mark.flink

OURS = ("flink-agents", "action-log")
"""How the names of the threads a dispatcher starts begin."""

KEPT: list[Any] = []
"""What the agent keeps alive, in the interpreter that runs it."""


class KeepsItsDispatcher(Agent):
    """Fails once, on the record of key ``c`` (a marker file says it did), having made sure
    that its dispatcher outlives the failure: it keeps the dispatcher itself, as a kept
    failure does through its traceback."""

    @action(InputEvent)
    @staticmethod
    def act(event: InputEvent, ctx: Any) -> None:
        marker = Path(event.input["marker"])
        if event.input["k"] == "c" and not marker.exists():
            marker.touch()
            from flink_agents.runtime.flink._dispatcher import AgentDispatcher

            gc.unfreeze()  # the dispatcher froze what existed when it opened, itself too
            KEPT.extend(o for o in gc.get_objects() if isinstance(o, AgentDispatcher))
            gc.freeze()
            raise RuntimeError("injected once")
        ctx.send_event(OutputEvent(output=event.input["k"]))


def interpreter_state() -> dict[str, Any]:
    """In the interpreter it runs in: our threads, the dispatchers kept, whether the collector's
    thresholds are the interpreter's own and how many objects are frozen."""
    from flink_agents.runtime.flink import _dispatcher

    return {
        "threads": sorted(t.name for t in threading.enumerate() if t.name.startswith(OURS)),
        "kept": len(KEPT),
        "own_threshold": gc.get_threshold() == _dispatcher._YOUNG_GENERATION.own_threshold(),
        "frozen": gc.get_freeze_count(),
    }


def measure(work_dir: Path) -> dict[str, Any]:
    """The failing job's outputs, and the interpreter's state after it."""
    config = Configuration()
    config.set_string("python.execution-mode", "thread")
    config.set_string("restart-strategy.type", "fixed-delay")
    config.set_string("restart-strategy.fixed-delay.attempts", "2")
    config.set_string("restart-strategy.fixed-delay.delay", "100 ms")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    env.enable_checkpointing(300)  # the collecting sink goes on across the restart
    marker = str(work_dir / "failed-once")
    records = [{"k": key, "marker": marker} for key in "abcde"]
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env,
        data_dir=str(work_dir / "data"),  # the default action log: its writer thread
    )
    outputs = agents.from_list(records, "k").apply(KeepsItsDispatcher).to_list()
    return {"outputs": sorted(set(outputs)), "after": in_thread_mode_interpreter(interpreter_state)}


def test_a_failed_subtask_closes_though_its_dispatcher_is_kept():
    with tempfile.TemporaryDirectory() as work_dir:
        result = run_child_main(__name__, work_dir)
        assert (Path(work_dir) / "failed-once").exists(), "the job never failed"
    assert result["outputs"] == list("abcde")  # the restart finished the input
    after = result["after"]
    assert after["kept"] == 1  # the failed attempt's dispatcher is still alive
    assert after["threads"] == []
    assert after["own_threshold"]
    assert after["frozen"] == 0


def main() -> None:
    print(json.dumps(measure(Path(sys.argv[1]))))
