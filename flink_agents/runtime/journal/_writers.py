"""The action journal's writer threads, and what is written when.

**What is written when** (design section 5: "a durable call's result is durable before the
action goes on past that call"):

- A durable call's outcome is written before the action sees it, hidden behind the call's
  own latency. Nothing else is needed for the guarantee that a recorded call is not paid
  again. The journal's **call writer** (``CallWriter``, a daemon thread) writes every
  outcome queued by the time it is free in one ``ActionLog.record_calls`` transaction (a
  group commit). A call on the executor is encoded on its thread and queued
  (``submit_call``), and the thread is free at once; its action's future is completed once
  the transaction has committed. ``record_call`` (a sync ``durable_execute``) and the call
  loop's ``record_calls`` (the outcomes of the ``async def`` calls that ended in one pass)
  queue theirs and wait for the commit. Calls in flight that finish close together share a
  transaction rather than queue for one each (``bench/RESULTS.md``).
- A completed action's record is *encoded* on the operator thread (so a value the
  serializer cannot store raises ``UnstorableValueError`` there and then, the action's
  fault) and handed to the journal's **writer**: one daemon thread per journal that writes
  queued records with ``ActionLog.complete_many``, one transaction per batch. A batch is
  written when it reaches ``batch_size`` records (512), when ``batch_delay_ms`` (20 ms) have
  passed since its first record was queued, on ``flush`` or ``close``, whichever comes
  first. The thread starts with the first record. The queue is bounded (``max_queued``
  records, ``max_queued_bytes`` of payload):
  when the writer falls behind, ``complete`` waits for it (backpressure), never holding more.
  A record lost because the process died before its batch was written costs nothing but
  CPU: its action runs again on replay, and its durable calls, already in the log, are
  answered from it. The memory and events the engine applies after ``complete`` returns are
  Flink state, rolled back with it; a checkpoint taken after them does not replay the run.
- A failure of the writer is kept and raised, as the ``ActionLogError`` naming the log, from
  the next operation of the operator thread (``complete``, ``lookup``, ``recorder``,
  ``maybe_prune``) and from ``flush`` and ``close``: the job fails as with any failure of
  the log. ``record_call`` does not raise it: a paid call's result is still recorded if the
  log takes it, so the restored attempt need not pay for it again.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from flink_agents.runtime.action_log import (
    ActionIdentity,
    ActionLog,
    ActionLogError,
    EncodedCall,
    EncodedRecord,
)
from flink_agents.runtime.journal._errors import log_error

if TYPE_CHECKING:
    from flink_agents.runtime.journal._replay import ActionJournal

logger = logging.getLogger(__name__)

BATCH_SIZE = 512
"""Completed records per transaction, at most (a full batch is written at once)."""
BATCH_DELAY_MS = 20
"""How long a queued completed record waits for others before its batch is written."""
MAX_QUEUED = 4096
"""Completed records queued or being written, at most; ``complete`` waits beyond."""
MAX_QUEUED_BYTES = 64 * 1024 * 1024
"""Payload bytes queued or being written, at most; ``complete`` waits beyond."""
CALL_LINGER_MS = 4.0
"""How long a durable call's outcome waits for others to share its transaction while calls
are ending faster than ``CallWriter.MIN_RATE`` a second (see ``CallWriter``)."""


class CallWriter:
    """The daemon thread that writes one journal's durable-call outcomes, with group
    commits: each pass writes every outcome queued by then in one ``ActionLog.record_calls``
    transaction, then tells each submitter how its transaction went (``done``: None once
    committed, else the failure, handed to every call of that transaction).

    Outcomes come from the executor's threads (``submit``: the thread queues its call and
    is free at once; its action learns the outcome when ``done`` completes its future) and
    from callers that wait for the commit (``write``: a sync ``durable_execute``, the call
    loop's batches). While calls end faster than ``MIN_RATE`` a second (over the last
    ``_WINDOW``) and the last transaction held a call of another action, a pass that found
    only submitted calls waits ``linger_s`` from the first one's arrival, so that the calls
    ending meanwhile share its transaction; a waiting caller cuts that short. An action's
    own calls one after another, slower calls and waiting callers never linger.

    Why a thread of its own: in PyFlink's thread mode every Python thread shares the
    operator's GIL, and each time a thread gives the GIL up and takes it back (a blocking
    lock, a sleep, each SQLite statement) the operator thread may wait for it: that, more
    than their CPU, is what the log's threads cost the operator. When each executor thread
    wrote its own call's outcome, or waited for another thread to write it, recording cost
    about two such hand-overs per call; a submitted call costs its thread none, the writer
    a few per transaction. With one-statement groups of first calls (``SqliteActionLog``)
    that took many plain calls in flight closer to the ideal rate, with less CPU
    (``bench/RESULTS.md``).

    The thread starts with the first call and holds its journal only weakly: a journal
    dropped without ``close`` gets its queue written and its thread ended (within
    ``IDLE_WAIT_S``).
    """

    MIN_RATE = 800
    """Calls a second (over the last ``_WINDOW``) from which a pass lingers."""
    _WINDOW = 16
    IDLE_WAIT_S = 1.0

    def __init__(
        self, log: ActionLog, owner: weakref.ref[ActionJournal], linger_s: float = 0.0
    ) -> None:
        self._log = log
        self._owner = owner
        self._linger_s = linger_s
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_PendingCalls] = []
        self._waiters = 0
        """Queued entries whose caller waits for the commit (``write``): no lingering."""
        self._idle = False  # the thread waits for a first call: only then is it notified
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._arrivals: deque[float] = deque(maxlen=self._WINDOW)
        """When the last calls were queued (``time.monotonic``)."""
        self._last_identity: ActionIdentity | None = None
        """The action of the last call the last transaction held."""
        self.lingered = 0
        """Passes that waited for more calls."""
        self.lingering = False

    def submit(
        self,
        calls: list[EncodedCall],
        done: Callable[[BaseException | None], None],
        wait: bool = False,
    ) -> None:
        """Queue ``calls``; ``done`` is called on the writer's thread once their transaction
        has committed (None) or failed (its exception). ``wait``: the caller waits for it
        (no lingering for others).

        Raises:
            RuntimeError: the journal is closed.
        """
        cond = self._cond
        with cond:
            if self._stopping:
                raise RuntimeError("the action journal is closed")
            starting = self._thread is None
            if starting:
                # Started before anything is queued and kept only once running: a thread
                # that cannot start raises here and leaves no call that nothing will write.
                thread = threading.Thread(target=self._run, name="action-log-calls", daemon=True)
                thread.start()  # its first step waits for the lock held here
                self._thread = thread
            now = time.monotonic()
            self._arrivals.append(now)
            self._queue.append(_PendingCalls(calls, done, now))
            if wait:
                self._waiters += 1
            if not starting and (self._idle or wait):
                cond.notify()  # not while it lingers or writes: it takes these next anyway

    def write(self, calls: list[EncodedCall]) -> BaseException | None:
        """Store ``calls`` durably, waiting for their transaction: None once stored, else
        the failure of the transaction they were in (returned, not raised: the same
        exception may reach several callers).

        Raises:
            RuntimeError: the journal is closed.
        """
        written = threading.Lock()
        written.acquire()
        outcome: list[BaseException | None] = []

        def done(failure: BaseException | None) -> None:
            outcome.append(failure)
            written.release()

        self.submit(calls, done, wait=True)
        written.acquire()
        return outcome[0]

    def close(self, timeout: float | None = None) -> None:
        """Write what is queued and end the thread (waiting at most ``timeout``)."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    def _lingers(self) -> bool:
        """Whether this pass waits for more calls (see the class docstring). Under the lock."""
        arrivals = self._arrivals
        return (
            self._linger_s > 0
            and not self._waiters
            and len(arrivals) == self._WINDOW
            and arrivals[-1] - arrivals[0] < (self._WINDOW - 1) / self.MIN_RATE
            and self._last_identity not in (None, self._queue[0].calls[0].identity)
        )

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._queue:
                    if self._stopping or self._owner() is None:
                        self._stopping = True
                        return
                    self._idle = True
                    cond.wait(self.IDLE_WAIT_S)
                    self._idle = False
                if self._lingers():
                    self.lingered += 1
                    self.lingering = True
                    until = self._queue[0].arrived + self._linger_s
                    remaining = until - time.monotonic()
                    while remaining > 0 and not (self._waiters or self._stopping):
                        if not cond.wait(remaining):  # the GIL is free meanwhile
                            break
                        remaining = until - time.monotonic()
                    self.lingering = False
                batch, self._queue, self._waiters = self._queue, [], 0
            written = [call for pending in batch for call in pending.calls]
            failure: BaseException | None = None
            try:
                self._log.record_calls(written)
            except BaseException as error:  # handed to every caller of the transaction
                failure = error
            self._last_identity = written[-1].identity
            for pending in batch:
                try:
                    pending.done(failure)
                except BaseException:  # a caller's callback must not end the writer
                    logger.exception("a durable call's completion callback failed")


class _PendingCalls:
    """Calls queued together for ``CallWriter``, with the callback their transaction's
    outcome goes to and when they were queued."""

    __slots__ = ("arrived", "calls", "done")

    def __init__(
        self,
        calls: list[EncodedCall],
        done: Callable[[BaseException | None], None],
        arrived: float,
    ) -> None:
        self.calls = calls
        self.done = done
        self.arrived = arrived


class CompletionWriter:
    """The daemon thread that writes one journal's completed records, in batches.

    What the journal's threads share with it is guarded by ``_cond``: the queue, the counts
    (records and payload bytes submitted, taken into a batch, written) and the requests
    (``_flush_upto``: write at once until that many records are taken; ``_stopping``;
    ``_discarded``). Each batch is written outside the lock, in one ``complete_many``
    transaction, and its records count as queued until it is committed, so the bounds hold
    the batch in flight too.

    The thread holds its journal only weakly: a journal dropped without ``close`` gets its
    queue written and its thread ended (it notices within ``IDLE_WAIT_S``). An interpreter
    that exits writes what is queued first (``_write_all_at_exit``).
    """

    IDLE_WAIT_S = 1.0
    """The longest wait without a notification: bounds how long a dead journal or writer
    goes unnoticed."""

    def __init__(
        self,
        log: ActionLog,
        owner: weakref.ref[ActionJournal],
        *,
        batch_size: int,
        delay_s: float,
        max_queued: int,
        max_queued_bytes: int,
    ) -> None:
        if batch_size < 1 or max_queued < batch_size or max_queued_bytes < 1 or delay_s < 0:
            raise ValueError(
                "the action journal needs batch_size >= 1, max_queued >= batch_size, "
                f"max_queued_bytes >= 1 and batch_delay_ms >= 0 (got {batch_size}, "
                f"{max_queued}, {max_queued_bytes}, {delay_s * 1000})"
            )
        self._log = log
        self._owner = owner
        self.batch_size = batch_size
        self.delay_s = delay_s
        self.max_queued = max_queued
        self.max_queued_bytes = max_queued_bytes
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[EncodedRecord] = deque()
        self._first_at = 0.0  # when the oldest queued record was queued (time.monotonic)
        self._submitted = 0
        self._submitted_bytes = 0
        self._taken = 0
        self._written_bytes = 0
        self._flush_upto = 0
        self._stopping = False
        self._discarded = False
        self.written = 0
        self.batches = 0
        self.failure: ActionLogError | None = None
        self._thread: threading.Thread | None = None
        """Started by the first ``submit``: a job whose actions call nothing records nothing
        and needs no thread (an idle Python thread still costs the operator thread time in
        PyFlink's thread mode)."""

    # -- the journal's side ----------------------------------------------------------------

    def submit(self, record: EncodedRecord) -> None:
        """Queue ``record``; wait while the queue is full.

        Raises:
            ActionLogError: the writer failed, or was stopped.
        """
        size = len(record.payload)
        cond = self._cond
        with cond:
            while self._submitted > self.written and (
                self._submitted - self.written >= self.max_queued
                or self._submitted_bytes - self._written_bytes + size > self.max_queued_bytes
            ):
                self._check_usable(waiting=True)
                self._flush_upto = max(self._flush_upto, self._submitted)  # behind: write now
                cond.notify_all()
                cond.wait(self.IDLE_WAIT_S)
            self._check_usable(waiting=False)
            if self._thread is None:
                # Kept only once running: a thread that cannot start fails this record as
                # the log's, and the next record tries again.
                thread = threading.Thread(target=self._run, name="action-log-writer", daemon=True)
                try:
                    thread.start()  # its first step waits for the lock held here
                except RuntimeError as error:
                    raise log_error(self._log, "recording completed actions", error) from error
                self._thread = thread
                _LIVE_WRITERS.add(self)
            queue = self._queue
            if not queue:
                self._first_at = time.monotonic()
                cond.notify_all()  # the writer waits for a first record without a deadline
            queue.append(record)
            self._submitted += 1
            self._submitted_bytes += size
            if len(queue) == self.batch_size:
                cond.notify_all()  # a full batch: no need to wait for the delay

    def flush(self) -> None:
        """Wait until every record submitted so far is written.

        Raises:
            ActionLogError: the writer failed, or was stopped before writing them.
        """
        cond = self._cond
        with cond:
            target = self._submitted
            if self._flush_upto < target:
                self._flush_upto = target
                cond.notify_all()
            while self.written < target:
                self._check_usable(waiting=True)
                cond.wait(self.IDLE_WAIT_S)
            if self.failure is not None:
                raise self.failure

    def close(self, timeout: float | None = None) -> None:
        """Write everything queued and end the thread (waiting at most ``timeout``).

        Raises:
            ActionLogError: the writer failed, or (after ``timeout``) has not written
                everything yet.
        """
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.failure is not None:
            raise self.failure
        if self._discarded:
            return
        with self._cond:
            unwritten = self._submitted - self.written
        if unwritten:
            error = TimeoutError(f"{unwritten} completed records not written in {timeout} s")
            raise log_error(self._log, "recording completed actions", error)
        _LIVE_WRITERS.discard(self)

    def discard(self) -> int:
        """Drop what is queued and end the thread, as if the process had died: a batch
        being written still commits (or not) as it would. Returns the records dropped."""
        with self._cond:
            dropped = len(self._queue)
            self._queue.clear()
            self._discarded = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        _LIVE_WRITERS.discard(self)
        return dropped

    def _check_usable(self, *, waiting: bool) -> None:
        """Raise what makes the writer unable to take (or, ``waiting``, to write) records:
        its failure, or its end. Called under the lock."""
        if self.failure is not None:
            raise self.failure
        if self._discarded or (self._stopping and not waiting):
            error = RuntimeError("the action journal is closed")
        elif waiting and (self._thread is None or not self._thread.is_alive()):
            error = RuntimeError("the action log writer has stopped")
        else:
            return
        raise log_error(self._log, "recording completed actions", error)

    # -- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        cond, queue = self._cond, self._queue
        while True:
            with cond:
                while True:
                    if self._discarded:
                        return
                    if self._owner() is None:
                        self._stopping = True  # its journal is gone: write the rest, end
                    queued = len(queue)
                    if not queued:
                        if self._stopping:
                            return
                        cond.wait(self.IDLE_WAIT_S)
                        continue
                    if (
                        queued >= self.batch_size
                        or self._stopping
                        or self._flush_upto > self._taken
                    ):
                        break
                    remaining = self._first_at + self.delay_s - time.monotonic()
                    if remaining <= 0:
                        break
                    cond.wait(min(remaining, self.IDLE_WAIT_S))
                count = min(queued, self.batch_size)
                batch = [queue.popleft() for _ in range(count)]
                self._taken += count
                # What is left waited at least as long as this batch: it goes next, at once.
            try:
                self._log.complete_many(batch)
            except BaseException as error:
                failure = log_error(self._log, "recording completed actions", error)
                failure.__cause__ = error
                with cond:
                    self.failure = failure
                    queue.clear()
                    cond.notify_all()
                return
            size = sum(len(record.payload) for record in batch)
            with cond:
                self.written += count
                self._written_bytes += size
                self.batches += 1
                cond.notify_all()


_LIVE_WRITERS: weakref.WeakSet[CompletionWriter] = weakref.WeakSet()


@atexit.register
def _write_all_at_exit() -> None:
    """Write what unclosed journals left queued when the interpreter exits (a local script
    that never closed its journal). A record lost here would only cost a re-run on replay,
    so failures are ignored and the wait is bounded."""
    for writer in list(_LIVE_WRITERS):
        with contextlib.suppress(Exception):
            writer.close(timeout=10)
