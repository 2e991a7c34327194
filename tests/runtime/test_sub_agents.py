"""Sub-agents: an action runs another agent for its key, as one of its steps; its outputs
come back to the action, its memory commits with it, and a restore replays it."""

from __future__ import annotations

import pytest

from flink_agents.api import ActionExecutionError, FlinkAgentsError
from flink_agents.plan import plan_from_yaml
from flink_agents.runtime import AgentOptions, LocalRunner, local_journal
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal
from tests.runtime.sub_agent_agents import CALLS, Coordinator, Crash, SyncCoordinator


@pytest.fixture(autouse=True)
def _clear_calls():
    CALLS.clear()


def answer(topic: str, asked: int) -> dict:
    return {"answer": f"facts about {topic}", "asked": asked}


def test_the_sub_agents_outputs_come_back_to_the_action_not_to_the_job():
    runner = LocalRunner(Coordinator)
    assert runner.run("k", {"topic": "tides"}) == [
        {"found": [answer("tides", 1)], "sensory": []}  # the sub-run's sensory memory is its own
    ]
    assert runner.sensory_memory("k") == {}


@pytest.mark.parametrize("log", ["memory://", "none"])
def test_its_own_short_term_memory_lasts_per_key_out_of_the_callers_sight(log):
    options = AgentOptions(action_log=log)
    runner = LocalRunner(Coordinator, options=options, journal=local_journal(options))
    runner.run("k", {"topic": "tides"})
    assert runner.run("k", {"topic": "moons"})[0]["found"] == [answer("moons", 2)]
    assert runner.run("other", {"topic": "moons"})[0]["found"] == [answer("moons", 1)]
    assert runner.short_term_memory("k") == {"last": "facts about moons"}


def test_a_shared_short_term_memory_is_the_callers():
    runner = LocalRunner(Coordinator)
    runner.run("k", {"topic": "tides", "shared": True})
    runner.run("k", {"topic": "moons", "shared": True})
    assert runner.short_term_memory("k") == {"asked": 2, "last": "facts about moons"}


def test_a_sync_action_runs_a_sub_agent_too():
    assert LocalRunner(SyncCoordinator).run("k", "tides") == [[answer("tides", 1)]]


def test_a_sub_agents_failure_is_the_calling_actions_with_nothing_applied():
    runner = LocalRunner(Coordinator)
    with pytest.raises(ActionExecutionError) as caught:
        runner.run("k", {"topic": "broken"})
    assert caught.value.action == "coordinate"
    cause = caught.value.cause
    assert isinstance(cause, ActionExecutionError)
    assert cause.action == "report"
    assert "the report cannot be written" in str(caught.value)
    assert runner.short_term_memory("k") == {}  # the sub-run's writes went with the action


def test_running_a_resource_that_is_not_a_sub_agent_is_a_clear_error():
    plan = plan_from_yaml(
        """
name: wrong
actions:
  - name: go
    function: tests.runtime.test_sub_agents:run_a_tool
    listen_to: [InputEvent]
resources:
  - name: adder
    type: tool
    provider: flink_agents.api:Tool.from_ref
    args: {function: "tests.integrations.chat_agents:add"}
"""
    )
    with pytest.raises(ActionExecutionError) as caught:
        LocalRunner(plan).run("k", 1)
    assert isinstance(caught.value.cause, FlinkAgentsError)
    assert "not a SubAgent" in str(caught.value.cause)


def run_a_tool(event, ctx):
    ctx.run_agent("adder", event.input)


def test_a_plan_file_declares_a_sub_agent(tmp_path):
    researcher = tmp_path / "researcher.yaml"
    researcher.write_text(
        """
name: researcher
actions:
  - name: research
    function: tests.runtime.sub_agent_agents:Researcher.research
    listen_to: [InputEvent]
  - name: report
    function: tests.runtime.sub_agent_agents:Researcher.report
    listen_to: [tests.runtime.sub_agent_agents:Found]
"""
    )
    plan = plan_from_yaml(
        f"""
name: coordinator
actions:
  - name: coordinate
    function: tests.runtime.sub_agent_agents:Coordinator.coordinate
    listen_to: [InputEvent]
resources:
  - name: researcher
    type: tool
    provider: flink_agents.api:SubAgent
    args: {{agent: "{researcher}", description: "Looks a topic up"}}
"""
    )
    assert LocalRunner(plan).run("k", {"topic": "tides"})[0]["found"] == [answer("tides", 1)]


def restored(log, checkpoint) -> tuple[LocalRunner, ActionJournal]:
    journal = ActionJournal(log, "job")
    runner = LocalRunner(Coordinator, journal=journal)
    runner.restore(checkpoint)
    return runner, journal


def test_a_restore_after_the_sub_run_replays_it_without_calling_again():
    log = InMemoryActionLog()
    first_attempt = ActionJournal(log, "job")
    first = LocalRunner(Coordinator, journal=first_attempt)
    checkpoint = first.snapshot()
    with pytest.raises(Crash):  # the calling action dies after its sub-run completed
        first.run("k", {"topic": "tides", "crash": True})
    first_attempt.flush()

    second, journal = restored(log, checkpoint)
    assert second.run("k", {"topic": "tides", "crash": True}) == [
        {"found": [answer("tides", 1)], "sensory": []}
    ]
    assert CALLS["tides"] == 1
    assert journal.replayed_actions == 1  # the sub-agent's research action
    assert second.short_term_memory("k") == {"last": "facts about tides"}


def test_a_restore_inside_the_sub_run_replays_its_completed_actions():
    log = InMemoryActionLog()
    first_attempt = ActionJournal(log, "job")
    first = LocalRunner(Coordinator, journal=first_attempt)
    checkpoint = first.snapshot()
    with pytest.raises(Crash):  # the sub-agent's second action dies
        first.run("k", {"topic": "crash-in-report"})
    first_attempt.flush()

    second, journal = restored(log, checkpoint)
    assert second.run("k", {"topic": "crash-in-report"})[0]["found"] == [
        answer("crash-in-report", 1)
    ]
    assert CALLS["crash-in-report"] == 1
    assert journal.replayed_actions == 1


def test_sub_runs_of_many_keys_overlap_and_keep_their_order():
    runner = LocalRunner(Coordinator)
    outputs = []
    for n in range(3):
        for key in ("a", "b", "c"):
            outputs += runner.feed(key, {"topic": f"{key}{n}"})
    outputs += runner.finish()
    assert len(outputs) == 9
    for key in ("a", "b", "c"):
        assert runner.short_term_memory(key) == {"last": f"facts about {key}2"}


def test_a_sub_agents_actions_count_in_the_callers_metrics():
    runner = LocalRunner(Coordinator)
    runner.run("k", {"topic": "tides"})
    metrics = runner.metrics.snapshot()
    assert metrics["action.coordinate.numOfActionsExecuted"] == 1
    assert metrics["action.research.numOfActionsExecuted"] == 1
    assert metrics["action.report.numOfActionsExecuted"] == 1
    assert metrics["numOfActionsExecuted"] == 3
    assert metrics["numOfDurableCalls"] == 1
