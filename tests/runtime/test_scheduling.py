"""Scheduled events (``ctx.schedule``, ``cancel_scheduled``, ``scheduled``) on the local runner:
its simulated clock, the end of input, restores and replays. The parity suite runs the same
on MiniCluster in both execution modes (``parity_scenarios.scheduling_records``)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from flink_agents.runtime import LocalExecutionEnvironment, LocalRunner
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal
from tests.runtime.scheduling_agents import (
    CALLS,
    Crash,
    Delegates,
    FollowsUp,
    FollowUp,
    Forever,
    Misuses,
    PaysThenSchedules,
    Waits,
)

DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def _fresh_calls():
    CALLS.clear()
    yield
    CALLS.clear()


def test_a_follow_up_fires_once_when_the_clock_reaches_it():
    runner = LocalRunner(FollowsUp)
    [planned] = runner.run("k", {"n": 1, "days": 3})
    assert planned["pending"] == ["follow-up 1"]
    assert runner.advance_time(2 * DAY) == []
    assert runner.advance_time(DAY + timedelta(seconds=1)) == [
        {"followed": "follow-up 1", "pending": []}
    ]
    assert runner.short_term_memory("k")["followed"] == ["follow-up 1"]
    assert runner.advance_time(30 * DAY) == []
    assert runner.runs("k") == 2  # the input's run and the follow-up's
    metrics = runner.metrics.snapshot()
    assert (metrics["numOfEventsScheduled"], metrics["numOfScheduledEventsFired"]) == (1, 1)
    assert metrics["numOfInputRunsStarted"] == 2


def test_due_events_fire_in_due_order_with_the_memory_of_their_time():
    runner = LocalRunner(FollowsUp)
    for n, days in [(1, 3), (2, 1), (3, 2)]:
        runner.run("k", {"n": n, "days": days})
    outputs = runner.advance_time(4 * DAY)
    assert outputs == [
        {"followed": "follow-up 2", "pending": ["follow-up 3", "follow-up 1"]},
        {"followed": "follow-up 3", "pending": ["follow-up 1"]},
        {"followed": "follow-up 1", "pending": []},
    ]
    assert runner.short_term_memory("k")["followed"] == [
        "follow-up 2",
        "follow-up 3",
        "follow-up 1",
    ]


def test_keys_keep_their_own_scheduled_events():
    runner = LocalRunner(FollowsUp)
    runner.run("a", {"n": 1, "days": 1})
    [b] = runner.run("b", {"n": 2, "days": 2})
    assert b["pending"] == ["follow-up 2"]  # not a's
    assert runner.advance_time(3 * DAY) == [
        {"followed": "follow-up 1", "pending": []},
        {"followed": "follow-up 2", "pending": []},
    ]
    assert runner.short_term_memory("a")["followed"] == ["follow-up 1"]
    assert runner.short_term_memory("b")["followed"] == ["follow-up 2"]


def test_a_cancelled_event_does_not_fire():
    runner = LocalRunner(FollowsUp)
    [first] = runner.run("k", {"n": 1, "days": 1})
    runner.run("k", {"n": 2, "days": 2})
    [cancel] = runner.run("k", {"n": 3, "cancel": first["handle"]})
    assert cancel == {"n": 3, "cancelled": True, "pending": ["follow-up 2"]}
    [again] = runner.run("k", {"n": 4, "cancel": first["handle"]})
    assert again["cancelled"] is False  # no longer pending
    [unknown] = runner.run("k", {"n": 5, "cancel": "no such handle"})
    assert unknown["cancelled"] is False
    assert runner.advance_time(5 * DAY) == [{"followed": "follow-up 2", "pending": []}]
    metrics = runner.metrics.snapshot()
    assert metrics["numOfScheduledEventsCancelled"] == 1
    assert metrics["numOfScheduledEventsFired"] == 1


def test_an_action_cancels_what_it_scheduled_itself():
    runner = LocalRunner(FollowsUp)
    runner.run("k", {"n": 1, "days": 1})
    # Cancels the last (``n`` 1's), then schedules its own: only its own is pending.
    [output] = runner.run("k", {"n": 2, "cancel": "last", "days": 2})
    assert output["cancelled"] is True
    assert output["pending"] == ["follow-up 2"]


def test_an_action_that_fails_schedules_nothing():
    options = AgentOptions(error_policy="error-output")
    runner = LocalRunner(FollowsUp, options=options)
    assert runner.run("k", {"n": 1, "days": 1, "fail": True}) == []
    [error] = runner.errors
    assert error["action"] == "plan"
    assert runner.advance_time(2 * DAY) == []
    [output] = runner.run("k", {"n": 2})
    assert output["pending"] == []


def test_a_due_run_that_fails_goes_to_the_error_output_with_its_event_as_input():
    options = AgentOptions(error_policy="retry", retry_max_attempts=2, retry_initial_backoff_ms=10)
    runner = LocalRunner(FollowsUp, options=options)
    runner.run("k", {"n": 1, "days": 1, "follow_up_fails": True})
    runner.run("k", {"n": 2, "days": 2})
    assert runner.advance_time(3 * DAY) == [{"followed": "follow-up 2", "pending": []}]
    [error] = runner.errors
    assert (error["kind"], error["action"], error["attempts"]) == ("failed_run", "follow_up", 2)
    assert error["input"] == FollowUp(id=error["input"].id, text="follow-up 1 fails")
    assert error["run_sequence"] == 3
    assert error["error"] == "RuntimeError: follow-up 1 fails, as asked"


def test_at_schedules_for_a_time_of_day():
    runner = LocalRunner(FollowsUp)
    at = datetime.fromtimestamp(runner.now_ms() / 1000, tz=UTC) + timedelta(hours=5)
    [output] = runner.run("k", {"n": 1, "at": at.isoformat()})
    assert output["pending"] == ["at 1"]
    assert runner.advance_time(timedelta(hours=4)) == []
    assert runner.advance_time(timedelta(hours=1, seconds=1)) == [
        {"followed": "at 1", "pending": []}
    ]


def test_the_end_of_a_bounded_input_fires_the_pending_events():
    records = [{"k": "a", "n": 1, "days": 30}, {"k": "b", "n": 2, "days": 1}]
    records.append({"k": "a", "n": 3, "days": 2})
    builder = LocalExecutionEnvironment().from_list(records, "k").apply(FollowsUp)
    outputs = builder.to_keyed_list()
    assert [(key, o.get("followed", o.get("n"))) for key, o in outputs] == [
        ("a", 1),
        ("b", 2),
        ("a", 3),
        ("a", "follow-up 3"),  # a's in due order, then b's (keys in turn)
        ("a", "follow-up 1"),
        ("b", "follow-up 2"),
    ]


def test_an_agent_that_schedules_for_good_stops_at_the_end_of_input(caplog):
    """The end of input moves a key's clock to its last pending event: pings due by then
    fire (each scheduling the next an hour after its own due time), the rest stay."""
    builder = LocalExecutionEnvironment().from_list([{"k": "k"}], "k").apply(Forever)
    with caplog.at_level(logging.INFO, logger="flink_agents.runtime._driver"):
        outputs = builder.to_list()
    pings = [f"ping {n}" for n in range(1, 24)]
    # The ping due with the day's follow-up comes after it (scheduled later).
    assert outputs == [*pings, "in a day", "ping 24"]
    assert "1 scheduled event(s) and 0 waiting run(s) are due after the end of" in caplog.text


def test_a_follow_up_that_comes_due_while_the_key_waits_runs_after_the_inputs_before_it():
    runner = LocalRunner(Waits)
    outputs = runner.feed("k", {"n": 1, "follow_up_ms": 0, "delay_ms": 100})
    outputs += runner.feed("k", {"n": 2, "delay_ms": 100})
    outputs += runner.finish()
    # The follow-up is scheduled when run 1's action completes, after record 2 arrived.
    assert outputs == ["input 1", "input 2", "after 1"]


def test_a_restored_runner_keeps_the_pending_events_and_fires_them_once():
    first = LocalRunner(FollowsUp)
    first.run("k", {"n": 1, "days": 1})
    checkpoint = first.snapshot()
    second = LocalRunner(FollowsUp)
    second.restore(checkpoint)
    assert second.advance_time(2 * DAY) == [{"followed": "follow-up 1", "pending": []}]
    assert second.advance_time(2 * DAY) == []
    assert second.finish() == []


def test_a_replayed_action_schedules_from_its_record_without_paying_again():
    log = InMemoryActionLog()
    first_attempt = ActionJournal(log, "job")
    first = LocalRunner(PaysThenSchedules, journal=first_attempt)
    checkpoint = first.snapshot()
    scheduled_at = first.now_ms()
    with pytest.raises(Crash):
        first.run("k", "order-7")
    first_attempt.flush()

    second_attempt = ActionJournal(log, "job")
    second = LocalRunner(PaysThenSchedules, journal=second_attempt)
    second.restore(checkpoint)
    second.advance_time(timedelta(hours=6))  # a run made again now would schedule later
    [due] = second.run("k", "order-7")
    assert len(due) == 1
    assert scheduled_at + 2 * DAY // timedelta(milliseconds=1) <= due[0]
    assert due[0] < scheduled_at + (2 * DAY + timedelta(hours=1)) // timedelta(milliseconds=1)
    assert second_attempt.replayed_actions == 1
    assert CALLS["order-7"] == 1  # paid once
    assert second.finish() == ["paid order-7"]


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("neither", "schedule takes one of delay= (a timedelta) and at= (a datetime)"),
        ("both", "schedule takes one of delay="),
        ("negative", "must not be negative"),
        ("naive", "time zone aware datetime"),
        ("output", "cannot schedule a OutputEvent"),
        ("unheard", "no action listens to Ping"),
        ("send", "actions cannot send a EventScheduled"),
        ("not-an-event", "TypeError: schedule takes an Event, got str"),
    ],
)
def test_misuse_fails_clearly(how, says):
    [error] = LocalRunner(Misuses).run("k", how)
    assert says in error


def test_a_sub_agents_action_cannot_schedule():
    [error] = LocalRunner(Delegates).run("k", "topic")
    assert "a sub-agent's action cannot schedule events" in error
