"""Runs of plain actions take a shorter path (``RunEngine.run_plain``, and for a new run of
a known key ``KeyDriver._run_plain``): it must leave exactly what stepping each action
leaves. With the event log on, every action goes through ``RunEngine.step``; with memory
snapshots on, new runs go through ``KeyDriver._drive``. The three must agree on outputs,
error records, memory, run sequences and counts, whatever the run does after its plain
actions (fail, call, await)."""

from __future__ import annotations

import pytest

from flink_agents.runtime import AgentOptions, LocalRunner
from flink_agents.runtime._local import ERRORS
from tests.runtime import agents

CASES = {
    "plain": (agents.ChainAgent, [3, 4, 5, 6, 7, 8]),
    "fails after a plain action": (
        agents.FailingAgent,
        [{"id": i, "fail": i % 3 == 0} for i in range(1, 10)],
    ),
    "calls and awaits after a plain action": (
        agents.SyncThenAsyncAgent,
        [{"value": i, "call": i % 2 == 0} for i in range(1, 8)],
    ),
}


def run_all(agent, records, **options) -> dict:
    runner = LocalRunner(agent, options=AgentOptions(error_policy="error-output", **options))
    outputs = []
    for index, record in enumerate(records):
        outputs += runner.run(f"k{index % 2}", record)
    outputs += runner.finish()
    counts = {
        k: v
        for k, v in runner.engine.metrics.snapshot().items()
        if "PerSec" not in k and "Ms" not in k
    }
    return {
        "outputs": [o for o in outputs if not (isinstance(o, tuple) and o[0] is ERRORS)],
        "errors": [{k: v for k, v in e.items() if k != "error"} for e in runner.errors],
        "error texts": [str(e.get("error")) for e in runner.errors],
        "short-term": {k: s.short_term.data for k, s in runner._states.items()},
        "sensory": {k: s.sensory.data for k, s in runner._states.items()},
        "sequences": {k: s.stored_control.sequence for k, s in runner._states.items()},
        "steps": runner.steps,
        "counts": counts,
    }


@pytest.mark.parametrize("case", CASES)
def test_plain_paths_leave_what_stepping_leaves(case, tmp_path):
    agent, records = CASES[case]
    fast = run_all(agent, records)
    driven = run_all(agent, records, memory_snapshots=True)
    stepped = run_all(
        agent, records, event_log_level="standard", event_log_dir=str(tmp_path / "events")
    )
    assert fast["outputs"], "the case must produce outputs"
    assert bool(fast["errors"]) == (agent is agents.FailingAgent)
    assert fast == driven == stepped
