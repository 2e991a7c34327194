"""In thread mode the dispatcher raises the collector's young-generation threshold while it
is open (``_YoungGenerationThreshold``: parked runs must not be promoted by collections that
come every few runs), and restores the interpreter's own when the last one closes: the
interpreter is the TaskManager's, shared with every other Python operator and job."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import pytest

from flink_agents.api import Agent, InputEvent, OutputEvent, action
from flink_agents.runtime.flink._dispatcher import _YoungGenerationThreshold
from tests.children import run_child_main
from tests.runtime.flink.runners import in_thread_mode_interpreter, run_agent

YOUNG = _YoungGenerationThreshold.YOUNG_THRESHOLD


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


def measure() -> dict[str, Any]:
    """In this process's MiniCluster: the thread-mode interpreter's state before an agent
    job, what the job's two dispatchers saw while open, and the state after."""
    before = in_thread_mode_interpreter(interpreter_state)
    # Two subtasks: two dispatchers open at once in one interpreter.
    records = [{"k": key} for key in "abcd"]
    outputs = run_agent("flink", ThresholdProbe, records, "k")
    return {
        "before": before,
        "keys": sorted(key for key, _ in outputs),
        "seen": sorted({tuple(thresholds) for _, thresholds in outputs}),
        "after": in_thread_mode_interpreter(interpreter_state),
    }


def test_the_young_threshold_is_raised_while_agents_run_and_restored_after():
    """In a process of its own, as a TaskManager that runs this one job: the thread-mode
    interpreter of this test process's MiniCluster is shared with every earlier test's jobs,
    whose dispatchers need not all be gone."""
    result = run_child_main(__name__)
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


def main() -> None:
    """In the child process of ``run_child_main``."""
    print(json.dumps(measure()))
