"""``async def`` actions and durable calls in the local runner."""

import asyncio
import threading

import pytest

from flink_agents.api import ActionExecutionError
from flink_agents.plan import bind_plan, to_plan
from flink_agents.runtime import LocalRunner
from flink_agents.runtime._engine import RunEngine
from flink_agents.runtime._options import AgentOptions
from tests.runtime import async_agents


@pytest.fixture(autouse=True)
def _clear_calls():
    async_agents.CALLS.clear()


def test_durable_calls_run_on_the_executor_and_their_results_come_back():
    runner = LocalRunner(async_agents.DurableAgent)
    assert runner.run("k", "hi") == [["HI", "HI!", "hi"]]
    assert [arg for arg, _ in async_agents.CALLS] == ["hi", "hi!"]
    assert all(thread.startswith("flink-agents-async") for _, thread in async_agents.CALLS)
    assert runner.short_term_memory("k") == {"last": "HI!"}
    assert runner.sensory_memory("k") == {}


def test_a_failed_durable_call_raises_inside_the_action():
    runner = LocalRunner(async_agents.RecoveringAgent)
    assert runner.run("k", "fail") == ["fallback after service unavailable"]


def test_an_uncaught_durable_failure_fails_the_action_without_memory_writes():
    runner = LocalRunner(async_agents.DurableAgent)
    with pytest.raises(ActionExecutionError) as caught:
        runner.run("k", "fail")
    assert caught.value.action == "shout"
    assert isinstance(caught.value.cause, ConnectionError)
    assert runner.short_term_memory("k") == {}


def test_sync_durable_execute_calls_in_place():
    assert LocalRunner(async_agents.SyncDurableAgent).run("k", "a") == ["A"]
    assert async_agents.CALLS[0][1] == "MainThread"


def test_awaiting_anything_but_a_durable_call_is_a_clear_error():
    runner = LocalRunner(async_agents.ForeignAwaitAgent)
    with pytest.raises(ActionExecutionError, match=r"may only await ctx.durable_execute_async"):
        runner.run("k", 1)
    assert runner.short_term_memory("k") == {}


def _async_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("flink-agents-async")}


def test_start_async_threads_starts_them_all_before_any_call():
    """The dispatcher starts the executor's threads when it opens, so the first burst of
    records does not start one thread per call; the calls then run on those threads."""
    before = _async_threads()
    engine = RunEngine(
        bind_plan(to_plan(async_agents.DurableAgent)), AgentOptions(num_async_threads=5)
    )
    try:
        engine.start_async_threads()
        started = _async_threads() - before
        assert len(started) == 5
        assert engine.executor.submit(async_agents.slow_upper, "x").result(timeout=10) == "X"
        assert async_agents.CALLS[-1][1] in {t.name for t in started}
        assert _async_threads() - before == started  # no thread more for the call
    finally:
        engine.close()


def test_threads_started_before_a_thread_could_not_start_are_not_left_blocked(monkeypatch):
    """A thread that cannot start (the process out of threads) fails the start, and the
    threads started before it are released: each first task waits until all are
    submitted, and would otherwise wait for ever, holding its thread."""
    before = _async_threads()
    engine = RunEngine(
        bind_plan(to_plan(async_agents.DurableAgent)), AgentOptions(num_async_threads=3)
    )
    executor = engine.executor
    submit, tasks = executor.submit, []

    def second_fails(*args):
        if len(tasks) == 2:
            raise RuntimeError("can't start new thread")
        tasks.append(submit(*args))
        return tasks[-1]

    monkeypatch.setattr(executor, "submit", second_fails)
    try:
        with pytest.raises(RuntimeError, match="can't start new thread"):
            engine.start_async_threads()
        assert [task.result(timeout=5) for task in tasks] == [True, True]
        assert len(_async_threads() - before) == 2
    finally:
        engine.close()


def test_a_plan_without_async_actions_starts_no_thread():
    before = _async_threads()
    engine = RunEngine(bind_plan(to_plan(async_agents.SyncDurableAgent)), AgentOptions())
    try:
        engine.start_async_threads()
        assert engine._executor is None
        assert _async_threads() == before
    finally:
        engine.close()


@pytest.mark.parametrize("action_log", [None, "none"])  # the in-memory log; no log
def test_an_async_def_durable_function_is_awaited_and_its_value_returned(action_log):
    async_agents.CALLS.clear()
    options = AgentOptions() if action_log is None else AgentOptions(action_log=action_log)
    runner = LocalRunner(async_agents.AwaitsAsyncFunctions, options=options)
    assert runner.run("k", "a") == [["A", "A!"]]
    assert [text for text, _ in async_agents.CALLS] == ["a", "a!"]
    # The async def function on the engine's event loop; the plain function that returns a
    # coroutine on an executor thread, its coroutine on an event loop of its own there.
    assert [thread.split("_")[0] for _, thread in async_agents.CALLS] == [
        "flink-agents-calls",
        "flink-agents-async",
    ]
    assert LocalRunner(async_agents.SyncCallsAsyncFunction, options=options).run("k", "b") == ["B"]
    runner.engine.close()


def test_an_async_def_durable_functions_value_is_recorded_and_replayed():
    from flink_agents.runtime.action_log import InMemoryActionLog
    from flink_agents.runtime.journal import ActionJournal

    async_agents.CALLS.clear()
    async_agents.ASYNC_CRASHES.clear()
    log = InMemoryActionLog()
    first = LocalRunner(async_agents.AwaitsAsyncFunctions, journal=ActionJournal(log, "job"))
    with pytest.raises(KeyboardInterrupt):
        first.run("k", "crash")
    assert len(async_agents.CALLS) == 2
    first.engine.close()

    second = LocalRunner(async_agents.AwaitsAsyncFunctions, journal=ActionJournal(log, "job"))
    assert second.run("k", "crash") == [["CRASH", "CRASH!"]]
    assert len(async_agents.CALLS) == 2  # both answered from the log: the values, not coroutines
    assert second.engine.journal.reused_calls == 2
    second.engine.close()


def test_an_async_def_durable_function_runs_where_an_event_loop_runs_already():
    """A local run from code that runs an event loop (a notebook): ``durable_execute`` of an
    ``async def`` function on that thread still gets its value."""
    runner = LocalRunner(async_agents.SyncCallsAsyncFunction, options=AgentOptions())

    async def notebook_cell() -> list:
        return runner.run("k", "c")

    assert asyncio.run(notebook_cell()) == ["C"]
