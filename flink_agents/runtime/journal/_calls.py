"""Call recording: how one action execution's durable calls are numbered, answered from the
action log while they match what an earlier execution recorded, and recorded when they run
(the replay rules of the calls themselves are in ``_replay``'s docstring)."""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any

from flink_agents._ids import digest_args, function_id
from flink_agents.runtime.action_log import (
    ActionIdentity,
    ActionLogError,
    DurableCall,
    UnstorableValueError,
)

if TYPE_CHECKING:
    from flink_agents.runtime.journal._replay import ActionJournal

logger = logging.getLogger(__name__)


class CallRecorder:
    """Numbers one action execution's durable calls, answers them from the log when they
    match, and records the ones that run.

    Attributes:
        infrastructure_error: the ``ActionLogError`` raised when a call's outcome could not
            be recorded, else None. It is kept here because user code may catch the error
            ``durable_execute`` raised and go on: the runtime must still fail the job.
    """

    def __init__(
        self, journal: ActionJournal, identity: ActionIdentity, recorded: list[DurableCall]
    ) -> None:
        self.journal = journal
        self.identity = identity
        self._recorded = recorded
        self._loaded = len(recorded)
        """Calls the log held for the action when this execution began."""
        self._finished: dict[int, DurableCall] = {}
        self._next_index = 0
        self.started_ms = journal.clock()
        self.infrastructure_error: ActionLogError | None = None

    @property
    def calls(self) -> list[DurableCall]:
        """The calls made or replayed so far, in call order.

        Raises:
            ActionLogError: ``infrastructure_error``: a call is missing from this list, and
                a record written without it would replay the action wrongly.
        """
        if self.infrastructure_error is not None:
            raise self.infrastructure_error
        finished = self._finished
        return [finished[i] for i in sorted(finished)] if finished else []

    def begin(self, function: Callable[..., Any], args: tuple, kwargs: dict) -> CallSlot:
        """The next call: with its recorded outcome if the log has a matching one.

        The arguments are digested here only when a recorded call is there to compare them
        with; else when the call starts (``CallSlot.start``, ``CallSlot.run``), which for
        an ``async def`` action is on the executor's thread, off the operator thread, which
        parks and resumes every run (``bench/RESULTS.md``).
        """
        index = self._next_index
        self._next_index += 1
        slot = CallSlot(self, index, function_id(function))
        if index < len(self._recorded):
            slot.digest = digest_args(args, kwargs)
            earlier = self._recorded[index]
            reusable = earlier.error is None or index + 1 < len(self._recorded)
            if (
                earlier.function == slot.function
                and earlier.args_digest == slot.digest
                and reusable
            ):
                slot.recorded = earlier
                self._finished[index] = earlier
                self.journal.reused_calls += 1
                return slot
            del self._recorded[index:]  # this call and everything after it is void
        return slot

    def finish(
        self,
        slot: CallSlot,
        result: Any,
        error: BaseException | None,
        duration_ms: float | None = None,
    ) -> None:
        """Record how a call ended (and how long it took), before the action sees it.

        Raises:
            ActionLogError: the log failed (also kept in ``infrastructure_error``).
            UnstorableValueError: the result cannot be serialized.
        """
        call = self.outcome(slot, result, error, duration_ms)
        try:
            self.journal.record_call(self.identity, call, self.fresh(call.index))
        except (ActionLogError, UnstorableValueError) as failure:
            _under(failure, error)
            self.settle(call, failure)
            raise
        self.settle(call, None)

    def submit(
        self,
        slot: CallSlot,
        result: Any,
        error: BaseException | None,
        duration_ms: float,
        done: Callable[[BaseException | None], None],
    ) -> None:
        """``finish`` without waiting for the log: the outcome goes to the journal's call
        writer, and ``done`` is called with None once it is stored, else with what kept it
        from the log (``ActionLogError``, also kept in ``infrastructure_error``, or
        ``UnstorableValueError``): on the writer's thread, or on this one for a failure
        found at once."""
        call = self.outcome(slot, result, error, duration_ms)

        def written(failure: BaseException | None) -> None:
            _under(failure, error)
            self.settle(call, failure)
            done(failure)

        try:
            self.journal.submit_call(self.identity, call, written, self.fresh(call.index))
        except (ActionLogError, UnstorableValueError) as failure:
            written(failure)

    def fresh(self, index: int) -> bool:
        """Whether the log holds no call of this action at or above ``index`` (what an
        earlier execution wrote was loaded when this one began: see ``EncodedCall``)."""
        return index >= self._loaded

    @staticmethod
    def outcome(
        slot: CallSlot, result: Any, error: BaseException | None, duration_ms: float | None
    ) -> DurableCall:
        """How the call in ``slot`` ended, as the log stores it."""
        return DurableCall(slot.index, slot.function, slot.digest, result, error, duration_ms)

    def settle(self, call: DurableCall, failure: BaseException | None) -> None:
        """``call``'s outcome was stored (``failure`` None), or could not be: an
        ``ActionLogError`` is kept as ``infrastructure_error``."""
        if failure is None:
            self._finished[call.index] = call
        elif isinstance(failure, ActionLogError) and self.infrastructure_error is None:
            self.infrastructure_error = failure


def _under(failure: BaseException | None, error: BaseException | None) -> None:
    """Chain a call's own ``error`` under ``failure``, the log's failure to store its
    outcome (which came on the writer's thread): as if the log had failed while handling
    it, so the user's error stays in the traceback."""
    if failure is None or error is None:
        return
    inner = failure.__cause__ or failure
    if inner.__context__ is None and inner is not error:
        inner.__context__ = error


class CallFuture(Future):
    """The future of a durable call whose outcome the action log stores. It is done once
    the outcome is stored; it has *ended* before that, as soon as the function returned or
    raised (``set_ended``), and at the latest when it is done (a failure before the call
    ran, a cancellation). An ended call runs no more, so it no longer takes a place among
    ``max-in-flight``; its action still waits for the future, as the log requires."""

    def __init__(self) -> None:
        super().__init__()
        self._end_lock = threading.Lock()
        self._ended = False
        self._ended_callbacks: list[Callable[[Future[Any]], None]] = []

    @property
    def ended(self) -> bool:
        """Whether the call has returned or raised (or the future is done)."""
        return self._ended

    def add_ended_callback(self, fn: Callable[[Future[Any]], None]) -> None:
        """Call ``fn(self)`` once the call has ended, at once if it has."""
        with self._end_lock:
            if not self._ended:
                self._ended_callbacks.append(fn)
                return
        fn(self)

    def set_ended(self) -> None:
        """The function has returned or raised; its outcome is about to be stored."""
        with self._end_lock:
            if self._ended:
                return
            self._ended = True
            callbacks, self._ended_callbacks = self._ended_callbacks, []
        for fn in callbacks:
            try:
                fn(self)
            except Exception:
                logger.exception("a callback of a durable call's end failed")

    def set_result(self, result: Any) -> None:
        self.set_ended()
        super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        self.set_ended()
        super().set_exception(exception)

    def cancel(self) -> bool:
        # (Ended just after its done-callbacks: ``Future.cancel`` runs them itself.)
        cancelled = super().cancel()
        if cancelled:
            self.set_ended()
        return cancelled


class CallSlot:
    """One durable call in flight: its number, and the recorded outcome if replayed."""

    __slots__ = ("digest", "function", "index", "recorded", "recorder")

    def __init__(self, recorder: CallRecorder, index: int, function: str) -> None:
        self.recorder = recorder
        self.index = index
        self.function = function
        self.digest: str | None = None  # the arguments', once taken (``begin`` or ``run``)
        self.recorded: DurableCall | None = None

    def replay(self) -> Any:
        """The recorded outcome: its result, or its exception raised again."""
        assert self.recorded is not None
        if self.recorded.error is not None:
            raise self.recorded.error
        return self.recorded.result

    def run(self, function: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """Execute the call and record how it ended (before returning or raising).

        Raises:
            ActionLogError: the outcome could not be recorded (whether the function returned
                or raised): the log failed, not the call.
            UnstorableValueError: the result cannot be serialized.
            Exception: what the function raised, once recorded.
        """
        if self.digest is None:  # as the function receives them, before it may change them
            self.digest = digest_args(args, kwargs)
        started = time.perf_counter()
        try:
            result = function(*args, **kwargs)
        except Exception as error:
            self.recorder.finish(self, None, error, (time.perf_counter() - started) * 1000)
            raise
        self.recorder.finish(self, result, None, (time.perf_counter() - started) * 1000)
        return result

    def start(
        self,
        call: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        future: Future[Any],
        timed: Callable[[Callable[[], Any]], Any] | None = None,
    ) -> None:
        """``run`` for a call on the executor, without waiting for the log: execute the
        call, hand its outcome to the journal's call writer (``CallRecorder.submit``) and
        return, so that this thread is free at once. ``future`` gets what ``run`` would
        have returned or raised, once the outcome is stored. ``call`` takes the arguments;
        ``timed`` (the metrics' ``timed_call`` of the function's name) runs it bound.
        """
        try:
            if self.digest is None:  # as the function receives them, before it may change them
                self.digest = digest_args(args, kwargs)
            bound = functools.partial(call, *args, **kwargs)
            started = time.perf_counter()
            try:
                result = bound() if timed is None else timed(bound)
                error = None
            except Exception as raised:
                result, error = None, raised
            duration_ms = (time.perf_counter() - started) * 1000
            if type(future) is CallFuture:
                future.set_ended()  # it runs no more; its outcome is stored next

            def done(failure: BaseException | None) -> None:
                if failure is not None:
                    future.set_exception(failure)
                elif error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(result)

            self.recorder.submit(self, result, error, duration_ms, done)
        except BaseException as failure:  # not an outcome of the call: nothing is recorded
            with contextlib.suppress(InvalidStateError):
                future.set_exception(failure)
            raise
