"""The action log in the run engine: recording, replay after a restore, durable calls reused,
mismatches corrected, pruning. A "restore" here is what Flink does: state goes back to a
snapshot, the log (outside state) keeps everything, and the same inputs arrive again."""

from __future__ import annotations

import pytest

from flink_agents.api import ActionExecutionError
from flink_agents.memory import DictState
from flink_agents.plan import to_plan
from flink_agents.runtime._journal import ActionJournal, canonical_key, input_event_id
from flink_agents.runtime._local import LocalRunner
from flink_agents.runtime.action_log import ActionLogError, InMemoryActionLog, open_action_log
from flink_agents.testing.recovery import (
    LedgerAgent,
    expected_memory,
    make_records,
    read_ledger,
)
from tests.runtime import journal_agents
from tests.runtime.journal_agents import CALLS, Crash


@pytest.fixture(autouse=True)
def _fresh_counts():
    CALLS.clear()
    yield
    CALLS.clear()


def journal(log, replay: bool, job: str = "job-1", **kwargs) -> ActionJournal:
    return ActionJournal(log, job, replay=replay, **kwargs)


def ledger_plan(tmp_path):
    plan = to_plan(LedgerAgent)
    return plan.model_copy(update={"config": {"ledger": str(tmp_path / "ledger.jsonl")}})


def run_all(runner: LocalRunner, records) -> list:
    outputs = []
    for record in records:
        outputs.extend(runner.run(record["user"], record))
    return outputs


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_restore_replays_completed_actions_without_calling_again(tmp_path, backend):
    log = InMemoryActionLog() if backend == "memory" else open_action_log(tmp_path / "log.db")
    plan, records = ledger_plan(tmp_path), make_records(12, 3)
    first = LocalRunner(plan, journal=journal(log, replay=False))
    run_all(first, records[:5])
    checkpoint = first.snapshot()
    after_checkpoint = run_all(first, records[5:])
    calls_before_failure = len(read_ledger(tmp_path / "ledger.jsonl"))
    maps_before_failure = first.snapshot()

    # The job fails; Flink restores the checkpoint and the source replays records[5:].
    second = LocalRunner(plan, journal=journal(log, replay=True))
    second.restore(checkpoint)
    replayed = run_all(second, records[5:])

    assert replayed == after_checkpoint  # the same events, execution ids included
    assert len(read_ledger(tmp_path / "ledger.jsonl")) == calls_before_failure == 24
    assert second.engine.journal.replayed_actions == 14  # 7 runs x 2 actions
    for user, memory in expected_memory(records).items():
        assert second.short_term_memory(user) == memory
    # Not just equal as nested dicts: the very same flattened maps, markers included.
    restored = second.snapshot()
    for user in maps_before_failure.short_term:
        assert restored.short_term[user].data == maps_before_failure.short_term[user].data
        assert restored.sensory[user].data == {}
    log.close()


def test_a_fresh_job_does_not_read_the_log():
    log = InMemoryActionLog()
    LocalRunner(journal_agents.TwoCalls, journal=journal(log, replay=False)).run("k", {})
    runner = LocalRunner(journal_agents.TwoCalls, journal=journal(log, replay=False))
    runner.run("k", {})
    assert CALLS["first"] == 2  # same identity, but replay is off: the action ran
    assert runner.engine.journal.replayed_actions == 0


def test_an_interrupted_action_reuses_its_recorded_calls():
    log = InMemoryActionLog()
    first = LocalRunner(journal_agents.TwoCalls, journal=journal(log, replay=False))
    checkpoint = first.snapshot()
    with pytest.raises(Crash):
        first.run("k", {"arg": 1, "crash": True})
    assert CALLS["first"] == 1

    second = LocalRunner(journal_agents.TwoCalls, journal=journal(log, replay=True))
    second.restore(checkpoint)
    assert second.run("k", {"arg": 1, "crash": True}) == [["first(1)#1", "second(None)#1"]]
    assert (CALLS["first"], CALLS["second"]) == (1, 1)
    assert second.engine.journal.reused_calls == 1
    assert second.short_term_memory("k") == {"first": "first(1)#1", "second": "second(None)#1"}


def test_an_interrupted_async_action_reuses_its_recorded_call():
    log = InMemoryActionLog()
    first = LocalRunner(journal_agents.AsyncTwoCalls, journal=journal(log, replay=False))
    with pytest.raises(Crash):
        first.run("k", "x")
    second = LocalRunner(journal_agents.AsyncTwoCalls, journal=journal(log, replay=True))
    assert second.run("k", "x") == [["first(x)#1", "second(None)#1"]]
    assert (CALLS["first"], CALLS["second"]) == (1, 1)
    first.engine.close()
    second.engine.close()


def test_a_call_that_no_longer_matches_runs_and_corrects_the_log():
    log = InMemoryActionLog()
    first = LocalRunner(journal_agents.TwoCalls, journal=journal(log, replay=False))
    with pytest.raises(Crash):
        first.run("k", {"arg": 1, "crash": True})
    identity = first.engine.journal.identity("k", 1, 1, "work")
    [recorded] = log.calls(identity)

    # After the restart the input differs (say, a non-deterministic source): other args.
    second = LocalRunner(journal_agents.TwoCalls, journal=journal(log, replay=True))
    assert second.run("k", {"arg": 2}) == [["first(2)#2", "second(None)#1"]]
    assert CALLS["first"] == 2
    record = log.completed(identity)
    assert record.calls[0].args_digest != recorded.args_digest
    assert record.calls[0].result == "first(2)#2"


def test_a_handled_error_is_replayed_but_a_trailing_error_is_called_again():
    log = InMemoryActionLog()
    first = LocalRunner(journal_agents.HandlesErrors, journal=journal(log, replay=False))
    with pytest.raises(Crash):
        first.run("k", "crash")
    second = LocalRunner(journal_agents.HandlesErrors, journal=journal(log, replay=True))
    assert second.run("k", "crash") == [["flaky is down", "after(None)#1"]]
    assert (CALLS["flaky"], CALLS["after"]) == (1, 1)  # the handled error was not retried


def test_a_call_whose_error_failed_the_action_is_called_again_on_retry():
    log = InMemoryActionLog()
    runner = LocalRunner(journal_agents.FailsOnError, journal=journal(log, replay=False))
    engine, run = runner.engine, runner.engine.start("k", 1, None)
    sensory, short_term = DictState(), DictState()
    with pytest.raises(ActionExecutionError, match="flaky is down"):
        engine.step_blocking(run, sensory, short_term)
    run.attempts += 1  # what the retry policy does before running the head action again
    assert engine.step_blocking(run, sensory, short_term).outputs == ("flaky#2",)
    assert CALLS["flaky"] == 2  # a replayed error would have failed every retry


def test_a_retry_reuses_the_calls_that_succeeded_before_the_failure():
    log = InMemoryActionLog()
    runner = LocalRunner(journal_agents.TwoCalls, journal=journal(log, replay=False))
    engine, run = runner.engine, runner.engine.start("k", 1, {"arg": 7, "fail": True})
    sensory, short_term = DictState(), DictState()
    with pytest.raises(ActionExecutionError, match="fails once"):
        engine.step_blocking(run, sensory, short_term)
    assert short_term.data == {}  # the failed action left nothing behind
    run.attempts += 1
    assert engine.step_blocking(run, sensory, short_term).outputs == (
        ["first(7)#1", "second(None)#1"],
    )
    assert CALLS["first"] == 1


def test_a_result_the_log_cannot_store_fails_the_action_with_nothing_applied():
    runner = LocalRunner(journal_agents.BadResult, journal=journal(InMemoryActionLog(), False))
    with pytest.raises(ActionExecutionError) as raised:
        runner.run("k", None)
    assert isinstance(raised.value.cause, ActionLogError)
    assert "durable call 0" in str(raised.value.cause)
    assert runner.short_term_memory("k") == {}


def test_a_record_the_log_cannot_store_fails_the_action_with_nothing_applied():
    log = InMemoryActionLog()
    runner = LocalRunner(journal_agents.BadEvent, journal=journal(log, False))
    with pytest.raises(ActionExecutionError) as raised:
        runner.run("k", None)
    assert isinstance(raised.value.cause, ActionLogError)
    assert runner.short_term_memory("k") == {}
    assert log.count("job-1") == 0


def test_input_event_ids_are_derived_from_job_key_and_run():
    log = InMemoryActionLog()
    ids = [
        LocalRunner(journal_agents.EventId, journal=journal(log, False, job)).run("k", None)[0]
        for job in ("a", "a", "b")
    ]
    assert ids[0] == ids[1] == str(input_event_id("a", "k", 1))
    assert ids[2] != ids[0]
    unlogged = LocalRunner(journal_agents.EventId)
    assert unlogged.run("k", None) != unlogged.run("k", None)


def test_canonical_keys_keep_types_apart():
    assert canonical_key("1") != canonical_key(1)
    assert canonical_key(("u", 1)) == canonical_key(["u", 1]) == '["u",1]'
    assert canonical_key({"b": 1, "a": 2}) == '{"a":2,"b":1}'
    assert canonical_key(object).startswith("repr:")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_pruning_waits_a_full_retention_period_after_start_then_drops_old_records():
    log, clock = InMemoryActionLog(), Clock()
    logged = journal(log, replay=False, retention_ms=1000, clock=clock)
    runner = LocalRunner(journal_agents.TwoCalls, journal=logged)
    runner.run("old", {})
    clock.now += 900
    runner.run("new", {})
    assert logged.maybe_prune() == 0  # up for less than the retention: keep everything
    assert log.count("job-1") == 2
    clock.now += 300  # "old" is 1200 ms old, "new" 300 ms
    assert logged.maybe_prune() == 1
    assert log.count("job-1") == 1
    assert logged.maybe_prune() == 0  # at most every quarter of the retention period
    clock.now += 2000
    assert logged.maybe_prune(lambda: clock.now - 5000) == 0  # an action still in flight
    assert logged.pruned == 1
