"""The executor of plain durable functions stops within a bound (``CallThreads.stop``)."""

import threading
import time
from concurrent.futures import Future

import pytest

from flink_agents.runtime._call_threads import CallThreads
from flink_agents.runtime._context import _DurableCall
from flink_agents.runtime.action_log import ActionIdentity, InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal, Lookup


def test_stop_waits_for_running_calls_up_to_its_bound_and_cancels_queued_ones():
    threads = CallThreads(max_workers=2, thread_name_prefix="flink-agents-test")
    running = threading.Barrier(3)
    release = threading.Event()
    queued: list[Future] = []

    def quick() -> str:
        running.wait(5)
        while not queued[0].cancelled():  # ends once ``stop`` has cancelled the queue
            time.sleep(0.005)
        return "quick"

    def held() -> bool:
        running.wait(5)
        return release.wait(30)

    calls = [threads.submit(quick), threads.submit(held)]
    running.wait(5)  # both threads are busy
    queued.append(threads.submit(time.sleep, 0))
    assert threads.stop(timeout=1.0) == 1  # the held call is still running
    assert calls[0].result(timeout=0) == "quick"
    release.set()
    assert calls[1].result(timeout=5) is True
    assert threads.stop(timeout=5) == 0  # its thread ended with the call


def test_stop_without_a_bound_waits_for_every_call():
    threads = CallThreads(max_workers=1, thread_name_prefix="flink-agents-test")
    calls = [threads.submit(time.sleep, 0.05) for _ in range(3)]
    assert threads.stop() == 0
    assert all(call.done() and not call.cancelled() for call in calls)
    assert not any(t.name.startswith("flink-agents-test") for t in threading.enumerate())


def test_a_logged_call_the_stopped_threads_never_ran_fails_its_future():
    """A durable call queued behind a running one when the threads stop (``stop`` cancels
    what is queued) never runs ``CallSlot.start``, which completes its future on every path
    it runs: its future fails instead of staying pending for ever (its run parked, and its
    place among ``max-in-flight`` taken)."""
    threads = CallThreads(max_workers=1, thread_name_prefix="flink-agents-test")
    journal = ActionJournal(InMemoryActionLog(), "job")
    release = threading.Event()

    def call(name: str) -> Future:
        recorder = journal.recorder(
            Lookup(ActionIdentity("job", name, 1, 0, "act"), None, None), look_up=False
        )
        awaiting = _DurableCall(
            threads, release.wait, (30,), {}, recorder.begin(release.wait, (30,), {})
        )
        return next(awaiting.__await__())  # the future the engine waits for

    running, queued = call("running"), call("queued")
    assert threads.stop(timeout=0.2) == 1
    with pytest.raises(RuntimeError, match="never run: its threads had stopped"):
        queued.result(timeout=5)
    assert queued.ended and not running.done()
    release.set()
    assert running.result(timeout=5) is True
    journal.close()
