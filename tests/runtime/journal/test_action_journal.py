"""The action log in the run engine: recording, replay after a restore, durable calls reused,
mismatches corrected, pruning. A "restore" here is what Flink does: state goes back to a
snapshot, the log (outside state) keeps everything, and the same inputs arrive again."""

from __future__ import annotations

import contextlib
import gc
import resource
import shutil
import signal
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest

from flink_agents._ids import input_event_id, key_text
from flink_agents.api import (
    ActionExecutionError,
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents.memory import DictState, MemoryDelta
from flink_agents.plan import to_plan
from flink_agents.runtime._local import LocalRunner
from flink_agents.runtime.action_log import (
    ActionIdentity,
    ActionLogError,
    ActionRecord,
    DurableCall,
    InMemoryActionLog,
    UnstorableValueError,
    digest_args,
    open_action_log,
)
from flink_agents.runtime.journal import ActionJournal, Lookup
from flink_agents.testing.recovery import (
    LedgerAgent,
    expected_memory,
    make_records,
    read_ledger,
)
from tests.runtime import journal_agents
from tests.runtime.journal_agents import CALLS, Crash, paid


@pytest.fixture(autouse=True)
def _fresh_counts():
    CALLS.clear()
    yield
    CALLS.clear()


class CountingLog(InMemoryActionLog):
    """An in-memory log that counts its operations and fails those named in ``failing``
    with an ``OSError``, as a lost disk or database would."""

    def __init__(self, *failing: str) -> None:
        super().__init__()
        self.failing = set(failing)
        self.operations: Counter[str] = Counter()

    def _do(self, operation: str) -> None:
        self.operations[operation] += 1
        if operation in self.failing:
            raise OSError(f"{operation}: input/output error")

    def run_index(self, job):
        self._do("run_index")
        return super().run_index(job)

    def completed(self, identity):
        self._do("completed")
        return super().completed(identity)

    def calls(self, identity):
        self._do("calls")
        return super().calls(identity)

    def record_calls(self, calls):  # what record_call() and the journal call
        for _ in calls:
            self._do("record_call")
        super().record_calls(calls)

    def complete_many(self, records):  # what complete() and the journal's writer call
        self._do("complete")
        super().complete_many(records)

    def prune(self, job, before_epoch):
        self._do("prune")
        return super().prune(job, before_epoch)


class SwallowsErrors(Agent):
    """Catches whatever its durable call raises and goes on, as user code may."""

    @action(InputEvent)
    def work(event: InputEvent, ctx: RunnerContext) -> None:
        with contextlib.suppress(Exception):
            ctx.durable_execute(paid, "first")
        ctx.short_term_memory.set("after", True)
        ctx.send_event(OutputEvent(output="done"))


class AsyncSwallowsErrors(Agent):
    @action(InputEvent)
    async def work(event: InputEvent, ctx: RunnerContext) -> None:
        with contextlib.suppress(Exception):
            await ctx.durable_execute_async(paid, "first")
        ctx.short_term_memory.set("after", True)
        ctx.send_event(OutputEvent(output="done"))


def chain(error: BaseException | None) -> Iterator[BaseException]:
    """``error`` and everything it wraps (causes, contexts, ActionExecutionError.cause)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = getattr(error, "cause", None) or error.__cause__ or error.__context__


def log_error_in(error: BaseException) -> ActionLogError:
    """The ActionLogError ``error`` is or wraps (the engine may wrap it or pass it on)."""
    found = [e for e in chain(error) if isinstance(e, ActionLogError)]
    assert found, f"no ActionLogError in {error!r}"
    return found[0]


def journal(log, job: str = "job-1", **kwargs) -> ActionJournal:
    """A journal for one attempt of ``job``: created (and its run index loaded) now."""
    return ActionJournal(log, job, **kwargs)


def end_attempt(attempt: ActionJournal) -> None:
    """The attempt's completed records reach the log, as when a runner closes it before
    the next attempt starts (``crash`` is the other way an attempt ends)."""
    attempt.flush()


def crash(attempt: ActionJournal) -> None:
    """The attempt's process dies: completed records still queued are lost."""
    attempt._writer.discard()


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
    first_attempt = journal(log)
    first = LocalRunner(plan, journal=first_attempt)
    run_all(first, records[:5])
    checkpoint = first.snapshot()
    after_checkpoint = run_all(first, records[5:])
    calls_before_failure = len(read_ledger(tmp_path / "ledger.jsonl"))
    maps_before_failure = first.snapshot()
    assert first_attempt.reads == 0  # it never failed
    end_attempt(first_attempt)

    # The job fails; Flink restores the checkpoint and the source replays records[5:].
    second_attempt = journal(log)
    second = LocalRunner(plan, journal=second_attempt)
    second.restore(checkpoint)
    replayed = run_all(second, records[5:])

    assert replayed == after_checkpoint  # the same events, execution ids included
    assert len(read_ledger(tmp_path / "ledger.jsonl")) == calls_before_failure == 24
    assert second_attempt.replayed_actions == 14  # 7 runs x 2 actions
    assert second_attempt.reads == 14  # one lookup per action, each found
    for user, memory in expected_memory(records).items():
        assert second.short_term_memory(user) == memory
    # Not just equal as nested dicts: the very same flattened maps, markers included.
    restored = second.snapshot()
    for user in maps_before_failure.short_term:
        assert restored.short_term[user].data == maps_before_failure.short_term[user].data
        assert restored.sensory[user].data == {}
    log.close()


def test_a_job_that_never_failed_reads_nothing():
    """Its run index is empty (other jobs' records do not count): no completed lookup, no
    call load, whatever the keys and runs."""
    log = CountingLog()
    LocalRunner(journal_agents.TwoCalls, journal=journal(log, "other-job")).run("k", {})
    logged = journal(log)
    runner = LocalRunner(journal_agents.TwoCalls, journal=logged)
    for n in range(6):
        runner.run(f"k{n % 2}", {"arg": n})
    assert (logged.reads, logged.index_loads, logged.replayed_actions) == (0, 1, 0)
    assert log.operations["completed"] == log.operations["calls"] == 0
    assert log.operations["run_index"] == 2  # once per journal
    assert log.count("job-1") == 6
    assert CALLS["first"] == 7


def test_a_restored_attempt_reads_only_the_runs_the_failed_one_reached(tmp_path):
    """Runs above their key's index entry (inputs the failed attempt never reached, keys it
    never saw) are not looked up."""
    log = CountingLog()
    plan, records = ledger_plan(tmp_path), make_records(12, 3)
    first = LocalRunner(plan, journal=journal(log))
    run_all(first, records[:5])
    checkpoint = first.snapshot()
    run_all(first, records[5:9])  # each of the 3 keys reaches run 3; then the job fails
    end_attempt(first.engine.journal)

    restored = journal(log)
    second = LocalRunner(plan, journal=restored)
    second.restore(checkpoint)
    run_all(second, records[5:])  # 4 runs replayed, then 3 new ones (run 4 of each key)
    run_all(second, [{"id": 99, "user": "new-key", "amount": 1}])

    assert restored.replayed_actions == restored.reads == 8  # 4 runs x 2 actions
    assert log.operations["calls"] == 0  # nothing was interrupted
    assert len(read_ledger(tmp_path / "ledger.jsonl")) == 2 * (12 + 1)


def test_the_run_index_bounds_what_may_be_replayed():
    """may_have_records: at or below the key's highest logged run, from either a record or
    a recorded call."""
    log = InMemoryActionLog()
    first = journal(log)
    first.complete(first.identity("a", 3, 1, "act"), MemoryDelta(), MemoryDelta(), [], [])
    first.record_call(first.identity("b", 2, 1, "act"), DurableCall(0, "f", "d"))
    end_attempt(first)
    restored = journal(log)
    assert [restored.may_have_records(restored.identity("a", r, 9, "x")) for r in (1, 3, 4)] == [
        True,
        True,
        False,
    ]
    assert restored.may_have_records(restored.identity("b", 2, 1, "act"))
    assert not restored.may_have_records(restored.identity("c", 1, 1, "act"))
    assert not journal(log, "job-2").may_have_records(restored.identity("a", 1, 1, "act"))
    assert not first.may_have_records(first.identity("a", 1, 1, "act"))  # loaded when empty


def test_an_interrupted_action_reuses_its_recorded_calls():
    log = InMemoryActionLog()
    first = LocalRunner(journal_agents.TwoCalls, journal=journal(log))
    checkpoint = first.snapshot()
    with pytest.raises(Crash):
        first.run("k", {"arg": 1, "crash": True})
    assert CALLS["first"] == 1

    second = LocalRunner(journal_agents.TwoCalls, journal=journal(log))
    second.restore(checkpoint)
    assert second.run("k", {"arg": 1, "crash": True}) == [["first(1)#1", "second(None)#1"]]
    assert (CALLS["first"], CALLS["second"]) == (1, 1)
    assert second.engine.journal.reused_calls == 1
    assert second.short_term_memory("k") == {"first": "first(1)#1", "second": "second(None)#1"}


def test_an_interrupted_async_action_reuses_its_recorded_call():
    log = InMemoryActionLog()
    first = LocalRunner(journal_agents.AsyncTwoCalls, journal=journal(log))
    with pytest.raises(Crash):
        first.run("k", "x")
    second = LocalRunner(journal_agents.AsyncTwoCalls, journal=journal(log))
    assert second.run("k", "x") == [["first(x)#1", "second(None)#1"]]
    assert (CALLS["first"], CALLS["second"]) == (1, 1)
    first.engine.close()
    second.engine.close()


def test_a_call_that_no_longer_matches_runs_and_corrects_the_log():
    log = InMemoryActionLog()
    first = LocalRunner(journal_agents.TwoCalls, journal=journal(log))
    with pytest.raises(Crash):
        first.run("k", {"arg": 1, "crash": True})
    identity = first.engine.journal.identity("k", 1, 1, "work")
    [recorded] = log.calls(identity)

    # After the restart the input differs (say, a non-deterministic source): other args.
    second = LocalRunner(journal_agents.TwoCalls, journal=journal(log))
    assert second.run("k", {"arg": 2}) == [["first(2)#2", "second(None)#1"]]
    assert CALLS["first"] == 2
    second.engine.journal.flush()
    record = log.completed(identity)
    assert record.calls[0].args_digest != recorded.args_digest
    assert record.calls[0].result == "first(2)#2"


def test_a_handled_error_is_replayed_but_a_trailing_error_is_called_again():
    log = InMemoryActionLog()
    first = LocalRunner(journal_agents.HandlesErrors, journal=journal(log))
    with pytest.raises(Crash):
        first.run("k", "crash")
    second = LocalRunner(journal_agents.HandlesErrors, journal=journal(log))
    assert second.run("k", "crash") == [["flaky is down", "after(None)#1"]]
    assert (CALLS["flaky"], CALLS["after"]) == (1, 1)  # the handled error was not retried


def test_a_call_whose_error_failed_the_action_is_called_again_on_retry():
    log = InMemoryActionLog()
    runner = LocalRunner(journal_agents.FailsOnError, journal=journal(log))
    engine, run = runner.engine, runner.engine.start("k", 1, None)
    sensory, short_term = DictState(), DictState()
    with pytest.raises(ActionExecutionError, match="flaky is down"):
        engine.step_blocking(run, sensory, short_term)
    run.attempts += 1  # what the retry policy does before running the head action again
    assert engine.step_blocking(run, sensory, short_term).outputs == ("flaky#2",)
    assert CALLS["flaky"] == 2  # a replayed error would have failed every retry
    assert engine.journal.reads == 1  # the retry loaded the failed execution's calls


def test_a_retry_reuses_the_calls_that_succeeded_before_the_failure():
    log = InMemoryActionLog()
    runner = LocalRunner(journal_agents.TwoCalls, journal=journal(log))
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
    assert engine.journal.reads == 1


def test_a_result_the_log_cannot_store_fails_the_action_with_nothing_applied():
    runner = LocalRunner(journal_agents.BadResult, journal=journal(InMemoryActionLog()))
    with pytest.raises(ActionExecutionError) as raised:
        runner.run("k", None)
    assert isinstance(raised.value.cause, UnstorableValueError)  # the action's fault
    assert not isinstance(raised.value.cause, ActionLogError)  # not the log's
    assert "durable call 0" in str(raised.value.cause)
    assert runner.short_term_memory("k") == {}


def test_a_record_the_log_cannot_store_fails_the_action_with_nothing_applied():
    log = InMemoryActionLog()
    runner = LocalRunner(journal_agents.BadEvent, journal=journal(log))
    with pytest.raises(ActionExecutionError) as raised:
        runner.run("k", None)
    assert isinstance(raised.value.cause, UnstorableValueError)
    assert runner.short_term_memory("k") == {}
    identity = ActionIdentity("job-1", key_text("k"), 1, 1, "work")
    assert log.completed(identity) is None  # only its durable call is in the log
    assert [call.function for call in log.calls(identity)] == ["tests.runtime.journal_agents:paid"]


def test_actions_without_durable_calls_write_no_record(tmp_path):
    """Nothing to protect: after a restore they run again on the restored state, as cheaply
    as they ran. The log is not touched on the hot path, and a restore still ends with the
    same outputs and memory."""
    log = CountingLog()
    first_attempt = journal(log)
    runner = LocalRunner(journal_agents.Cheap, journal=first_attempt)
    checkpoint = runner.snapshot()
    outputs = [runner.run(f"k{n % 2}", n) for n in range(6)]
    maps = runner.snapshot()
    end_attempt(first_attempt)
    assert log.count("job-1") == 0 and first_attempt.written == 0
    assert log.operations["complete"] == 0

    second_attempt = journal(log)
    restored = LocalRunner(journal_agents.Cheap, journal=second_attempt)
    restored.restore(checkpoint)
    assert [restored.run(f"k{n % 2}", n) for n in range(6)] == outputs
    assert second_attempt.replayed_actions == 0
    for key in ("k0", "k1"):
        assert restored.snapshot().short_term[key].data == maps.short_term[key].data


def test_input_event_ids_are_derived_from_job_key_and_run():
    log = InMemoryActionLog()
    ids = [
        LocalRunner(journal_agents.EventId, journal=journal(log, job)).run("k", None)[0]
        for job in ("a", "a", "b")
    ]
    assert ids[0] == ids[1] == str(input_event_id("a", "k", 1))
    assert ids[2] != ids[0]
    unlogged = LocalRunner(journal_agents.EventId)
    assert unlogged.run("k", None) != unlogged.run("k", None)


def test_key_texts_keep_types_apart():
    assert key_text("1") != key_text(1)
    assert key_text(("u", 1)) == key_text(["u", 1]) == '["u",1]'
    assert key_text({"b": 1, "a": 2}) == '{"a":2,"b":1}'
    assert key_text(object).startswith("repr:")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_pruning_waits_a_full_retention_period_after_start_then_drops_old_records():
    """Completed records wait in the writer's queue here (a delay of a minute): pruning
    writes them first, else "old" would be written after the prune and outlive it."""
    log, clock = InMemoryActionLog(), Clock()
    logged = journal(log, retention_ms=1000, clock=clock, batch_delay_ms=60_000)
    runner = LocalRunner(journal_agents.TwoCalls, journal=logged)
    runner.run("old", {})
    clock.now += 900
    runner.run("new", {})
    assert logged.maybe_prune() == 0  # up for less than the retention: keep everything
    assert log.count("job-1") == 2
    clock.now += 300  # "old" is 1200 ms old, "new" 300 ms
    assert logged.written == 0  # both still queued
    assert logged.maybe_prune() == 1
    assert logged.written == 2
    assert log.count("job-1") == 1
    assert log.completed(logged.identity("old", 1, 1, "work")) is None
    assert log.completed(logged.identity("new", 1, 1, "work")) is not None
    assert logged.maybe_prune() == 0  # at most every quarter of the retention period
    clock.now += 2000
    assert logged.maybe_prune(lambda: clock.now - 5000) == 0  # an action still in flight
    assert logged.pruned == 1


# -- completed records written in batches, off the operator thread (issue 13) -------------


class BatchLog(InMemoryActionLog):
    """An in-memory log that keeps the size of every ``complete_many`` transaction, and
    holds the writer inside one while ``gate`` is clear."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []
        self.gate = threading.Event()
        self.gate.set()
        self.writing = threading.Event()

    def complete_many(self, records):
        self.writing.set()
        self.gate.wait()
        self.batches.append(len(records))
        super().complete_many(records)


def complete_one(attempt: ActionJournal, step: int, *, key: str = "k", events=()) -> None:
    identity = attempt.identity(key, 1, step, "act")
    attempt.complete(identity, MemoryDelta(), MemoryDelta(puts={"n": step}), events, [])


def eventually(condition, timeout_s: float = 10.0) -> bool:
    """Whether ``condition()`` holds within ``timeout_s`` (for work on the writer thread)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_completed_records_are_written_in_batches_on_flush_and_close():
    """Full batches are written at once, the rest on flush and close: each batch one
    complete_many transaction, every record readable afterwards."""
    log = BatchLog()
    logged = journal(log, batch_size=8, batch_delay_ms=60_000)  # no delay-driven writes
    for step in range(1, 21):
        complete_one(logged, step)
    assert eventually(lambda: log.batches == [8, 8])  # the two full batches
    assert logged.written == 16 and log.count("job-1") == 16
    logged.flush()
    assert log.batches == [8, 8, 4] and logged.batches == 3 and logged.written == 20
    assert [log.completed(logged.identity("k", 1, s, "act")).short_term.puts for s in (1, 20)] == [
        {"n": 1},
        {"n": 20},
    ]
    for step in range(21, 26):
        complete_one(logged, step)
    logged.close()
    assert log.batches == [8, 8, 4, 5] and log.count("job-1") == 25
    logged.close()  # idempotent


def test_a_queued_record_is_written_after_the_delay_without_a_flush():
    log = BatchLog()
    logged = journal(log, batch_delay_ms=5)
    for step in range(1, 4):
        complete_one(logged, step)
    assert eventually(lambda: log.count("job-1") == 3)
    assert sum(log.batches) == 3
    logged.close()


@pytest.mark.parametrize("bound", ["records", "bytes"])
def test_complete_waits_while_the_writer_is_behind(bound):
    """Backpressure: with the writer stuck in a transaction, complete() returns until the
    queue (the batch in flight included) holds max_queued records or bytes, then waits."""
    log = BatchLog()
    log.gate.clear()
    payload = len(
        log.encode(
            ActionRecord(
                ActionIdentity("job-1", '"k"', 1, 1, "act"),
                MemoryDelta(),
                MemoryDelta(puts={"n": 1}),
                (),
                (),
                0,
            )
        ).payload
    )
    limits = {"max_queued": 4} if bound == "records" else {"max_queued_bytes": 4 * payload + 1}
    logged = journal(log, batch_size=2, batch_delay_ms=0, **limits)
    complete_one(logged, 1)
    assert log.writing.wait(10)  # the writer holds record 1 in its transaction
    for step in range(2, 5):
        complete_one(logged, step)  # 4 queued or in flight: the limit
    fifth = threading.Thread(target=complete_one, args=(logged, 5))
    fifth.start()
    fifth.join(0.3)
    assert fifth.is_alive()  # waiting for the writer
    assert logged.written == 0
    log.gate.set()
    fifth.join(10)
    assert not fifth.is_alive()
    logged.flush()
    assert log.count("job-1") == 5 and logged.written == 5
    logged.close()


def test_an_unstorable_record_raises_in_complete_and_queues_nothing():
    """Encoding happens on the calling thread: the action's fault, raised synchronously;
    the writer is unaffected."""
    log = BatchLog()
    logged = journal(log)
    with pytest.raises(UnstorableValueError, match="action 'act'"):
        complete_one(logged, 1, events=[OutputEvent(output=threading.Lock())])
    complete_one(logged, 2)
    logged.flush()
    assert log.batches == [1] and logged.written == 1
    assert log.completed(logged.identity("k", 1, 1, "act")) is None
    logged.close()


@pytest.mark.parametrize(
    "operation",
    ["complete", "lookup", "may_replay", "recorder", "maybe_prune", "flush", "close"],
)
def test_a_writer_failure_is_raised_by_the_next_operation(operation):
    """The writer's failure is kept and raised, naming the log, by whatever the operator
    thread does next with the journal, and by flush and close (which still close the log)."""
    log, clock = CountingLog("complete"), Clock()
    logged = journal(log, clock=clock, retention_ms=1000, batch_delay_ms=0)
    complete_one(logged, 1)  # queued: the failure comes later, on the writer thread
    assert eventually(lambda: logged._writer.failure is not None)
    identity = logged.identity("k", 1, 2, "act")
    clock.now += 2000
    operations = {
        "complete": lambda: complete_one(logged, 2),
        "lookup": lambda: logged.lookup("k", 1, 2, "act"),
        "may_replay": lambda: logged.may_replay("k", 2),  # the fast lane's question
        "recorder": lambda: logged.recorder(Lookup(identity, None, None), look_up=False),
        "maybe_prune": logged.maybe_prune,
        "flush": logged.flush,
        "close": logged.close,
    }
    with pytest.raises(ActionLogError) as raised:
        operations[operation]()
    assert str(raised.value) == (
        "action log memory://: recording completed actions failed: "
        "OSError: complete: input/output error"
    )
    assert isinstance(raised.value.__cause__, OSError)
    assert log.operations["complete"] == 1 and log.operations["prune"] == 0
    if operation == "close":  # a closed journal records nothing more
        with pytest.raises(ActionLogError, match="the action journal is closed"):
            logged.record_call(identity, DurableCall(0, "f", "d", "paid"))
        return
    # A durable call is still recorded: the next attempt need not pay for it again.
    logged.record_call(identity, DurableCall(0, "f", "d", "paid"))
    assert [c.result for c in log.calls(identity)] == ["paid"]


def test_a_writer_failure_fails_the_job_not_the_action():
    """Through the engine: the failure surfaces as the log's error on the next action,
    whatever the error policy, and is not charged to that action."""
    log = CountingLog("complete")
    runner = LocalRunner(journal_agents.TwoCalls, journal=journal(log, batch_delay_ms=0))
    runner.run("k", {"arg": 1})  # completed, its record queued
    assert eventually(lambda: runner.engine.journal._writer.failure is not None)
    with pytest.raises(Exception) as raised:
        runner.run("k", {"arg": 2})
    assert "recording completed actions failed" in str(log_error_in(raised.value))
    assert not isinstance(raised.value, ActionExecutionError)
    assert CALLS["first"] == 1  # the failure was raised before the next action ran


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_crash_loses_only_unwritten_completions_and_replay_reruns_them(tmp_path, backend):
    """The process dies with completed records still queued: those actions run again on
    replay, their durable calls answered from the log (no paid call twice); those written
    before the crash are replayed without running."""
    log = InMemoryActionLog() if backend == "memory" else open_action_log(tmp_path / "log.db")
    plan, records = ledger_plan(tmp_path), make_records(12, 3)
    first_attempt = journal(log, batch_delay_ms=60_000)  # written only when flushed
    first = LocalRunner(plan, journal=first_attempt)
    run_all(first, records[:5])
    checkpoint = first.snapshot()
    after_checkpoint = run_all(first, records[5:8])
    first_attempt.flush()  # these 3 runs (6 actions) reach the log
    after_checkpoint += run_all(first, records[8:])  # these 4 runs' records stay queued
    assert first_attempt.written == 16
    crash(first_attempt)
    paid_calls = len(read_ledger(tmp_path / "ledger.jsonl"))
    assert paid_calls == 24

    second_attempt = journal(log)
    second = LocalRunner(plan, journal=second_attempt)
    second.restore(checkpoint)
    assert run_all(second, records[5:]) == after_checkpoint
    assert len(read_ledger(tmp_path / "ledger.jsonl")) == paid_calls  # none paid twice
    assert second_attempt.replayed_actions == 6  # the 3 flushed runs
    assert second_attempt.reused_calls == 8  # the 4 lost runs: 2 calls each, from the log
    for user, memory in expected_memory(records).items():
        assert second.short_term_memory(user) == memory
    second_attempt.flush()
    assert log.count("job-1") == 24  # every action of the 12 runs, completed
    second.engine.close()
    second_attempt.close()


def test_a_journal_dropped_without_close_still_writes_its_queue():
    log = BatchLog()
    logged = journal(log, batch_delay_ms=60_000)
    complete_one(logged, 1)
    writer = logged._writer
    del logged
    gc.collect()
    assert eventually(lambda: log.count("job-1") == 1)
    assert eventually(lambda: not writer._thread.is_alive())


def test_replay_reads_the_record_again_when_its_calls_vanished_under_it():
    """A writer of an earlier attempt may commit a completion (record in, partial calls
    out, one transaction) between the lookup of the record and the load of the calls:
    the journal then finds the record and replays it instead of paying the calls again."""
    log = CountingLog()
    identity = ActionIdentity("job-1", key_text("k"), 1, 1, "work")
    paid_call = DurableCall(0, "f", "d", "paid")
    log.record_call(identity, paid_call, 1)
    record = ActionRecord(identity, MemoryDelta(), MemoryDelta(), (), (paid_call,), 1)
    restored = journal(log)
    looked_up = log.completed

    def completed_then_commit(identity):
        found = looked_up(identity)
        if log.operations["completed"] == 1:
            log.complete(record)  # the earlier attempt's writer commits right after
        return found

    log.completed = completed_then_commit
    assert restored.lookup("k", 1, 1, "work").record == record
    assert (restored.replayed_actions, restored.reads) == (1, 3)
    assert log.operations["calls"] == 1


# -- failures of the log itself (issue 12, item 5) -----------------------------------------


@pytest.mark.parametrize(
    ("operation", "what"),
    [
        ("run_index", "loading the run index"),
        ("completed", "looking up a completed action"),
        ("calls", "loading the recorded durable calls"),
        ("record_call", "recording a durable call"),
        ("complete", "recording completed actions"),
        ("prune", "pruning expired records"),
    ],
)
def test_every_failure_of_the_log_is_an_action_log_error_naming_it(operation, what):
    """Whichever operation fails, the journal raises ActionLogError naming the log and the
    operation, chained to the cause. (A completed record is written by the writer thread:
    its failure surfaces from the next operation, here ``maybe_prune``.)"""
    log, clock = CountingLog(), Clock()
    earlier = ActionIdentity("job-1", key_text("k"), 1, 1, "work")
    log.record_call(earlier, DurableCall(0, "other:function", "d"), clock.now)  # interrupted
    log.operations.clear()
    log.failing.add(operation)
    with pytest.raises(ActionLogError) as raised:  # one restored attempt, step by step
        logged = journal(log, retention_ms=1000, clock=clock)
        lookup = logged.lookup("k", 1, 1, "work")
        assert lookup.record is None
        identity = lookup.identity
        recorder = logged.recorder(lookup, look_up=False)
        slot = recorder.begin(paid, ("x",), {})  # no longer matches: runs, is recorded
        slot.run(paid, ("x",), {})
        logged.complete(identity, MemoryDelta(), MemoryDelta(), [], recorder.calls)
        clock.now += 2000
        logged.maybe_prune()
    assert str(raised.value) == (
        f"action log memory://: {what} failed: OSError: {operation}: input/output error"
    )
    assert isinstance(raised.value.__cause__, OSError)
    assert log.operations[operation] == 1


def test_a_call_that_cannot_be_recorded_fails_as_the_log_not_as_the_function():
    """The function raised, then recording its outcome failed: the log's error is raised
    (the user's stays in the chain), and the recorder keeps it."""
    logged = journal(CountingLog("record_call"))
    recorder = logged.recorder(logged.lookup("k", 1, 1, "work"), look_up=False)

    def fails() -> None:
        raise ValueError("the user's own error")

    slot = recorder.begin(fails, (), {})
    with pytest.raises(ActionLogError, match="recording a durable call failed") as raised:
        slot.run(fails, (), {})
    assert recorder.infrastructure_error is raised.value
    assert any(isinstance(e, ValueError) for e in chain(raised.value))


def test_a_swallowed_recording_failure_still_reaches_the_engine():
    """User code may catch what durable_execute raised; the recorder remembers the failure
    and refuses to hand out calls with one missing, so no record is written without it."""
    logged = journal(CountingLog("record_call"))
    recorder = logged.recorder(logged.lookup("k", 1, 1, "work"), look_up=False)
    with contextlib.suppress(Exception):
        recorder.begin(paid, ("a",), {}).run(paid, ("a",), {})
    assert isinstance(recorder.infrastructure_error, ActionLogError)
    with pytest.raises(ActionLogError) as raised:
        recorder.calls  # noqa: B018 - the property raises
    assert raised.value is recorder.infrastructure_error


def test_an_unstorable_result_is_the_actions_fault_not_the_logs():
    logged = journal(InMemoryActionLog())
    recorder = logged.recorder(logged.lookup("k", 1, 1, "work"), look_up=False)
    with pytest.raises(UnstorableValueError):
        recorder.begin(journal_agents.unpicklable, (), {}).run(journal_agents.unpicklable, (), {})
    assert recorder.infrastructure_error is None
    assert recorder.calls == []


@pytest.mark.parametrize("agent", [SwallowsErrors, AsyncSwallowsErrors])
def test_an_action_that_swallows_a_recording_failure_is_not_completed(agent):
    """Sync or async, the run fails with the log's error; nothing is applied or logged."""
    log = CountingLog("record_call")
    runner = LocalRunner(agent, journal=journal(log))
    with pytest.raises(Exception) as raised:
        runner.run("k", None)
    assert "recording a durable call failed" in str(log_error_in(raised.value))
    assert runner.short_term_memory("k") == {}
    assert log.operations["complete"] == 0 and log.count("job-1") == 0


def test_a_sqlite_log_whose_file_is_deleted_mid_run_fails_naming_it(tmp_path):
    """SQLite would go on writing to the deleted file (lost at the next restart); the log
    notices and fails."""
    path = tmp_path / "logs" / "action-log.db"
    runner = LocalRunner(journal_agents.TwoCalls, journal=journal(open_action_log(path)))
    runner.run("k", {"arg": 1})
    runner.engine.journal.flush()  # else the writer may notice first (see below)
    shutil.rmtree(path.parent)
    with pytest.raises(Exception) as raised:
        runner.run("k", {"arg": 2})
    assert str(log_error_in(raised.value)) == (
        f"action log sqlite://{path}: recording a durable call failed: OperationalError: "
        f"the database file {path} was deleted or replaced after it was opened"
    )


@contextlib.contextmanager
def disk_full_at(size: int) -> Iterator[None]:
    """Writes of this process past ``size`` bytes of any file fail (EFBIG), as on a full
    disk."""
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the process is killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, limits[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)


def test_a_full_disk_under_a_sqlite_log_fails_naming_it(tmp_path):
    """The writer thread's transaction fails: flush raises it, and so does every later
    operation of that journal; the next attempt's journal works once there is room."""
    path = tmp_path / "action-log.db"
    logged = journal(open_action_log(path))
    identity = logged.identity("k", 1, 1, "work")
    logged.complete(identity, MemoryDelta(), MemoryDelta(), [], [])
    logged.flush()
    with disk_full_at(4096), pytest.raises(ActionLogError) as raised:
        logged.complete(identity, MemoryDelta(), MemoryDelta(), [], [DurableCall(0, "f", "d")])
        logged.flush()
    assert str(raised.value).startswith(
        f"action log sqlite://{path}: recording completed actions failed: OperationalError: "
    )
    with pytest.raises(ActionLogError) as again:
        logged.complete(identity, MemoryDelta(), MemoryDelta(), [], [])
    assert again.value is raised.value
    with pytest.raises(ActionLogError):
        logged.close()
    restarted = journal(open_action_log(path))  # room again: it works
    restarted.complete(identity, MemoryDelta(), MemoryDelta(), [], [])
    restarted.close()


def test_a_dropped_postgres_database_fails_naming_the_log_but_not_its_password(
    postgres_server,
):
    url = postgres_server.create_database()
    secret = "s3cret-pw"
    runner = LocalRunner(
        journal_agents.TwoCalls,
        journal=journal(open_action_log(url.replace("postgres@", f"postgres:{secret}@"))),
    )
    runner.run("k", {"arg": 1})
    runner.engine.journal.flush()  # else the writer may notice first
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {url.rsplit('/', 1)[1]} WITH (FORCE)")
    with pytest.raises(Exception) as raised:
        runner.run("k", {"arg": 2})
    error = log_error_in(raised.value)
    shown = url.replace("postgres@", "postgres:***@")
    assert str(error).startswith(f"action log {shown}: recording a durable call failed: ")
    assert "does not exist" in str(error)
    assert secret not in "".join(traceback.format_exception(raised.value))


# -- group commits of durable calls ----------------------------------------------------------


class GroupLog(InMemoryActionLog):
    """An in-memory log that keeps the size of every ``record_calls`` transaction, holds
    the first one while ``gate`` is clear, and fails the groups listed in ``failing``."""

    def __init__(self, *failing: int) -> None:
        super().__init__()
        self.groups: list[int] = []
        self.failing = set(failing)
        self.gate = threading.Event()
        self.writing = threading.Event()

    def record_calls(self, calls):
        self.writing.set()
        self.gate.wait()
        self.groups.append(len(calls))
        if len(self.groups) in self.failing:
            raise OSError("disk gone")
        super().record_calls(calls)


def record_in_thread(attempt: ActionJournal, log, key: str, seen: dict) -> threading.Thread:
    """Record one call of ``key``'s action on a new thread; ``seen[key]`` says whether the
    call was in the log when ``record_call`` returned, or what it raised."""
    identity = attempt.identity(key, 1, 1, "work")

    def record() -> None:
        try:
            attempt.record_call(identity, DurableCall(0, "m:f", "digest", key.upper()))
        except ActionLogError as error:
            seen[key] = error
            return
        seen[key] = [call.result for call in log.calls(identity)] == [key.upper()]

    thread = threading.Thread(target=record)
    thread.start()
    return thread


def record_behind_a(attempt: ActionJournal, log: GroupLog, keys: str, seen: dict) -> None:
    """Record a call of key "a" (held in its transaction by the log's gate), then one of
    each of ``keys`` while it is held; then let them all through."""
    first = record_in_thread(attempt, log, "a", seen)
    assert log.writing.wait(10)
    others = [record_in_thread(attempt, log, key, seen) for key in keys]
    assert eventually(lambda: len(attempt._calls._queue) == len(keys))
    assert seen == {}  # nobody returned before its transaction
    log.gate.set()
    for thread in (first, *others):
        thread.join(10)


def test_calls_that_finish_while_one_is_written_share_the_next_transaction():
    """A group commit: the calls that arrive during a write wait, then go in one
    transaction; each thread returns only once its own call is in the log."""
    log = GroupLog()
    attempt = journal(log)
    seen: dict = {}
    record_behind_a(attempt, log, "bcd", seen)
    assert log.groups == [1, 3]
    assert seen == {"a": True, "b": True, "c": True, "d": True}


def test_a_failed_group_fails_each_of_its_calls_as_the_log():
    """Every call of a failed transaction raises its own ActionLogError naming the log;
    the calls of the transaction before it are stored."""
    log = GroupLog(2)
    attempt = journal(log)
    seen: dict = {}
    record_behind_a(attempt, log, "bc", seen)
    assert seen["a"] is True
    b, c = seen["b"], seen["c"]
    assert isinstance(b, ActionLogError) and isinstance(c, ActionLogError) and b is not c
    assert "recording a durable call failed: OSError: disk gone" in str(b)
    assert isinstance(b.__cause__, OSError)
    assert log.calls(attempt.identity("b", 1, 1, "work")) == []
    # The writer role was handed back: the next call is written at once.
    log.failing.clear()
    record_in_thread(attempt, log, "e", seen).join(10)
    assert seen["e"] is True


class JournalTime:
    """The journal's ``time`` module with ``monotonic`` driven by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def __getattr__(self, name: str):
        return getattr(time, name)


@pytest.fixture
def journal_time(monkeypatch) -> JournalTime:
    clock = JournalTime()
    monkeypatch.setattr("flink_agents.runtime.journal._writers.time", clock)
    return clock


def submit_one(attempt: ActionJournal, key: str, index: int = 0) -> threading.Event:
    """Submit one call of ``key``'s action, as an executor thread does; the event is set
    once the writer reported its transaction (which must have succeeded)."""
    written = threading.Event()

    def done(failure: BaseException | None) -> None:
        assert failure is None
        written.set()

    identity = attempt.identity(key, 1, 1, "work")
    attempt.submit_call(identity, DurableCall(index, "m:f", "d", key), done)
    return written


def calls_of_other_actions(attempt: ActionJournal, clock: JournalTime, gap_s: float) -> None:
    """One call each of 16 actions, ``gap_s`` apart, each written before the next ends."""
    for n in range(16):
        assert submit_one(attempt, f"k{n}").wait(10)
        clock.now += gap_s


def test_a_call_lingers_for_others_only_while_many_calls_end_close_together(journal_time):
    """Calls ending faster than ``MIN_RATE`` a second are written in fewer transactions if
    the writer waits a little for others (``call_linger_ms``); slower calls, an action's own
    calls one after another, calls after a quiet spell and callers that wait for the
    commit (``durable_execute``, the call loop) are written at once."""
    attempt = journal(InMemoryActionLog(), call_linger_ms=4)
    writer = attempt._calls
    calls_of_other_actions(attempt, journal_time, 0.003)  # 333 a second
    assert writer.lingered == 0
    journal_time.now += 1
    calls_of_other_actions(attempt, journal_time, 0.001)  # 1,000 a second
    assert writer.lingered == 1  # the 16th: the first over 16 calls at that rate
    assert submit_one(attempt, "k15", 1).wait(10)  # that action's next call
    assert writer.lingered == 1
    journal_time.now += 0.001
    assert submit_one(attempt, "b").wait(10)  # another action's, still at that rate
    assert writer.lingered == 2
    journal_time.now += 0.05
    assert submit_one(attempt, "c").wait(10)  # after 50 ms without a call
    assert writer.lingered == 2
    journal_time.now += 1
    calls_of_other_actions(attempt, journal_time, 0.001)
    lingered = writer.lingered
    record_one = attempt.identity("d", 1, 1, "work"), DurableCall(0, "m:f", "d", "D")
    attempt.record_call(*record_one)  # waits for its commit: never lingers
    encoded = attempt.log.encode_call(*record_one, 1)
    assert writer.write([encoded]) is None  # the call loop's way
    assert writer.lingered == lingered
    never = journal(InMemoryActionLog(), call_linger_ms=0)
    calls_of_other_actions(never, journal_time, 0.001)
    assert never._calls.lingered == 0


def test_calls_ending_while_the_writer_lingers_share_its_transaction(journal_time):
    """The calls submitted while the writer lingers go in its transaction, and each learns
    of it only once it has committed; a caller that waits for its commit ends the wait."""
    log = GroupLog()
    log.gate.set()
    attempt = journal(log, call_linger_ms=4)
    calls_of_other_actions(attempt, journal_time, 0.0005)  # the 16th lingered alone
    assert attempt._calls.lingered == 1 and log.groups == [1] * 16
    attempt._calls._linger_s = 60.0  # from here on, only the waiting caller ends a wait
    ended = [submit_one(attempt, "e")]
    assert eventually(lambda: attempt._calls.lingering)
    ended += [submit_one(attempt, key) for key in "bcd"]
    assert not any(event.is_set() for event in ended)
    assert log.groups == [1] * 16
    attempt.record_call(attempt.identity("w", 1, 1, "work"), DurableCall(0, "m:f", "d", "W"))
    assert all(event.wait(10) for event in ended)
    assert log.groups == [1] * 16 + [5]
    assert [c.result for c in log.calls(attempt.identity("e", 1, 1, "work"))] == ["e"]


class FreshLog(InMemoryActionLog):
    """Notes, for each call it stores, its index and whether it came marked fresh."""

    def __init__(self) -> None:
        super().__init__()
        self.marked: list[tuple[int, bool]] = []

    def record_calls(self, calls):
        self.marked += [(encoded.call.index, encoded.fresh) for encoded in calls]
        super().record_calls(calls)


def test_a_call_is_marked_fresh_only_above_what_earlier_executions_left():
    """The recorder marks a call fresh (the log may skip deleting calls at or above its
    index) only when no call the log held for the action when it began is at or above it:
    a first execution's calls are; a retry's are not until it passes the calls it loaded,
    whether or not they matched."""
    log = FreshLog()
    attempt = journal(log)
    identity = attempt.identity("k", 1, 1, "work")

    def make_calls(recorder, *args: int) -> None:
        for arg in args:
            slot = recorder.begin(_echo, (arg,), {})
            if slot.recorded is None:
                slot.run(_echo, (arg,), {})

    make_calls(attempt.recorder(attempt.lookup("k", 1, 1, "work"), look_up=False), 1, 2)
    assert log.marked == [(0, True), (1, True)]
    log.marked.clear()
    make_calls(
        attempt.recorder(attempt.lookup("k", 1, 1, "work"), look_up=True), 1, 5, 6
    )  # reuses 0, overwrites 1
    assert log.marked == [(1, False), (2, True)]
    assert [c.result for c in log.calls(identity)] == [1, 5, 6]
    log.marked.clear()
    make_calls(
        attempt.recorder(attempt.lookup("k", 1, 1, "work"), look_up=True), 7
    )  # the first call differs
    assert log.marked == [(0, False)]
    assert [c.result for c in log.calls(identity)] == [7]


def _echo(value: int) -> int:
    return value


def _grows(items: list) -> int:
    items.append("added by the call")
    return len(items)


def test_arguments_are_digested_as_the_call_starts_not_when_it_is_made():
    """Without a recorded call to compare with, ``begin`` leaves the digest to ``run`` (the
    executor's thread for async actions), which takes it before the function runs."""
    log = InMemoryActionLog()
    logged = journal(log)
    recorder = logged.recorder(logged.lookup("k", 1, 1, "work"), look_up=False)
    items = ["a"]
    slot = recorder.begin(_grows, (items,), {})
    assert slot.digest is None
    assert slot.run(_grows, (items,), {}) == 2
    assert recorder.calls[0].args_digest == digest_args((["a"],), {})
    # The next attempt compares at once, and matches.
    again = journal(log)
    replayed = again.recorder(again.lookup("k", 1, 1, "work"), look_up=True)
    slot = replayed.begin(_grows, (["a"],), {})
    assert slot.digest == digest_args((["a"],), {})
    assert slot.recorded is not None and slot.replay() == 2


WRITERS = ("action-log-calls", "action-log-writer")


@pytest.fixture
def first_writer_start_fails(monkeypatch):
    """The first start of each of the journal's writer threads raises, as ``Thread.start``
    does when the process can make no more threads."""
    failed: set[str] = set()
    start = threading.Thread.start

    def failing_start(thread: threading.Thread) -> None:
        if thread.name in WRITERS and thread.name not in failed:
            failed.add(thread.name)
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", failing_start)
    return failed


def test_a_writer_that_could_not_start_is_started_by_the_next_call(first_writer_start_fails):
    """A durable call whose writer thread cannot start fails at once and leaves nothing
    queued; the next call starts the thread and is written (it would otherwise wait for a
    thread that never ran, and its action's run stay parked for ever)."""
    attempt = journal(InMemoryActionLog())
    identity = attempt.identity("a", 1, 1, "work")
    reported: list[BaseException | None] = []
    with pytest.raises(ActionLogError, match="recording a durable call failed: RuntimeError"):
        attempt.submit_call(identity, DurableCall(0, "m:f", "d", "A"), reported.append)
    assert first_writer_start_fails == {"action-log-calls"}
    assert submit_one(attempt, "b").wait(10)
    assert reported == []  # the failed call is not written behind its caller's back
    assert attempt.log.calls(identity) == []
    attempt.close()


def test_a_completion_writer_that_could_not_start_is_started_by_the_next_record(
    first_writer_start_fails,
):
    log = BatchLog()
    logged = journal(log, batch_delay_ms=60_000)
    with pytest.raises(ActionLogError, match="recording completed actions failed: RuntimeError"):
        complete_one(logged, 1)
    assert first_writer_start_fails == {"action-log-writer"}
    complete_one(logged, 2)
    logged.flush()
    assert log.count("job-1") == 1 and logged.written == 1
    logged.close()
