"""``await ctx.wait_for(EventType, timeout=...)`` on the local runner: the run is set aside
while the key's later inputs run, and resumes once, with the signal that answered it or
at its timeout (None, or ``WaitTimedOut``), after a restore too; a signal no run waits for
starts a run of its own; the answer is recorded in the action log, so a run restored after
a failure gets the same one; ``with_signals`` on ``from_list``; misuse. The scheduled
restore test runs waits across a savepoint and a failure on MiniCluster in both execution
modes, with signals from a second stream (``test_scheduled_restore``)."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest

from flink_agents.api import ActionExecutionError, AgentsExecutionEnvironment, FlinkAgentsError
from flink_agents.runtime import LocalRunner
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal
from tests.runtime.scheduling_agents import CALLS
from tests.runtime.waiting_agents import (
    Approval,
    MisusesWaitFor,
    Note,
    Refunds,
    UrgentApproval,
)

HOUR = timedelta(hours=1)


@pytest.fixture(autouse=True)
def _fresh_calls():
    CALLS.clear()
    yield
    CALLS.clear()


def test_a_signal_answers_the_waiting_run_while_later_inputs_ran_meanwhile():
    runner = LocalRunner(Refunds)
    assert runner.run("ann", {"refund": 1, "amount": 500}) == []  # set aside: the key is free
    assert runner.run("ann", {"refund": 2, "amount": 20}) == [{"refund": 2, "approved": True}]
    assert runner.advance_time(3 * HOUR) == []
    # It resumes with the signal, its own sensory memory and the short-term memory of now.
    assert runner.signal("ann", Approval(refund=1, approved=False)) == [
        {"refund": 1, "approved": False, "answer_for": 1, "count": 2}
    ]
    assert runner.advance_time(10 * HOUR) == []  # its timeout is gone with it
    assert runner.finish() == []
    assert CALLS["answered 1"] == 1
    assert runner.sensory_memory("ann") == {}
    metrics = runner.metrics.snapshot()
    assert metrics["numOfWaits"] == 1
    assert metrics["numOfSignals"] == metrics["numOfWaitsAnswered"] == 1
    assert metrics["numOfWaitsTimedOut"] == metrics["numOfSleeps"] == 0


def test_the_timeout_returns_none_or_raises_when_asked():
    runner = LocalRunner(Refunds)
    runner.run("ann", {"refund": 1, "amount": 500})
    runner.run("bob", {"refund": 2, "amount": 500, "hours": 2, "strict": True})
    assert runner.advance_time(2 * HOUR - timedelta(seconds=1)) == []
    assert runner.advance_time(HOUR) == [
        {"refund": 2, "error": "no Approval signal came before the wait's timeout"}
    ]
    assert runner.advance_time(2 * HOUR) == [
        {"refund": 1, "approved": None, "answer_for": None, "count": 1}
    ]
    # Too late: no run waits any more, so the signal starts a run of its own.
    assert runner.signal("ann", Approval(refund=1, approved=True)) == [{"unexpected": 1}]
    assert runner.metrics.snapshot()["numOfWaitsTimedOut"] == 2


def test_a_signal_no_run_waits_for_starts_a_run_of_its_listeners():
    runner = LocalRunner(Refunds)
    assert runner.signal("ann", Approval(refund=7, approved=True)) == [{"unexpected": 7}]
    runner.run("ann", {"refund": 1, "amount": 500})
    # A signal of another type does not answer the wait.
    assert runner.signal("ann", Note(text="hello")) == [{"note": "hello"}]
    assert runner.signal("bob", Approval(refund=1, approved=True)) == [{"unexpected": 1}]
    # A subclass of the type waited for does.
    assert runner.signal("ann", UrgentApproval(refund=1, approved=True)) == [
        {"refund": 1, "approved": True, "answer_for": 1, "count": 1}
    ]
    assert runner.metrics.snapshot()["numOfInputRunsStarted"] == 4  # the answer starts none


def test_a_keys_waits_for_one_type_are_answered_in_the_order_they_began():
    runner = LocalRunner(Refunds)
    runner.run("ann", {"refund": 1, "amount": 500, "hours": 9})
    runner.run("ann", {"refund": 2, "amount": 500, "hours": 3})
    # (Each counts itself when it completes: a set-aside action's writes are not kept.)
    assert runner.signal("ann", Approval(refund=10, approved=True)) == [
        {"refund": 1, "approved": True, "answer_for": 10, "count": 1}
    ]
    assert runner.signal("ann", Approval(refund=20, approved=False)) == [
        {"refund": 2, "approved": False, "answer_for": 20, "count": 2}
    ]


def test_a_wait_without_a_timeout_outlasts_the_end_of_input(caplog):
    runner = LocalRunner(Refunds)
    runner.run("ann", {"refund": 1, "amount": 500, "hours": None})
    runner.run("bob", {"refund": 2, "amount": 500, "hours": 1})
    assert runner.advance_time(1000 * HOUR) == [
        {"refund": 2, "approved": None, "answer_for": None, "count": 1}
    ]
    with caplog.at_level(logging.INFO, logger="flink_agents.runtime._driver"):
        assert runner.finish() == []
    assert "0 scheduled event(s) and 1 waiting run(s)" in caplog.text
    assert runner.signal("ann", Approval(refund=1, approved=True)) == [
        {"refund": 1, "approved": True, "answer_for": 1, "count": 1}
    ]


def test_the_end_of_input_times_out_the_waits_with_a_timeout():
    runner = LocalRunner(Refunds)
    runner.run("ann", {"refund": 1, "amount": 500, "hours": 48})
    assert runner.finish() == [{"refund": 1, "approved": None, "answer_for": None, "count": 1}]


@pytest.mark.parametrize("logged", [True, False])
def test_the_call_before_the_wait_is_made_again_only_without_the_action_log(logged):
    journal = ActionJournal(InMemoryActionLog(), "job") if logged else None
    runner = LocalRunner(Refunds, journal=journal)
    runner.run("ann", {"refund": 1, "amount": 500})
    assert CALLS["ask 1"] == 1
    runner.signal("ann", Approval(refund=1, approved=True))
    assert CALLS["ask 1"] == (1 if logged else 2)


def test_a_waiting_run_survives_a_restore_and_is_answered_once():
    first = LocalRunner(Refunds)
    first.run("ann", {"refund": 1, "amount": 500, "hours": None})
    first.run("bob", {"refund": 2, "amount": 500, "hours": 2})
    checkpoint = first.snapshot()
    second = LocalRunner(Refunds)
    second.restore(checkpoint)
    assert second.advance_time(3 * HOUR) == [
        {"refund": 2, "approved": None, "answer_for": None, "count": 1}
    ]
    assert second.signal("ann", Approval(refund=1, approved=True)) == [
        {"refund": 1, "approved": True, "answer_for": 1, "count": 1}
    ]
    assert second.signal("ann", Approval(refund=1, approved=True)) == [{"unexpected": 1}]


def test_a_run_restored_after_a_failure_gets_the_answer_the_action_log_recorded():
    # The answer is recorded before the action goes on; the action then fails the job. The
    # job restores the checkpoint in which the run still waited, and another signal comes
    # first this time: the run still gets the recorded answer.
    log = InMemoryActionLog()
    first = LocalRunner(Refunds, journal=ActionJournal(log, "job"))
    first.run("ann", {"refund": 1, "amount": 500, "fail_after_answer": True})
    checkpoint = first.snapshot()
    with pytest.raises(ActionExecutionError):
        first.signal("ann", Approval(refund=100, approved=True))
    second = LocalRunner(Refunds, journal=ActionJournal(log, "job"))
    second.restore(checkpoint)
    assert second.signal("ann", Approval(refund=200, approved=False)) == [
        {"refund": 1, "approved": True, "answer_for": 100, "count": 1}
    ]
    assert CALLS["ask 1"] == 1


def test_a_retry_after_the_answer_gets_the_same_answer_without_waiting_again():
    options = AgentOptions(error_policy="retry", retry_initial_backoff_ms=10)
    runner = LocalRunner(Refunds, options=options)
    runner.run("ann", {"refund": 1, "amount": 500, "fail_after_answer": True})
    assert runner.signal("ann", Approval(refund=5, approved=True)) == [
        {"refund": 1, "approved": True, "answer_for": 5, "count": 1}
    ]
    assert CALLS["answered 1"] == 2
    assert runner.metrics.snapshot()["numOfWaits"] == 1


def test_signals_of_a_second_list_and_bad_signal_records_go_to_the_error_output():
    env = AgentsExecutionEnvironment.get_execution_environment()
    requests = [
        {"customer": "ann", "refund": 1, "amount": 500},
        {"customer": "bob", "refund": 2, "amount": 900, "hours": 1},
    ]
    approvals = [
        {"customer": "ann", "refund": 1, "approved": True},  # the key's column is left out
        {"customer": "cid", "refund": 3, "approved": True},
        {"customer": "ann", "approved": True},
        "not a record",
    ]
    builder = (
        env.from_list(requests, "customer")
        .with_signals(approvals, key_selector="customer", event_type=Approval)
        .apply(Refunds)
    )
    assert builder.to_list() == [
        {"refund": 1, "approved": True, "answer_for": 1, "count": 1},
        {"unexpected": 3},
        {"refund": 2, "approved": None, "answer_for": None, "count": 1},
    ]
    errors = builder.error_stream()
    assert [e["kind"] for e in errors] == ["rejected", "rejected"]
    assert "refund\n  Field required" in errors[0]["reason"]
    assert errors[1]["input"] == "not a record"
    # Events as they are, without event_type; anything else is rejected.
    events = [("ann", Approval(refund=1, approved=False)), ("ann", {"refund": 1})]
    builder = (
        env.from_list(requests[:1], "customer")
        .with_signals(events, key_selector=lambda pair: pair[0])
        .apply(Refunds)
    )
    assert builder.to_list() == [{"refund": 1, "approved": None, "answer_for": None, "count": 1}]
    assert "a signal must be an Event, got tuple" in builder.error_stream()[0]["reason"]


def test_the_local_environment_takes_signals_one_at_a_time():
    env = AgentsExecutionEnvironment.get_execution_environment()
    requests = [{"customer": "ann", "refund": 1, "amount": 500}]
    builder = env.from_list(requests, "customer").apply(Refunds)
    env.signal("ann", Approval(refund=1, approved=True))
    env.signal("cid", Approval(refund=3, approved=False))
    assert builder.to_list() == [
        {"refund": 1, "approved": True, "answer_for": 1, "count": 1},
        {"unexpected": 3},
    ]
    with pytest.raises(FlinkAgentsError, match="a signal is an Event, got dict"):
        env.signal("ann", {"refund": 1})
    with pytest.raises(FlinkAgentsError, match="not hashable"):
        env.signal(["ann"], Approval(refund=1, approved=True))


def test_with_signals_takes_only_an_event_class():
    env = AgentsExecutionEnvironment.get_execution_environment()
    with pytest.raises(
        FlinkAgentsError, match="event_type must be an Event class, got <class 'dict'>"
    ):
        env.from_list([]).with_signals([], "customer", event_type=dict)


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("not-an-event", "FlinkAgentsError: wait_for takes an Event class, got <class 'dict'>"),
        ("negative", "FlinkAgentsError: wait_for's timeout must not be negative"),
        ("not-a-timedelta", "TypeError: wait_for's timeout is a timedelta, got int"),
    ],
)
def test_misuse_fails_clearly(how, says):
    [error] = LocalRunner(MisusesWaitFor).run("k", how)
    assert says in error


def test_the_event_log_shows_the_wait_and_the_signal_that_answered_it(tmp_path):
    options = AgentOptions(event_log_level="standard", event_log_dir=str(tmp_path))
    runner = LocalRunner(Refunds, options=options)
    runner.run("ann", {"refund": 1, "amount": 500})
    runner.signal("ann", Approval(refund=1, approved=True))
    runner.engine.event_log.close()
    lines = [json.loads(line) for f in sorted(tmp_path.rglob("*.jsonl*")) for line in f.open()]
    refunds = [(r["outcome"], r.get("signal")) for r in lines if r.get("action") == "refund"]
    assert refunds == [("waiting", "Approval"), ("succeeded", None)]
    [signal] = [r for r in lines if r.get("source") == "signal"]
    assert (signal["event_type"], signal["run"]) == ("Approval", 1)
