"""The fast lane for plain actions (``runtime/_plain.py``) means what the reference path
(``RunEngine.step``, one action at a time) means: every parity scenario runs on the local
runner with the lane on and with it off, and leaves the same outputs, errors, memory,
metrics and action-log records (or, for the ``fail``-policy scenarios, the same failure).

Scenarios without an action log of their own get one in a SQLite file (the local runner's
default is in memory, gone when the run ends), so that their records can be compared too.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from flink_agents.api import ActionExecutionError, AgentsExecutionEnvironment, EventScheduled
from flink_agents.plan import bind_plan, to_plan
from flink_agents.runtime import AgentOptions, LocalRunner, local_journal
from flink_agents.runtime._plain import PlainLane
from flink_agents.runtime.action_log import open_action_log
from flink_agents.runtime.journal import ActionJournal
from tests.runtime.agents import ChainAgent
from tests.runtime.async_agents import DurableAgent
from tests.runtime.flink.parity_scenarios import FAIL_PIPELINES, LONG_TERM, PIPELINES
from tests.runtime.flink.runners import Pipeline

LOG = "sqlite://{dir}/actions.db"


def observe(pipeline: Pipeline, work_dir: Path) -> dict[str, Any]:
    """Everything a run of ``pipeline`` on the local runner leaves that the lane could change."""
    if pipeline.options.get("action_log") is None:
        pipeline = dataclasses.replace(pipeline, options={**pipeline.options, "action_log": LOG})
    plan, options = pipeline.prepare(work_dir)
    environment = AgentsExecutionEnvironment.get_execution_environment(**options)
    builder = environment.from_list(pipeline.records, pipeline.key).apply(plan)
    failure = None
    try:
        outputs = builder.to_list()
        errors = builder.error_stream()
    except ActionExecutionError as error:
        outputs, errors, failure = None, None, str(error)
    runner = builder.runner
    metrics = runner.metrics.snapshot()
    return {
        "outputs": outputs,
        "errors": errors,
        "failure": failure,
        "steps": runner.steps,
        "memory": {
            repr(key): (runner.runs(key), runner.short_term_memory(key), runner.sensory_memory(key))
            for key in runner.keys
        },
        # Counts, not rates or timings (which differ from run to run).
        "metrics": {name: value for name, value in metrics.items() if type(value) is int},
        "records": log_records(options["action_log"]),
    }


def log_records(url: str) -> list[tuple[Any, ...]]:
    """The action log's records and interrupted actions, without what differs between two
    runs of the same input: the generated job name (and the event ids derived from it), the
    epoch, the calls' durations, and the due times and ids of scheduled events."""
    if url == "none":
        return []
    found = []
    with open_action_log(url) as log:
        for job in log.jobs():
            for key in sorted(log.run_index(job)):
                for record in log.key_records(job, key):
                    identity = record.identity
                    found.append(
                        (
                            "record",
                            identity.key,
                            identity.run_sequence,
                            identity.step,
                            identity.action,
                            record.sensory,
                            record.short_term,
                            [_event(event) for event in record.events],
                            [_call(call) for call in record.calls],
                            record.previous,
                        )
                    )
                for interrupted in log.key_interrupted(job, key):
                    identity = interrupted.identity
                    found.append(
                        (
                            "interrupted",
                            identity.key,
                            identity.run_sequence,
                            identity.step,
                            identity.action,
                            [_call(call) for call in interrupted.calls],
                        )
                    )
    return found


def _event(event: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(event, EventScheduled):  # due a delay after the wall clock's now
        exclude = {"id": True, "due_ms": True, "event": {"id"}}
        return type(event).__name__, event.model_dump(exclude=exclude)
    return type(event).__name__, event.model_dump(exclude={"id"})


def _call(call: Any) -> tuple[Any, ...]:
    return call.index, call.function, call.args_digest, call.result, repr(call.error)


def has_plain_action(pipeline: Pipeline, work_dir: Path) -> bool:
    """Whether ``pipeline``'s agent has an action the lane can run (not ``async def``)."""
    plan, _ = pipeline.prepare(work_dir / "plan")
    return any(not action.is_async for action in bind_plan(to_plan(plan)).actions)


def counting_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the lane's passes over a run's queue (one element per pass)."""
    passes: list[int] = []
    plain_actions = PlainLane._plain_actions

    def counted(self: PlainLane, *args: Any) -> Any:
        passes.append(1)
        return plain_actions(self, *args)

    monkeypatch.setattr(PlainLane, "_plain_actions", counted)
    return passes


@pytest.mark.parametrize("pipeline", [*PIPELINES, LONG_TERM], ids=lambda p: p.name)
def test_the_plain_lane_leaves_what_the_reference_path_leaves(pipeline, tmp_path, monkeypatch):
    passes = counting_passes(monkeypatch)
    # Both in the same directory (its path is in some calls' arguments), one after the other.
    work_dir = tmp_path / "run"
    with monkeypatch.context() as patched:
        patched.setattr(PlainLane, "plain_lane", False)
        reference = observe(pipeline, work_dir)
    assert not passes, "the switch must keep every action on the reference path"
    work_dir.rename(tmp_path / "reference")
    lane = observe(pipeline, work_dir)
    # (An agent whose every action is ``async def`` leaves the lane nothing to run.)
    assert passes or not has_plain_action(pipeline, tmp_path), "the scenario must take the lane"
    assert reference["outputs"], "the scenario must produce outputs"
    assert [what for what in reference if lane[what] != reference[what]] == []
    assert lane == reference


@pytest.mark.parametrize("pipeline", FAIL_PIPELINES, ids=lambda p: p.name)
def test_the_plain_lane_fails_a_job_as_the_reference_path_does(pipeline, tmp_path, monkeypatch):
    """Only the failure compares: how far other keys' async runs got before the failure
    stopped the job depends on their calls' timing, on either path."""
    passes = counting_passes(monkeypatch)
    with monkeypatch.context() as patched:
        patched.setattr(PlainLane, "plain_lane", False)
        reference = observe(pipeline, tmp_path / "reference")
    assert not passes
    lane = observe(pipeline, tmp_path / "lane")
    assert passes
    assert reference["failure"] is not None
    assert lane["failure"] == reference["failure"]


@pytest.mark.parametrize(
    ("agent", "records", "asked"),
    [
        # Each run of plain actions asks once, at its start; a run of ``async def``
        # actions never reaches the lane, so it asks nothing (``step`` looks up each action).
        (ChainAgent, [1, 2, 3], 3),
        (DurableAgent, ["a", "b"], 0),
    ],
    ids=["plain", "async"],
)
def test_the_lane_asks_the_journal_only_before_plain_actions(agent, records, asked, monkeypatch):
    questions: list[tuple[Any, int]] = []
    may_replay = ActionJournal.may_replay

    def counted(self: ActionJournal, key: Any, run_sequence: int) -> bool:
        questions.append((key, run_sequence))
        return may_replay(self, key, run_sequence)

    monkeypatch.setattr(ActionJournal, "may_replay", counted)
    runner = LocalRunner(agent, journal=local_journal(AgentOptions()))
    for n, record in enumerate(records):
        runner.run(f"k{n % 2}", record)
    runner.finish()
    assert len(runner.keyed_outputs) == len(records)
    assert len(questions) == asked
