"""In thread mode the dispatcher raises the collector's young-generation threshold while it
is open (``_YoungGenerationThreshold``: parked runs must not be promoted by collections that
come every few runs), and restores the interpreter's own when the last one closes: the
interpreter is the TaskManager's, shared with every other Python operator and job."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyflink.common import Types

from flink_agents.api import Agent, InputEvent, OutputEvent, action
from flink_agents.runtime.flink._dispatcher import _YoungGenerationThreshold
from tests.memory.long_term.test_rescale import child_environment
from tests.runtime.flink.runners import flink_environment, run_agent

YOUNG = _YoungGenerationThreshold.YOUNG_THRESHOLD
REPO = Path(__file__).resolve().parents[3]


class ThresholdProbe(Agent):
    """Outputs the collector's thresholds as its action sees them."""

    @action(InputEvent)
    @staticmethod
    def report(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=(event.input["k"], gc.get_threshold())))


def interpreter_state() -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """In the interpreter it runs in: the collector's thresholds now, and its own (what they
    were before a dispatcher raised them). Dispatchers of failed jobs, never closed, are
    collected first."""
    gc.collect()
    from flink_agents.runtime.flink import _dispatcher

    return gc.get_threshold(), _dispatcher._YOUNG_GENERATION.own_threshold()


def _thread_mode_state() -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """``interpreter_state`` in the thread-mode interpreter (the MiniCluster's JVM), read by
    a plain PyFlink map."""
    env = flink_environment(parallelism=1, mode="thread")
    stream = env.from_collection([0], type_info=Types.INT()).map(
        lambda _: interpreter_state(), output_type=Types.PICKLED_BYTE_ARRAY()
    )
    with stream.execute_and_collect() as results:
        (state,) = list(results)
    return tuple(state[0]), tuple(state[1])


def measure() -> dict[str, Any]:
    """In this process's MiniCluster: the thread-mode interpreter's state before an agent
    job, what the job's two dispatchers saw while open, and the state after."""
    before = _thread_mode_state()
    # Two subtasks: two dispatchers open at once in one interpreter.
    records = [{"k": key} for key in "abcd"]
    outputs = run_agent("flink", ThresholdProbe, records, "k")
    return {
        "before": before,
        "keys": sorted(key for key, _ in outputs),
        "seen": sorted({tuple(thresholds) for _, thresholds in outputs}),
        "after": _thread_mode_state(),
    }


def test_the_young_threshold_is_raised_while_agents_run_and_restored_after():
    """In a process of its own, as a TaskManager that runs this one job: the thread-mode
    interpreter of this test process's MiniCluster is shared with every earlier test's jobs,
    whose dispatchers need not all be gone."""
    child = subprocess.run(
        [sys.executable, "-m", "tests.runtime.flink.test_gc_threshold"],
        cwd=REPO,
        env=child_environment(),  # without what a job in this process left behind
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stderr[-4000:]
    result = json.loads(child.stdout.strip().splitlines()[-1])
    own = tuple(result["before"][1])
    assert tuple(result["before"][0]) == own  # no dispatcher open before the job
    raised = [max(own[0], YOUNG), *own[1:]]
    assert raised != list(own)  # else there is nothing to see
    assert result["keys"] == list("abcd")
    assert result["seen"] == [raised]
    assert [tuple(t) for t in result["after"]] == [own, own]


class _Dispatcher:
    """Stands for a dispatcher: the threshold keeps its open ones weakly."""


@pytest.fixture
def own() -> Iterator[tuple[int, int, int]]:
    """This interpreter's thresholds, set back after the test whatever it did."""
    thresholds = gc.get_threshold()
    yield thresholds
    gc.set_threshold(*thresholds)


def test_the_threshold_is_restored_when_the_last_open_dispatcher_closes(own):
    young = _YoungGenerationThreshold()
    first, second = _Dispatcher(), _Dispatcher()
    young.raise_threshold(first)
    young.raise_threshold(second)
    assert gc.get_threshold() == (max(own[0], YOUNG), *own[1:])
    assert young.own_threshold() == own
    young.restore_threshold(first)
    assert gc.get_threshold()[0] == max(own[0], YOUNG)
    young.restore_threshold(second)
    assert gc.get_threshold() == own


def test_a_dispatcher_that_never_closed_does_not_keep_it_raised(own):
    """A failed job's dispatcher is never closed: once it is gone, the next one to close
    restores the interpreter's thresholds."""
    young = _YoungGenerationThreshold()
    lost, closing = _Dispatcher(), _Dispatcher()
    young.raise_threshold(lost)
    young.raise_threshold(closing)
    del lost
    gc.collect()
    young.restore_threshold(closing)
    assert gc.get_threshold() == own


pytestmark = pytest.mark.flink


if __name__ == "__main__":
    print(json.dumps(measure()))
