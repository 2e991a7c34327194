"""Runs of plain actions take a shorter path (``RunEngine.run_plain``, and for a new run of
a known key ``KeyDriver._run_plain`` and ``RunEngine.begin``, whose actions write straight
into the driver's caches and undo the writes when they fail): it must leave exactly what
stepping each action leaves. With the event log on, every action goes through
``RunEngine.step``; with memory snapshots on, new runs go through ``KeyDriver._drive``. The
three must agree on outputs, error records, memory, run sequences and counts, and with an
action log on the records it holds, whatever the run does after or during its plain
actions (fail, call, await, run a sub-agent)."""

from __future__ import annotations

import pytest

from flink_agents._ids import key_text
from flink_agents.runtime import AgentOptions, LocalRunner
from flink_agents.runtime._local import ERRORS
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal
from tests.runtime import agents, sub_agent_agents

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
    "writes, calls, writes": (agents.WritesAroundCallAgent, list(range(1, 9))),
    "writes, runs a sub-agent sharing its memory": (
        sub_agent_agents.SharingSyncCoordinator,
        ["tides", "moons", "tides", "forbidden", "moons"],
    ),
}


def run_all(agent, records, log=None, **options) -> dict:
    journal = None if log is None else ActionJournal(log, "job")
    runner = LocalRunner(
        agent, options=AgentOptions(error_policy="error-output", **options), journal=journal
    )
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
        "logged": _logged(journal, runner.keys),
    }


def _logged(journal, keys) -> dict:
    """The memory deltas of the action log's records, per key (event ids are random)."""
    if journal is None:
        return {}
    journal.flush()
    return {
        key: [
            (r.identity, r.sensory, r.short_term)
            for r in journal.log.key_records("job", key_text(key))
        ]
        for key in keys
    }


@pytest.mark.parametrize("logged", [False, True], ids=["no log", "action log"])
@pytest.mark.parametrize("case", CASES)
def test_plain_paths_leave_what_stepping_leaves(case, logged, tmp_path):
    agent, records = CASES[case]
    logs = [InMemoryActionLog() if logged else None for _ in range(3)]
    fast = run_all(agent, records, logs[0])
    driven = run_all(agent, records, logs[1], memory_snapshots=True)
    stepped = run_all(
        agent,
        records,
        logs[2],
        event_log_level="standard",
        event_log_dir=str(tmp_path / "events"),
    )
    assert fast["outputs"], "the case must produce outputs"
    failing = agent in (agents.FailingAgent, sub_agent_agents.SharingSyncCoordinator)
    assert bool(fast["errors"]) == failing
    if logged and agent not in (agents.ChainAgent, agents.FailingAgent):
        assert any(fast["logged"].values()), "the case must write action-log records"
    assert fast == driven == stepped


def test_an_action_stopped_by_a_base_exception_leaves_no_write_in_state():
    """The driver writes a callback's state back even when it ends in an exception that is
    not the action's failure (the process stops): a plain action writing straight into the
    caches must have its writes taken back first."""
    runner = LocalRunner(agents.StoppedAgent, options=AgentOptions())
    assert runner.run("k", "first") == ["first"]
    assert runner.run("k", "second") == ["second"]  # a key the driver knows: the plain path
    with pytest.raises(agents.Stop):
        runner.run("k", "stop")
    state = runner._states["k"]
    assert state.short_term.data["last"] == "second"
    assert "seen" not in state.sensory.data
