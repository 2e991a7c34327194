"""The run engine step by step: start, step, finished, end, failures and parked runs."""

import pickle
import uuid
from collections import deque

import pytest

from flink_agents.api import (
    ActionExecutionError,
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents.memory import DictState, FlatMemory, to_dict
from flink_agents.plan import bind_plan, compile_agent, validate_plan_data
from flink_agents.runtime import AgentOptions, PendingAction, RunEngine, RunState, StepResult
from flink_agents.runtime._persisted import decode_run, encode_run
from tests.runtime import agents


def engine_for(agent, **options) -> RunEngine:
    return RunEngine(bind_plan(compile_agent(agent)), AgentOptions(**options))


def snapshot(state: DictState) -> dict:
    return to_dict(FlatMemory(state).root())


def run_to_end(engine, run, sensory, short_term) -> list[StepResult]:
    results = []
    while not run.finished:
        results.append(engine.step(run, sensory, short_term))
    return results


def test_start_queues_the_input_event_for_the_input_actions():
    run = engine_for(agents.TwoListenersAgent).start("k", 3, "record")
    assert (run.key, run.sequence, run.input, run.steps) == ("k", 3, "record", 0)
    assert [p.action for p in run.queue] == ["second", "first"]
    assert all(isinstance(p.event, InputEvent) and p.event.input == "record" for p in run.queue)
    assert run.queue[0].event is run.queue[1].event
    assert not run.finished


def test_start_without_input_actions_is_already_finished():
    data = compile_agent(agents.ChainAgent).model_dump()
    data["actions"] = data["actions"][1:]
    engine = RunEngine(bind_plan(validate_plan_data(data)))
    assert engine.start("k", 1, 5).finished


def test_step_runs_one_action_and_reports_what_it_did():
    engine = engine_for(agents.ChainAgent)
    sensory, short_term = DictState(), DictState()
    run = engine.start("k", 1, 21)

    first = engine.step(run, sensory, short_term)
    assert (first.action, first.step, first.outputs) == ("double", 1, ())
    assert [type(e) for e in first.events] == [agents.Doubled]
    assert first.events[0].value == 42
    assert first.short_term.is_empty() and not first.sensory.is_empty()
    assert snapshot(sensory) == {"original": 21}
    assert [(p.action, p.event) for p in run.queue] == [("label", first.events[0])]

    second = engine.step(run, sensory, short_term)
    assert (second.action, second.step) == ("label", 2)
    assert snapshot(short_term) == {"last": 42}

    third = engine.step(run, sensory, short_term)
    assert (third.action, third.step, third.outputs) == ("emit", 3, ("21->42",))
    assert isinstance(third.events[0], OutputEvent)
    assert run.finished and run.steps == 3


def test_step_deltas_replay_to_the_same_memory():
    """Applying every step's deltas to empty maps rebuilds the maps the engine wrote."""
    engine = engine_for(agents.SensoryAgent)
    sensory, short_term = DictState(), DictState()
    results = run_to_end(engine, engine.start("k", 1, "x"), sensory, short_term)
    replayed = DictState()
    for result in results:
        result.sensory.apply_to(replayed)
    assert replayed.data == sensory.data
    assert snapshot(replayed) == {"seen": "x", "nested": {"value": "x"}}


def test_end_clears_sensory_memory_and_the_queue():
    engine = engine_for(agents.ChainAgent)
    sensory, short_term = DictState(), DictState()
    run = engine.start("k", 1, 1)
    engine.step(run, sensory, short_term)
    engine.end(run, sensory)
    assert run.finished
    assert len(sensory) == 0
    assert snapshot(short_term) == {}


def test_failed_step_applies_nothing_and_keeps_the_pending_action_at_the_head():
    engine = engine_for(agents.FailingAgent)
    sensory, short_term = DictState(), DictState()
    run = engine.start("k", 1, {"id": 1, "fail": True})
    engine.step(run, sensory, short_term)
    head = run.queue[0]
    before = (dict(sensory.data), dict(short_term.data), list(run.queue), run.steps)

    with pytest.raises(ActionExecutionError, match="boom") as caught:
        engine.step(run, sensory, short_term)
    assert caught.value.action == "explode"
    assert (dict(sensory.data), dict(short_term.data), list(run.queue), run.steps) == before
    assert run.queue[0] is head
    assert snapshot(sensory) == {"kept": 1}
    assert snapshot(short_term) == {"kept": 1}

    with pytest.raises(ActionExecutionError):  # retrying fails the same way
        engine.step(run, sensory, short_term)
    assert run.queue[0] is head


def test_step_limit_counts_completed_steps():
    engine = engine_for(agents.LoopAgent, max_steps_per_run=3)
    sensory, short_term = DictState(), DictState()
    run = engine.start("k", 1, None)
    for _ in range(3):
        engine.step(run, sensory, short_term)
    with pytest.raises(ActionExecutionError, match="exceeded 3 steps"):
        engine.step(run, sensory, short_term)
    assert run.steps == 3


def run_plain_to_end(engine, run, sensory, short_term):
    """``run_plain`` until it stops, then ``step`` for what it leaves (as the driver does)."""
    outputs, steps = [], 0
    while not run.finished:
        done, sent, outcome = engine.run_plain(run, sensory, short_term)
        outputs += sent
        steps += done
        if outcome is None and not run.finished:
            outcome = engine.step(run, sensory, short_term)
        if outcome is not None:
            result = engine.complete_blocking(run, outcome)
            engine.metrics.action_completed(result.action, len(result.events), result.replayed)
            outputs += result.outputs
            steps += 1
    return outputs, steps


def counts(metrics) -> dict:
    return {k: v for k, v in metrics.snapshot().items() if "PerSec" not in k and "Ms" not in k}


@pytest.mark.parametrize(
    ("agent", "record"),
    [
        (agents.ChainAgent, 21),
        (agents.SensoryAgent, "x"),
        (agents.FailingAgent, {"id": 7}),
        (agents.TwoListenersAgent, "r"),
        (agents.SyncThenAsyncAgent, {"value": 2}),
        (agents.SyncThenAsyncAgent, {"value": 2, "call": True}),
    ],
)
def test_run_plain_leaves_what_step_by_step_leaves(agent, record):
    """Outputs, memory (flattened entries, markers included) and the run's counters are
    those of stepping the same run one action at a time."""
    stepped_engine, plain_engine = engine_for(agent), engine_for(agent)
    stepped_maps, plain_maps = (DictState(), DictState()), (DictState(), DictState())
    stepped_run = stepped_engine.start("k", 1, record)
    plain_run = plain_engine.start("k", 1, record)
    stepped = []
    while not stepped_run.finished:
        result = stepped_engine.step_blocking(stepped_run, *stepped_maps)
        stepped_engine.metrics.action_completed(result.action, len(result.events), False)
        stepped.append(result)
    outputs, steps = run_plain_to_end(plain_engine, plain_run, *plain_maps)
    assert outputs == [o for r in stepped for o in r.outputs]
    assert steps == len(stepped) == plain_run.steps == stepped_run.steps
    assert [m.data for m in plain_maps] == [m.data for m in stepped_maps]
    assert plain_run.sensory_written == stepped_run.sensory_written
    assert counts(plain_engine.metrics) == counts(stepped_engine.metrics)


def test_run_plain_stops_at_an_async_action():
    engine = engine_for(agents.SyncThenAsyncAgent)
    sensory, short_term = DictState(), DictState()
    run = engine.start("k", 1, {"value": 2})
    steps, outputs, outcome = engine.run_plain(run, sensory, short_term)
    assert (steps, outputs, outcome) == (1, [("prepared", 2)], None)
    assert [p.action for p in run.queue] == ["finish"]
    assert snapshot(short_term) == {"prepared": 2}


def test_run_plain_returns_a_failure_with_the_actions_before_it_applied():
    engine = engine_for(agents.FailingAgent)
    sensory, short_term = DictState(), DictState()
    run = engine.start("k", 1, {"id": 1, "fail": True})
    steps, outputs, failure = engine.run_plain(run, sensory, short_term)
    assert (steps, outputs) == (1, [])
    assert isinstance(failure, ActionExecutionError)
    assert failure.action == "explode" and isinstance(failure.__cause__, ValueError)
    assert [p.action for p in run.queue] == ["explode"] and run.steps == 1
    assert snapshot(sensory) == {"kept": 1}
    assert snapshot(short_term) == {"kept": 1}


def test_run_plain_stops_at_the_step_limit_for_step_to_fail():
    engine = engine_for(agents.LoopAgent, max_steps_per_run=3)
    sensory, short_term = DictState(), DictState()
    run = engine.start("k", 1, None)
    assert engine.run_plain(run, sensory, short_term) == (3, [], None)
    with pytest.raises(ActionExecutionError, match="exceeded 3 steps"):
        engine.step(run, sensory, short_term)


def test_async_action_step():
    engine = engine_for(agents.AsyncAgent)
    result = engine.step(engine.start("k", 1, 4), DictState(), DictState())
    assert result.outputs == (4,)


def test_run_state_survives_pickling_mid_run():
    engine = engine_for(agents.ChainAgent)
    sensory, short_term = DictState(), DictState()
    run = engine.start("k", 1, 5)
    engine.step(run, sensory, short_term)

    parked = pickle.loads(pickle.dumps(run))
    assert isinstance(parked, RunState)
    assert (parked.key, parked.sequence, parked.input, parked.steps) == ("k", 1, 5, 1)
    assert parked.queue == run.queue
    assert isinstance(parked.queue[0], PendingAction)

    restored_sensory = pickle.loads(pickle.dumps(sensory))
    results = run_to_end(engine, parked, restored_sensory, short_term)
    assert [r.action for r in results] == ["label", "emit"]
    assert results[-1].outputs == ("5->10",)
    assert parked.steps == 3
    assert len(run.queue) == 1  # the original is untouched


@pytest.mark.parametrize("given_id", [False, True])
def test_a_run_at_its_input_keeps_its_input_event_as_an_id(given_id):
    """A run parked on its first action (the common case) keeps its ``InputEvent`` in state
    as an id: it comes back equal, with the same id and set fields, one event for every
    listener, and its pickle is smaller than the run's own."""
    if given_id:  # with an action log the input event's id is given, not drawn
        record = {"n": 1}
        event = InputEvent(id=uuid.UUID(int=12345), input=record)
        queue = deque(PendingAction(name, event) for name in ("second", "first"))
        run = RunState("k", 7, record, queue)
    else:
        run = engine_for(agents.TwoListenersAgent).start("k", 7, {"n": 1})
    run.parked = True

    stored = pickle.dumps(encode_run(run))
    restored = decode_run(pickle.loads(stored))
    assert restored == run
    first, second = (pending.event for pending in restored.queue)
    assert first is second and first.input is restored.input
    assert first.id == run.queue[0].event.id
    assert first.model_fields_set == run.queue[0].event.model_fields_set
    assert len(stored) < len(pickle.dumps(run))


class ExternalIds(Agent):
    @action(InputEvent)
    def work(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=ctx.external_id()))


def _external_id_of_first_run(**engine_args) -> str:
    engine = RunEngine(
        bind_plan(compile_agent(ExternalIds)), AgentOptions(action_log="none"), **engine_args
    )
    run = engine.start("k", 1, "record")
    [result] = run_to_end(engine, run, DictState(), DictState())
    return result.outputs[0]


def test_without_a_log_ids_of_writes_outside_flink_derive_from_the_job():
    """An action that runs again after a restore (a new engine, the same job) overwrites the
    items it wrote; engines of different jobs, or without a job, do not collide."""
    assert _external_id_of_first_run(job_id="job-a") == _external_id_of_first_run(job_id="job-a")
    assert _external_id_of_first_run(job_id="job-a") != _external_id_of_first_run(job_id="job-b")
    assert _external_id_of_first_run() != _external_id_of_first_run()
