"""The event loop on which ``async def`` durable functions run (``durable_execute_async``
with an async client's method, say ``AsyncOpenAI().chat.completions.create``).

A plain function passed to ``durable_execute_async`` blocks a thread of the engine's
executor for as long as it runs: ``num-async-threads`` bounds how many run at once. An
``async def`` function needs no thread: every such call of an engine (and of its
sub-agents) runs as a task of one event loop, on one thread of its own, however many are in
flight (``max-in-flight`` still bounds them). This is what async clients expect: one loop
for all their calls, so a client made once and kept (its connection pool) works on every
call; a loop of its own per call (``asyncio.run``) closes under it after the first.

The loop costs the operator little. Calls handed over while the loop is busy wake it once
(``_take``); outcomes of calls that end in one pass of the loop are written to the action
log together, in one transaction (``ActionJournal.record_calls``), before any of their
futures is done: a call's outcome is durable before its action goes on past it, as on the
executor. Writing blocks the loop for that transaction, as a callback of the loop's own.

As with any event loop, a coroutine must not block: blocking code inside an ``async def``
durable function holds up every other call on the loop. Such code belongs in a plain
function, which runs on the executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from flink_agents._ids import digest_args
from flink_agents.runtime._metrics import AgentMetrics
from flink_agents.runtime.journal import CallFuture, CallSlot

logger = logging.getLogger(__name__)

CANCEL_GRACE_S = 1.0
"""How long ``drain`` gives the calls it cancels to end."""


class _Call:
    """One call handed to the loop: its function and arguments, where its outcome goes."""

    __slots__ = (
        "args",
        "error",
        "function",
        "future",
        "kwargs",
        "metrics",
        "ms",
        "name",
        "result",
        "slot",
    )

    def __init__(
        self,
        function: Callable[..., Coroutine[Any, Any, Any]],
        args: tuple,
        kwargs: dict,
        slot: CallSlot | None,
        metrics: AgentMetrics | None,
        name: str,
    ) -> None:
        self.function = function
        self.args = args
        self.kwargs = kwargs
        self.slot = slot
        self.metrics = metrics
        self.name = name
        self.future: Future[Any] = CallFuture() if slot is not None else Future()
        self.result: Any = None
        self.error: BaseException | None = None
        self.ms = 0.0


class CallLoop:
    """An event loop on a daemon thread of its own, started when made, running durable
    calls' coroutines (``submit``) until ``close``."""

    def __init__(self, name: str = "flink-agents-calls") -> None:
        self._loop = asyncio.new_event_loop()
        self._incoming: deque[_Call] = deque()
        self._waking = False
        """Whether a ``_take`` is scheduled that has not begun taking ``_incoming`` yet."""
        self._ended: list[_Call] = []
        """Calls whose coroutine ended in this pass of the loop, to be recorded together."""
        self._recording = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(
        self,
        function: Callable[..., Coroutine[Any, Any, Any]],
        args: tuple,
        kwargs: dict,
        slot: CallSlot | None,
        metrics: AgentMetrics | None,
        name: str,
    ) -> Future[Any]:
        """Run ``function(*args, **kwargs)`` on the loop; the future is done with its value
        (or exception) once that is recorded in ``slot``'s journal (a ``slot`` of None:
        nothing to record) and counted in ``metrics`` as a call of ``name``."""
        if self._closed:
            raise RuntimeError("the call loop is closed")
        call = _Call(function, args, kwargs, slot, metrics, name)
        self._incoming.append(call)
        # One wake-up for all the calls handed over before the loop takes them: each is a
        # write to the loop's self-pipe and a pass of the loop. ``_take`` clears the flag
        # before it takes, so a call appended after its last look has a wake-up of its own.
        if not self._waking:
            self._waking = True
            self._loop.call_soon_threadsafe(self._take)
        return call.future

    def runs_here(self) -> bool:
        """Whether this is the loop's own thread."""
        return threading.get_ident() == self._thread.ident

    def drain(self, timeout: float | None = None) -> None:
        """Take no more calls, and wait for those in flight to end and be recorded, at most
        ``timeout`` seconds (None: however long they take). Calls still running then are
        cancelled and not recorded, as if the process had stopped: a restore makes them
        again. The loop goes on running (what was made on it, an async client, can still be
        closed on it) until ``close``."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            # The loop's own wait is bounded; this one only guards against a loop that a
            # blocking coroutine holds.
            bound = None if timeout is None else timeout + 2 * CANCEL_GRACE_S
            try:
                asyncio.run_coroutine_threadsafe(self._drain(timeout), self._loop).result(bound)
            except Exception:  # the loop's own failure: calls in flight were lost with it
                logger.exception("durable calls still running could not be waited for")

    def close(self, timeout: float | None = None) -> None:
        """``drain``, then stop the loop and its thread. Idempotent."""
        self.drain(timeout)
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(None if timeout is None else CANCEL_GRACE_S)
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()

    # -- on the loop's thread -------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _take(self) -> None:
        self._waking = False
        incoming, loop, tasks = self._incoming, self._loop, self._tasks
        while incoming:
            task = loop.create_task(self._call(incoming.popleft()))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def _drain(self, timeout: float | None) -> None:
        self._take()
        try:
            await asyncio.wait_for(self._settled(), timeout)
        except TimeoutError:
            abandoned = list(self._tasks)
            for task in abandoned:
                task.cancel()
            if abandoned:
                # A cancelled call cleans up (closes its connection) before it ends.
                await asyncio.wait(abandoned, timeout=CANCEL_GRACE_S)
            logger.warning(
                "%d durable calls still running after %.1f s were cancelled; their outcomes"
                " are not recorded",
                len(abandoned),
                timeout,
            )

    async def _settled(self) -> None:
        """Until every call taken has ended and its outcome is recorded."""
        while self._tasks or self._recording:
            if self._tasks:
                await asyncio.wait(list(self._tasks))
            else:
                await asyncio.sleep(0)

    async def _call(self, call: _Call) -> None:
        if not call.future.set_running_or_notify_cancel():
            return
        slot = call.slot
        if slot is not None and slot.digest is None:  # as the function receives them
            try:
                slot.digest = digest_args(call.args, call.kwargs)
            except Exception as failure:  # not an outcome of the call: nothing is recorded
                call.future.set_exception(failure)  # as ``CallSlot.start`` fails it
                return
        started = time.perf_counter()
        try:
            call.result = await call.function(*call.args, **call.kwargs)
        except Exception as error:
            call.error = error
        except BaseException as error:  # not an outcome (``drain`` cancelled it): not recorded
            call.error = error
            call.ms = (time.perf_counter() - started) * 1000
            self._settle(call, None)
            raise
        call.ms = (time.perf_counter() - started) * 1000
        if slot is None:
            self._settle(call, None)
            return
        call.future.set_ended()  # it runs no more; its outcome is stored next
        self._ended.append(call)
        if not self._recording:
            self._recording = True
            self._loop.call_soon(self._record)

    def _record(self) -> None:
        """Write the outcomes of the calls that ended in this pass, in one transaction, then
        let their actions go on."""
        self._recording = False
        ended, self._ended = self._ended, []
        by_journal: dict[int, list[_Call]] = {}  # an engine's calls (its sub-agents' too) share one
        for call in ended:
            by_journal.setdefault(id(call.slot.recorder.journal), []).append(call)
        for calls in by_journal.values():
            outcomes = []
            for call in calls:
                recorder = call.slot.recorder
                outcomes.append(
                    (recorder, recorder.outcome(call.slot, call.result, call.error, call.ms))
                )
            try:
                failures = calls[0].slot.recorder.journal.record_calls(outcomes)
            except BaseException as error:  # not the log's (those are returned): a bug
                logger.exception("recording durable calls failed")
                failures = [error] * len(calls)
            for call, failure in zip(calls, failures, strict=True):
                self._settle(call, failure)

    @staticmethod
    def _settle(call: _Call, failure: BaseException | None) -> None:
        error = call.error if failure is None else failure
        if call.metrics is not None:
            try:
                call.metrics.durable_call(call.name, call.ms, error is not None)
            except Exception:  # the call's action must still go on, and the pass's others
                logger.exception("counting durable call %s failed", call.name)
        with contextlib.suppress(Exception):  # a future cancelled meanwhile
            if error is None:
                call.future.set_result(call.result)
            else:
                call.future.set_exception(error)
