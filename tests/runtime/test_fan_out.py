"""Fan-out groups: ``async def`` actions listening to one event run side by side (their
durable calls overlap) and commit in plan order, in the local runner; the parity suite
runs the same agent on MiniCluster."""

from __future__ import annotations

import threading

import pytest

from flink_agents.api import ActionExecutionError
from flink_agents.runtime import AgentOptions, LocalRunner
from flink_agents.runtime._local import local_journal
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal
from tests.runtime import fan_out_agents
from tests.runtime.fan_out_agents import CALLS, Crash, Members, Rendezvous

IN_PLAN_ORDER = [
    {"member": "first", "seen": 0, "value": "FIRST-1"},
    {"member": "second", "seen": 0, "value": "SECOND-1"},
    {"member": "third", "seen": 0, "value": "THIRD-1"},
    {"after": "first", "total": 1},
    {"after": "second", "total": 1},
    {"after": "third", "total": 1},
]


@pytest.fixture(autouse=True)
def _clear_calls():
    CALLS.clear()


def gather(n: int = 1, delays=(80, 0, 40), fail: str | None = None) -> dict:
    return {"n": n, "delays": list(delays), "fail": fail}


def test_the_calls_of_a_fan_out_overlap():
    # Each call returns only once all three are running at once: run one after another,
    # the first would wait for the others until its barrier broke.
    runner = LocalRunner(Rendezvous)
    assert runner.run("k", {"tag": "overlap", "timeout_s": 30}) == ["north", "east", "south"]


def test_with_parallel_actions_off_they_run_one_at_a_time():
    runner = LocalRunner(Rendezvous, options=AgentOptions(parallel_actions=False))
    with pytest.raises(ActionExecutionError) as caught:
        runner.run("k", {"tag": "one-at-a-time", "timeout_s": 0.3})
    assert caught.value.action == "north"
    assert isinstance(caught.value.cause, threading.BrokenBarrierError)


@pytest.mark.parametrize("delays", [(80, 0, 40), (0, 40, 80), (40, 80, 0)])
def test_members_see_the_memory_the_group_started_with_and_commit_in_plan_order(delays):
    runner = LocalRunner(Members)
    assert runner.run("k", gather(delays=delays)) == IN_PLAN_ORDER
    assert runner.short_term_memory("k") == {
        "runs": 1,
        "total": 1,  # each member read 0: they do not see each other's writes
        "last": "third",  # the last in plan order wins
        "own": {"first": "FIRST-1", "second": "SECOND-1", "third": "THIRD-1"},
    }
    assert runner.steps == 1 + 3 + 3
    assert runner.run("k", gather(n=2))[0] == {"member": "first", "seen": 1, "value": "FIRST-2"}
    assert runner.short_term_memory("k")["total"] == 2


def test_with_parallel_actions_off_each_member_sees_the_writes_before_it():
    runner = LocalRunner(Members, options=AgentOptions(parallel_actions=False))
    outputs = runner.run("k", gather())
    assert [o.get("seen") for o in outputs[:3]] == [0, 1, 2]
    assert runner.short_term_memory("k")["total"] == 3


def test_a_failing_member_fails_the_group_once_every_member_is_done():
    runner = LocalRunner(Members, options=AgentOptions(error_policy="error-output"))
    assert runner.run("k", gather(delays=(0, 0, 60), fail="second")) == []
    [error] = runner.errors
    assert (error["kind"], error["action"]) == ("failed_run", "second")
    assert "second failed on record 1" in error["error"]
    # The input action's writes stay; nothing of the group is applied.
    assert runner.short_term_memory("k") == {"runs": 1}
    # The slower third member still finished its call before the group gave up.
    assert CALLS == {"first-1": 1, "second-1": 1, "third-1": 1}


@pytest.mark.parametrize("log", ["memory://", "none"])
def test_a_retry_runs_only_the_failed_member_again(log):
    options = AgentOptions(error_policy="retry", retry_initial_backoff_ms=1, action_log=log)
    runner = LocalRunner(Members, options=options, journal=local_journal(options))
    assert runner.run("k", gather(fail="!second")) == IN_PLAN_ORDER
    assert runner.short_term_memory("k")["total"] == 1
    # The members that completed are kept; the failed one ran twice, its call once with
    # the action log (its result recorded), twice without.
    second_calls = 1 if log == "memory://" else 2
    assert dict(CALLS) == {"first-1": 1, "second-1": second_calls, "third-1": 1, "!second": 2}


def test_a_group_that_keeps_failing_is_given_up_with_nothing_applied():
    options = AgentOptions(
        error_policy="retry", retry_initial_backoff_ms=1, retry_max_attempts=2
    )
    runner = LocalRunner(Members, options=options, journal=local_journal(options))
    assert runner.run("k", gather(fail="third")) == []
    [error] = runner.errors
    assert (error["action"], error["attempts"]) == ("third", 2)
    assert runner.short_term_memory("k") == {"runs": 1}
    assert runner.run("k", gather(n=2)) == [
        {**output, "value": output["value"].replace("-1", "-2")} if "value" in output
        else output
        for output in IN_PLAN_ORDER
    ]


def test_a_restore_replays_the_members_that_completed_and_runs_the_rest():
    log = InMemoryActionLog()
    first_attempt = ActionJournal(log, "job")
    first = LocalRunner(Members, journal=first_attempt)
    checkpoint = first.snapshot()
    # The first two members complete (and are recorded); the third dies after its call.
    with pytest.raises(Crash):
        first.run("k", gather(delays=(0, 0, 80), fail="crash:third"))
    first_attempt.flush()

    second_attempt = ActionJournal(log, "job")
    second = LocalRunner(Members, journal=second_attempt)
    second.restore(checkpoint)
    outputs = second.run("k", gather(delays=(0, 0, 80), fail="crash:third"))
    assert outputs == IN_PLAN_ORDER
    assert second_attempt.replayed_actions == 2  # first and second
    assert CALLS == {"first-1": 1, "second-1": 1, "third-1": 1, "crash:third": 2}
    assert second.short_term_memory("k")["own"] == {
        "first": "FIRST-1", "second": "SECOND-1", "third": "THIRD-1"
    }


def test_a_restore_after_the_whole_group_replays_it_without_any_call():
    log = InMemoryActionLog()
    first_attempt = ActionJournal(log, "job")
    first = LocalRunner(Members, journal=first_attempt)
    checkpoint = first.snapshot()
    before = first.run("k", gather())
    first_attempt.flush()

    second_attempt = ActionJournal(log, "job")
    second = LocalRunner(Members, journal=second_attempt)
    second.restore(checkpoint)
    assert second.run("k", gather()) == before == IN_PLAN_ORDER
    assert second_attempt.replayed_actions == 3
    assert CALLS == {"first-1": 1, "second-1": 1, "third-1": 1}
    assert second.snapshot().short_term["k"].data == first.snapshot().short_term["k"].data


def test_keys_fan_out_side_by_side_and_stay_in_input_order():
    runner = LocalRunner(Members)
    outputs = []
    for n in range(1, 4):
        for key in ("a", "b"):
            outputs += runner.feed(key, gather(n=n, delays=(30, 10, 20)))
    outputs += runner.finish()
    firsts = [o["value"] for o in outputs if o.get("member") == "first"]
    assert sorted(firsts) == ["FIRST-1"] * 2 + ["FIRST-2"] * 2 + ["FIRST-3"] * 2
    for key in ("a", "b"):
        assert runner.short_term_memory(key)["total"] == 3


def test_agent_module_is_importable_by_plan_reference():
    # Plans refer to the agents by module path (the parity suite runs them on Flink).
    assert fan_out_agents.Members.__module__ == "tests.runtime.fan_out_agents"
