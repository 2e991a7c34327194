"""``async def`` durable functions run on the engine's one event loop (``CallLoop``)."""

import asyncio
import threading
import time

import pytest

from flink_agents.runtime import LocalRunner
from flink_agents.runtime._call_loop import CallLoop
from flink_agents.runtime._metrics import AgentMetrics
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime.action_log import (
    ActionIdentity,
    ActionLogError,
    InMemoryActionLog,
    UnstorableValueError,
)
from flink_agents.runtime.journal import ActionJournal, CallFuture, CallRecorder, Lookup
from flink_agents.testing.llm_server import Rule, ScriptedLLMServer
from tests.runtime import async_agents


@pytest.fixture(autouse=True)
def _clear_calls():
    async_agents.CALLS.clear()
    yield
    async_agents.KEPT.clear()
    async_agents.GATHERING.clear()


@pytest.mark.parametrize("logged", [True, False])  # with an action log, without one
def test_a_kept_async_client_serves_every_call(logged):
    """An ``AsyncOpenAI`` client made by the first call and kept: its connections belong to
    the loop of that call. With an event loop per call (``asyncio.run``) the second call
    failed with "Event loop is closed"; on the engine's loop, every call of both entry
    points (``durable_execute_async`` and a sync action's ``durable_execute``) is served."""
    journal = ActionJournal(InMemoryActionLog(), "job") if logged else None
    with ScriptedLLMServer([Rule(reply_text="echo {last_user}")]) as server:
        async_agents.KEPT["url"] = server.base_url
        runner = LocalRunner(async_agents.KeptClientAgent, journal=journal)
        try:
            for word in ("a", "b", "c"):
                assert runner.run(word, word) == [[f"echo {word}", f"echo echo {word}"]]
        finally:
            runner.engine.close()
        assert len(server.calls) == 6
    threads = {thread for _, thread in async_agents.CALLS}
    assert threads == {"flink-agents-calls"}  # one loop, on a thread of its own


def test_async_def_calls_in_flight_are_bounded_by_max_in_flight_not_by_threads():
    """Eight calls wait at a barrier of eight: they only return if all eight run at once,
    which one executor thread could not do; the loop runs them all."""
    async_agents.GATHERING["barrier"] = asyncio.Barrier(8)
    runner = LocalRunner(
        async_agents.GatheringAgent, options=AgentOptions(num_async_threads=1, max_in_flight=8)
    )
    try:
        outputs = []
        for n in range(8):
            outputs += runner.feed(f"k{n}", n)
        outputs += runner.finish()
    finally:
        runner.engine.close()
    assert sorted(outputs) == list(range(8))
    assert len(async_agents.CALLS) == 8


def _recorder(journal: ActionJournal, key: str) -> CallRecorder:
    return journal.recorder(
        Lookup(ActionIdentity("job", key, 1, 0, "call"), None, None), look_up=False
    )


class _CountingLog(InMemoryActionLog):
    """Counts the transactions of recorded calls (``record_calls``) and their sizes."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def record_calls(self, calls):
        self.batches.append(len(calls))
        super().record_calls(calls)


def test_each_calls_outcome_is_in_the_log_before_its_future_is_done():
    log = _CountingLog()
    journal = ActionJournal(log, "job")
    loop = CallLoop()
    seen_in_log: list[bool] = []

    async def answer(n: int) -> int:
        await asyncio.sleep(0.01)
        return n * 10

    futures = []
    recorders = []
    try:
        for n in range(20):
            recorder = _recorder(journal, f"k{n}")
            slot = recorder.begin(answer, (n,), {})
            future = loop.submit(answer, (n,), {}, slot, None, slot.function)
            future.add_done_callback(
                lambda _, r=recorder: seen_in_log.append(
                    [c.result for c in log.calls(r.identity)] != []
                )
            )
            futures.append(future)
            recorders.append(recorder)
        assert [f.result(timeout=10) for f in futures] == [n * 10 for n in range(20)]
    finally:
        loop.close()
    assert seen_in_log == [True] * 20
    for n, recorder in enumerate(recorders):
        assert [c.result for c in log.calls(recorder.identity)] == [n * 10]
        assert [c.result for c in recorder.calls] == [n * 10]
    assert sum(log.batches) == 20


def test_a_call_ends_before_its_outcome_is_stored():
    """The future ends (its place among ``max-in-flight`` free) as soon as the coroutine
    returns; it is done only once the log has stored the outcome."""
    gate = threading.Event()

    class SlowLog(InMemoryActionLog):
        def record_calls(self, calls):
            gate.wait(10)
            super().record_calls(calls)

    log = SlowLog()
    journal = ActionJournal(log, "job")
    loop = CallLoop()

    async def answer() -> int:
        return 42

    try:
        recorder = _recorder(journal, "k")
        slot = recorder.begin(answer, (), {})
        future = loop.submit(answer, (), {}, slot, None, slot.function)
        ended = threading.Event()
        future.add_ended_callback(lambda _: ended.set())
        assert ended.wait(10)
        assert not future.done()
        assert log.calls(recorder.identity) == []
        gate.set()
        assert future.result(timeout=10) == 42
        assert [c.result for c in log.calls(recorder.identity)] == [42]
        late = []
        future.add_ended_callback(late.append)  # ended already: called at once
        assert late == [future]
    finally:
        gate.set()
        loop.close()


def test_a_call_future_done_without_ending_ends_too():
    """A failure before the call ran completes the future directly: it ends then (before
    its done-callbacks run; a cancelled one just after), so whatever waits for the end (a
    place among ``max-in-flight``) is never left waiting."""
    for finish, order in (
        (lambda f: f.set_exception(RuntimeError("before the call")), ["ended", "done"]),
        (lambda f: f.set_result(1), ["ended", "done"]),
        (lambda f: f.cancel(), ["done", "ended"]),
    ):
        seen: list[str] = []
        future = CallFuture()
        future.add_ended_callback(lambda _, seen=seen: seen.append("ended"))
        future.add_done_callback(lambda _, seen=seen: seen.append("done"))
        finish(future)
        assert seen == order


def test_calls_that_end_together_are_written_in_one_transaction():
    """Calls whose coroutines end in one pass of the loop: one ``record_calls``."""
    log = _CountingLog()
    journal = ActionJournal(log, "job")
    loop = CallLoop()
    gate = threading.Event()

    async def held(n: int) -> int:
        return n

    async def hold_the_loop() -> None:
        gate.wait(10)  # blocks the loop while the others are handed to it

    try:
        first = loop.submit(hold_the_loop, (), {}, None, None, "hold")
        time.sleep(0.05)  # the loop is inside hold_the_loop now
        futures = []
        for n in range(5):
            slot = _recorder(journal, f"k{n}").begin(held, (n,), {})
            futures.append(loop.submit(held, (n,), {}, slot, None, slot.function))
        gate.set()
        first.result(timeout=10)
        assert [f.result(timeout=10) for f in futures] == list(range(5))
    finally:
        loop.close()
    assert log.batches == [5]


def test_a_result_the_log_cannot_store_fails_its_own_call_only():
    log = InMemoryActionLog()
    journal = ActionJournal(log, "job")
    good, bad = _recorder(journal, "good"), _recorder(journal, "bad")
    good_call = good.outcome(good.begin(len, ("x",), {}), 1, None, 2.0)
    bad_call = bad.outcome(bad.begin(len, ("y",), {}), lambda: None, None, 2.0)
    failures = journal.record_calls([(good, good_call), (bad, bad_call)])
    assert failures[0] is None
    assert isinstance(failures[1], UnstorableValueError)
    assert [c.result for c in log.calls(good.identity)] == [1]
    assert log.calls(bad.identity) == []
    assert bad.infrastructure_error is None  # the action's fault, not the log's


def test_a_failing_log_fails_every_call_of_the_transaction_as_the_logs_fault():
    class Broken(InMemoryActionLog):
        def record_calls(self, calls):
            raise OSError("disk full")

    journal = ActionJournal(Broken(), "job")
    first, second = _recorder(journal, "a"), _recorder(journal, "b")
    calls = [
        (first, first.outcome(first.begin(len, ("x",), {}), 1, None, 1.0)),
        (second, second.outcome(second.begin(len, ("y",), {}), 2, None, 1.0)),
    ]
    failures = journal.record_calls(calls)
    assert all(isinstance(f, ActionLogError) and "disk full" in str(f) for f in failures)
    assert first.infrastructure_error is failures[0]
    assert second.infrastructure_error is failures[1]
    with pytest.raises(ActionLogError):
        first.calls  # noqa: B018 (the recorder refuses to hand out an incomplete list)


def test_an_unstorable_async_result_goes_to_the_error_policy():
    """The action's own fault (its call's result cannot be stored), not the log's."""
    runner = LocalRunner(
        async_agents.UnstorableAgent,
        journal=ActionJournal(InMemoryActionLog(), "job"),
        options=AgentOptions(error_policy="error-output"),
    )
    try:
        assert runner.run("k", "x") == []
    finally:
        runner.engine.close()
    [error] = runner.errors
    assert error["error"].startswith("UnstorableValueError")


def test_close_waits_for_calls_in_flight_and_records_them():
    log = InMemoryActionLog()
    journal = ActionJournal(log, "job")
    loop = CallLoop()

    async def slow() -> str:
        await asyncio.sleep(0.2)
        return "done"

    recorder = _recorder(journal, "k")
    slot = recorder.begin(slow, (), {})
    future = loop.submit(slow, (), {}, slot, None, slot.function)
    loop.close()
    assert future.result(timeout=0) == "done"
    assert [c.result for c in log.calls(recorder.identity)] == ["done"]
    with pytest.raises(RuntimeError, match="closed"):
        loop.submit(slow, (), {}, None, None, "slow")


def test_a_failed_async_call_raises_inside_the_action_and_is_counted():
    async def refuse(text: str) -> str:
        raise ConnectionError(f"refused {text}")

    loop = CallLoop()
    try:
        metrics = AgentMetrics()
        future = loop.submit(refuse, ("x",), {}, None, metrics, "refuse")
        with pytest.raises(ConnectionError, match="refused x"):
            future.result(timeout=10)
        snapshot = metrics.snapshot()
    finally:
        loop.close()
    assert snapshot["numOfDurableCalls"] == 1
    assert snapshot["numOfDurableCallsFailed"] == 1
    assert snapshot["function.refuse.numOfDurableCalls"] == 1


def test_a_bounded_drain_cancels_the_calls_still_running_and_records_none_of_them():
    """A subtask stopping before its input ends waits ``stop-wait-ms`` for its calls: one
    that ends in time is recorded; one still running is cancelled, its outcome not
    recorded (a restore makes it again, as after a crash), and the loop's thread ends."""
    log = _CountingLog()
    journal = ActionJournal(log, "job")
    loop_threads = _loop_threads()
    loop = CallLoop()
    cleaned_up = threading.Event()

    async def answer(seconds: float) -> float:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cleaned_up.set()
            raise
        return seconds

    quick, slow = _recorder(journal, "quick"), _recorder(journal, "slow")
    futures = []
    for recorder, seconds in ((quick, 0.05), (slow, 60.0)):
        slot = recorder.begin(answer, (seconds,), {})
        futures.append(loop.submit(answer, (seconds,), {}, slot, None, slot.function))
    loop.close(timeout=0.5)
    assert futures[0].result(timeout=0) == 0.05
    with pytest.raises(asyncio.CancelledError):
        futures[1].result(timeout=0)
    assert cleaned_up.is_set()
    assert [c.result for c in log.calls(quick.identity)] == [0.05]
    assert log.calls(slow.identity) == []
    assert _loop_threads() == loop_threads  # its own has ended
    journal.close()


def _loop_threads() -> int:
    return sum(t.name == "flink-agents-calls" for t in threading.enumerate())


class _Undigestible:
    """An argument the action log cannot digest: no pickle, and a ``repr`` that raises."""

    def __reduce__(self):
        raise TypeError("not picklable")

    def __repr__(self) -> str:
        raise ValueError("no repr either")


async def _one(_: object = None) -> int:
    return 1


def test_a_call_whose_arguments_cannot_be_digested_fails_its_future_and_the_loop_goes_on():
    """As on an executor's thread (``CallSlot.start``): the digest's error fails the call's
    future, which ends it (its place among ``max-in-flight`` is free) and records
    nothing. Before, the loop's task died with it, the future stayed pending for ever and
    its run stayed parked."""
    journal = ActionJournal(InMemoryActionLog(), "job")
    loop = CallLoop()
    try:
        recorder = _recorder(journal, "k")
        slot = recorder.begin(_one, (_Undigestible(),), {})
        future = loop.submit(_one, (_Undigestible(),), {}, slot, None, slot.function)
        with pytest.raises(ValueError, match="no repr either"):
            future.result(timeout=10)
        assert future.ended
        assert journal.log.calls(recorder.identity) == []
        other = _recorder(journal, "other")
        slot = other.begin(_one, (), {})
        assert loop.submit(_one, (), {}, slot, None, slot.function).result(timeout=10) == 1
    finally:
        loop.close()


def test_a_metric_that_fails_does_not_strand_the_calls_recorded_with_it(caplog):
    """Calls recorded in one pass are settled one after another: a metrics failure on the
    first must not leave the others' futures pending (their runs parked for ever)."""

    class FailingMetrics(AgentMetrics):
        def durable_call(self, name, ms, failed):
            raise RuntimeError("metrics gone")

    journal = ActionJournal(InMemoryActionLog(), "job")
    loop = CallLoop()
    metrics = FailingMetrics()
    try:
        futures = []
        for n in range(5):
            slot = _recorder(journal, f"k{n}").begin(_one, (), {})
            futures.append(loop.submit(_one, (), {}, slot, metrics, slot.function))
        assert [future.result(timeout=10) for future in futures] == [1] * 5
    finally:
        loop.close()
    assert "counting durable call" in caplog.text and "metrics gone" in caplog.text
