"""The action journal: what the run engine records in, and replays from, the action log.

It binds an ``ActionLog`` to one job, a clock for epochs and a retention period, and makes
the per-action decisions of design section 5:

- when it is created (once per attempt) it loads the log's **run index**: for each key, the
  highest run sequence the log holds anything for. A completed record is looked up, and an
  action's recorded durable calls loaded, only for a run at or below its key's entry:
  anything above it cannot have been written before this attempt started. A job that never
  failed has an empty index and reads nothing; a restored attempt replays the runs the
  failed one had reached, whatever Flink can tell about attempt numbers;
- durable calls of an action that runs again are answered from the log while they match
  (same function, same argument digest, in the same order); the first mismatch executes
  and overwrites the log from that index on;
- a recorded exception is replayed only when the action went on to make another call after
  it (so it handled the error); the last call of an interrupted action that raised runs
  again, otherwise a failing call would fail every retry and every restart forever.

Every failure of the log (an unreachable database, a full or vanished disk) is raised as
``ActionLogError`` naming the log and the operation, passwords redacted: it is not the
fault of the action that was running, and the runtime fails the job instead of charging it
to the action's error policy. Only ``UnstorableValueError`` (the action produced a value
the serializer cannot store) is the action's own.

Epochs are wall-clock milliseconds. PyFlink gives Python functions no checkpoint
notifications, so retention is a time window: a record is pruned once it is older than
``retention_ms`` *and* this attempt has run for ``retention_ms`` (records written before a
restart stay until the replay that needs them is long past). Other jobs' records go by
``ActionLog.expire_jobs``, which each attempt runs when it starts: a job whose name was
generated for its submission, not seen (its heartbeat, ``JobHeartbeat``) nor written to
within its own window. See docs/consistency.md.

**What is written when** (design section 5: "a durable call's result is durable before the
action goes on past that call"):

- A durable call's outcome is written before the action sees it, hidden behind the call's
  own latency. Nothing else is needed for the guarantee that a recorded call is not paid
  again. The journal's **call writer** (``_CallWriter``, a daemon thread) writes every
  outcome queued by the time it is free in one ``ActionLog.record_calls`` transaction (a
  group commit). A call on the executor is encoded on its thread and queued
  (``submit_call``), and the thread is free at once; its action's future is completed once
  the transaction has committed. ``record_call`` (a sync ``durable_execute``) and the call
  loop's ``record_calls`` (the outcomes of the ``async def`` calls that ended in one pass)
  queue theirs and wait for the commit. Hundreds of calls in flight that finish close
  together used to queue for one transaction each (a median wait of about 30 ms at 256 in
  flight, ``bench/RESULTS.md``).
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
  the next operation of the operator thread (``complete``, ``completed``, ``recorder``,
  ``maybe_prune``) and from ``flush`` and ``close``: the job fails as with any failure of
  the log. ``record_call`` does not raise it: a paid call's result is still recorded if the
  log takes it, so the restored attempt need not pay for it again.

**Ordering between queued completions and synchronous operations.** A batch is written
after operations the operator thread issued later; that is safe because:

- ``prune`` is preceded by ``flush``: otherwise a queued record older than the cutoff would
  be written after the prune and outlive it (and ``count`` would disagree with ``pruned``).
- A completion deletes its identity's partial calls. A later ``record_call`` of the same
  identity in the same journal would need that identity to execute again after it
  completed, which the runtime never does within one attempt: a retry follows a failed
  execution (never completed); a restore starts a new attempt, with a new journal. Even if
  it happened (a test restoring a runner in place), the batch would leave the identity with
  a completed record, which replay prefers to partial calls, so no recorded call is paid
  again.
- This journal reads only runs at or below its key's entry in the run index, loaded when it
  was created: its own queued records are never read back by it.
- A later attempt sees a record once its batch is written. ``close`` (and ``flush``) write
  everything queued, which the runners do when an attempt ends. Should a writer of an
  earlier attempt still be running in a live process while a new attempt replays, the
  lookup stays consistent because ``complete_many`` swaps partial calls for the record
  atomically and ``completed`` reads in the order record, calls, then the record again when
  no calls were found: whichever side of the swap each read falls on, the action is either
  replayed from its record or re-executed with its recorded calls.
- The run index is unaffected by a lost record in the way that matters: an action with
  durable calls has its run indexed from its first recorded call on (written
  synchronously), so its calls are found; an action without calls whose record was lost
  just runs again, as a new run would.
- Records without calls (every plain action, with ``action-log-record: all``) need nothing
  of their own: ``complete`` queues them like any other, ``completed`` finds them by
  identity (the run index lists their runs once written), and replay applies their deltas
  and events. One whose batch was lost is looked up three times (record, calls, record)
  and its action runs again, on the state the replayed records before it rebuilt: records
  are queued in the order the operator thread completed them and written in that order,
  so a key's records that reached the log are the first ones of its run (fan-out members
  aside, recorded as each finishes, and each replayed or run on its own).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, InvalidStateError
from contextlib import contextmanager
from typing import Any

from flink_agents._ids import digest_args, function_id, key_text
from flink_agents.api import Event
from flink_agents.memory import MemoryDelta
from flink_agents.runtime.action_log import (
    ActionIdentity,
    ActionLog,
    ActionLogError,
    ActionRecord,
    DurableCall,
    EncodedCall,
    EncodedRecord,
    JobHeartbeat,
    JobMarker,
    UnstorableValueError,
)

logger = logging.getLogger(__name__)

Clock = Callable[[], int]

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
are ending faster than ``_CallWriter.MIN_RATE`` a second (see ``_CallWriter``)."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ActionJournal:
    """One job's view of an action log, for one attempt of the job.

    Args:
        log: the storage.
        job: partitions the log; must stay the same across restarts of the job (and be new
            for a new job, or its fresh run sequences would hit old records).
        generated_name: ``job`` was generated for this submission (no ``action-log-job``):
            once no attempt of it runs, its records may be expired by other jobs.
        retention_ms: how long records are kept (see the module docstring).
        clock: milliseconds now; injectable for tests.
        batch_size: completed records per transaction, at most.
        batch_delay_ms: how long a completed record waits for others to share its batch.
        max_queued: completed records queued or being written, at most (backpressure).
        max_queued_bytes: their payload bytes, at most (backpressure).
        call_linger_ms: how long a durable call's outcome waits for others to share its
            transaction while calls are ending faster than ``_CallWriter.MIN_RATE`` a
            second (0: never).

    The journal owns ``log`` once created: ``close`` closes it.

    Raises:
        ActionLogError: the run index cannot be loaded.

    Attributes:
        reads: records read from the log: completed lookups plus loads of recorded calls
            (the run index is counted in ``index_loads``, not here).
        index_loads: run index queries (one per journal).
        replayed_actions: completed actions found in the log.
        reused_calls: durable calls answered from the log.
        pruned: actions removed by ``maybe_prune``.
        expired: actions of other jobs removed when this journal started
            (``ActionLog.expire_jobs``).
        batches: transactions the writer committed (each holding one or more records).
        written: completed records the writer committed.
    """

    def __init__(
        self,
        log: ActionLog,
        job: str,
        *,
        retention_ms: int = 600_000,
        clock: Clock = now_ms,
        batch_size: int = BATCH_SIZE,
        batch_delay_ms: float = BATCH_DELAY_MS,
        max_queued: int = MAX_QUEUED,
        max_queued_bytes: int = MAX_QUEUED_BYTES,
        call_linger_ms: float = CALL_LINGER_MS,
        generated_name: bool = False,
    ) -> None:
        self.log = log
        self.job = job
        self.retention_ms = retention_ms
        self.clock = clock
        self.started_ms = clock()
        self._last_prune_ms = self.started_ms
        self.reads = 0
        self.index_loads = 1  # just below: the only one
        self.replayed_actions = 0
        self.reused_calls = 0
        self.pruned = 0
        self._preloaded: tuple[ActionIdentity, list[DurableCall]] | None = None
        self._closed = False
        marker = JobMarker(job, generated_name, retention_ms, self.started_ms)
        self._heartbeat = JobHeartbeat(log, marker, clock, retention_ms / 4000)
        with self._operation("marking the job"):
            self._heartbeat.mark()  # before the run index is read: see expire_jobs
        with self._operation("loading the run index"):
            self._index: dict[str, int] = dict(log.run_index(job))
        with self._operation("expiring the records of jobs no restore can need"):
            expired = log.expire_jobs(self.started_ms)
        self.expired = sum(expired.values())
        if expired:
            logger.info("expired %d jobs from action log %s", len(expired), log.name)
        self._heartbeat.start()
        weakref.finalize(self, self._heartbeat.stop, False)  # a journal never closed
        if self._index:
            logger.info(
                "action log %s holds runs of %d keys of job %s from an earlier attempt: their "
                "completed actions are replayed, their recorded calls reused",
                log.name,
                len(self._index),
                job,
            )
        self._calls = _CallWriter(log, weakref.ref(self), call_linger_ms / 1000)
        self._writer = _CompletionWriter(
            log,
            weakref.ref(self),
            batch_size=batch_size,
            delay_s=batch_delay_ms / 1000,
            max_queued=max_queued,
            max_queued_bytes=max_queued_bytes,
        )

    @property
    def batches(self) -> int:
        return self._writer.batches

    @property
    def written(self) -> int:
        return self._writer.written

    def identity(self, key: Any, run_sequence: int, step: int, action: str) -> ActionIdentity:
        return ActionIdentity(self.job, key_text(key), run_sequence, step, action)

    def check(self) -> None:
        """Raise the writer's failure, if it failed (the job must fail: see the module
        docstring).

        Raises:
            ActionLogError: the writer failed to write completed records.
        """
        if self._writer.failure is not None:
            raise self._writer.failure

    def may_replay(self, key: Any, run_sequence: int) -> bool:
        """Whether the log may hold records or calls of run ``run_sequence`` of ``key`` from
        an earlier attempt (``may_have_records`` without building an identity)."""
        return bool(self._index) and self._reached(key_text(key), run_sequence)

    def may_have_records(self, identity: ActionIdentity) -> bool:
        """Whether the log may hold a record or calls of ``identity`` from an earlier
        attempt: its run is at or below its key's entry in the run index."""
        return self._reached(identity.key, identity.run_sequence)

    def _reached(self, canonical: str, run_sequence: int) -> bool:
        reached = self._index.get(canonical)
        return reached is not None and run_sequence <= reached

    def completed(self, identity: ActionIdentity) -> ActionRecord | None:
        """The completed record of ``identity`` if an earlier attempt wrote one.

        Raises:
            ActionLogError: the log failed.
        """
        self.check()
        self._preloaded = None
        if not self.may_have_records(identity):
            return None
        # Record, calls, then the record again if there were no calls: a completion written
        # meanwhile (by a writer of an earlier attempt) swaps calls for the record in one
        # transaction, so the action is either replayed or re-executed with its calls.
        record = self._look_up(identity)
        if record is None:
            self.reads += 1
            with self._operation("loading the recorded durable calls"):
                calls = self.log.calls(identity)
            if not calls:
                record = self._look_up(identity)
            if record is None:
                self._preloaded = (identity, calls)  # for the recorder that follows
                return None
        self.replayed_actions += 1
        logger.info(
            "replaying action %r of key %s (run %d, step %d) from the action log",
            identity.action,
            identity.key,
            identity.run_sequence,
            identity.step,
        )
        return record

    def _look_up(self, identity: ActionIdentity) -> ActionRecord | None:
        self.reads += 1
        with self._operation("looking up a completed action"):
            return self.log.completed(identity)

    def recorder(self, identity: ActionIdentity, look_up: bool) -> CallRecorder:
        """The durable-call recorder of one execution of an action. Its recorded calls are
        loaded when an earlier attempt may have written some (the run index) or when
        ``look_up`` says an earlier execution in this attempt failed after making calls.

        Raises:
            ActionLogError: the log failed.
        """
        self.check()
        preloaded, self._preloaded = self._preloaded, None
        recorded: list[DurableCall] = []
        if preloaded is not None and preloaded[0] == identity:
            recorded = preloaded[1]  # loaded by ``completed`` just now
        elif look_up or self.may_have_records(identity):
            self.reads += 1
            with self._operation("loading the recorded durable calls"):
                recorded = self.log.calls(identity)
        return CallRecorder(self, identity, recorded)

    def record_call(self, identity: ActionIdentity, call: DurableCall, fresh: bool = False) -> None:
        """Store a durable call's outcome, synchronously: it is durable when this returns.
        A failure of the completion writer is not raised here (see the module docstring).
        ``fresh``: see ``EncodedCall``.

        Raises:
            ActionLogError: the log failed.
            UnstorableValueError: the result cannot be serialized.
        """
        with self._operation("recording a durable call"):
            encoded = self.log.encode_call(identity, call, self.clock(), fresh)
            failure = self._calls.write([encoded])
        if failure is not None:  # the transaction its call was in failed, on the writer's thread
            raise self._call_failure(failure)

    def submit_call(
        self,
        identity: ActionIdentity,
        call: DurableCall,
        done: Callable[[ActionLogError | None], None],
        fresh: bool = False,
    ) -> None:
        """Queue a durable call's outcome for the call writer and return at once (an
        executor thread, free for the next call). ``done`` is called on the writer's thread
        with None once the outcome is stored, else with the ``ActionLogError`` of its
        transaction. A failure of the completion writer is not raised here. ``fresh``: see
        ``EncodedCall``.

        Raises:
            ActionLogError: the journal is closed; nothing is queued.
            UnstorableValueError: the result cannot be serialized; nothing is queued.
        """
        with self._operation("recording a durable call"):
            encoded = self.log.encode_call(identity, call, self.clock(), fresh)
            self._calls.submit([encoded], functools.partial(self._call_written, done))

    def _call_written(
        self, done: Callable[[ActionLogError | None], None], failure: BaseException | None
    ) -> None:
        done(None if failure is None else self._call_failure(failure))

    def _call_failure(self, failure: BaseException) -> ActionLogError:
        """The ``ActionLogError`` a call sees when the transaction holding it failed."""
        error = _log_error(self.log, "recording a durable call", failure)
        error.__cause__ = failure
        return error

    def record_calls(
        self, calls: Sequence[tuple[CallRecorder, DurableCall]]
    ) -> list[BaseException | None]:
        """Store several durable calls' outcomes together (those the call loop saw end in
        one pass), in one transaction, as ``record_call`` stores one: each is durable when
        this returns. Each call's recorder learns how its own went (``CallRecorder.settle``).

        Returns, per call, None once it is stored, else what the action is to see instead
        of its outcome: ``UnstorableValueError`` for a result of its own the serializer
        cannot store (the others are stored all the same), ``ActionLogError`` for every
        call when the log failed.
        """
        failures: list[BaseException | None] = [None] * len(calls)
        encoded: list[EncodedCall] = []
        stored: list[int] = []
        epoch = self.clock()
        for position, (recorder, call) in enumerate(calls):
            try:
                with self._operation("recording a durable call"):
                    fresh = recorder.fresh(call.index)
                    encoded.append(self.log.encode_call(recorder.identity, call, epoch, fresh))
                stored.append(position)
            except (UnstorableValueError, ActionLogError) as error:
                failures[position] = error
        if encoded:
            try:
                failure = self._calls.write(encoded)
            except RuntimeError as closed:
                failure = closed
            if failure is not None:
                error = self._call_failure(failure)
                for position in stored:
                    failures[position] = error
        for (recorder, call), failure in zip(calls, failures, strict=True):
            recorder.settle(call, failure)
        return failures

    def complete(
        self,
        identity: ActionIdentity,
        sensory: MemoryDelta,
        short_term: MemoryDelta,
        events: Sequence[Event],
        calls: Sequence[DurableCall],
        previous: tuple[dict[str, Any], dict[str, Any]] | None = None,
    ) -> None:
        """Queue a completed action's record for the writer, encoded here (``previous``:
        what the changed keys held before, for the history; see ``ActionRecord``).

        It is written with others in one transaction, within ``batch_delay_ms`` (or at once
        when a batch is full); ``flush`` waits for it. When the writer is ``max_queued``
        records behind, this waits for it.

        Raises:
            ActionLogError: the log failed, now or when the writer wrote earlier records.
            UnstorableValueError: part of the record cannot be serialized; nothing is queued.
        """
        self.check()
        record = ActionRecord(
            identity, sensory, short_term, tuple(events), tuple(calls), self.clock(), previous
        )
        try:
            encoded = self.log.encode(record)
        except UnstorableValueError:
            raise
        except Exception as error:
            raise _log_error(self.log, "recording completed actions", error) from error
        self._writer.submit(encoded)

    def flush(self) -> None:
        """Wait until every completed record queued so far is written.

        Raises:
            ActionLogError: the writer failed (now or before), or was stopped before writing
                them.
        """
        self._writer.flush()

    def close(self) -> None:
        """Write everything queued, stop the writer and close the log. Idempotent; the
        journal is unusable afterwards.

        Raises:
            ActionLogError: the writer failed (now or before): some completed records were
                not written (the log is closed all the same).
        """
        if self._closed:
            self.check()
            return
        self._closed = True
        self._heartbeat.stop()
        try:
            self._calls.close()  # what is queued first: its actions may be waiting for it
            self._writer.close()
        finally:
            self.log.close()

    def maybe_prune(self, oldest_in_flight: Callable[[], int | None] = lambda: None) -> int:
        """Prune expired records, at most every quarter of the retention period.

        ``oldest_in_flight`` tells when the oldest action still running in this process
        started: its partial calls must survive however long it takes.

        Queued completed records are written first (``flush``), so that none older than the
        cutoff is written after the prune.

        Raises:
            ActionLogError: the log failed (now or in the writer).
        """
        self.check()
        now = self.clock()
        if now - self._last_prune_ms < self.retention_ms // 4:
            return 0
        self._last_prune_ms = now
        if now - self.started_ms < self.retention_ms:
            return 0  # records from before a restart may still be replayed
        cutoff = now - self.retention_ms
        oldest = oldest_in_flight()
        if oldest is not None:
            cutoff = min(cutoff, oldest)
        self.flush()
        with self._operation("pruning expired records"):
            removed = self.log.prune(self.job, cutoff)
        self.pruned += removed
        if removed:
            logger.info(
                "pruned %d records of job %s older than the retention of %d ms from action log %s",
                removed,
                self.job,
                self.retention_ms,
                self.log.name,
            )
        return removed

    @contextmanager
    def _operation(self, what: str) -> Iterator[None]:
        """Raise any failure of the log inside as an ``ActionLogError`` naming it and
        ``what`` was being done; ``UnstorableValueError`` is the action's and passes."""
        try:
            yield
        except UnstorableValueError:
            raise
        except Exception as error:
            raise _log_error(self.log, what, error) from error


def _log_error(log: ActionLog, what: str, error: BaseException) -> ActionLogError:
    """The ``ActionLogError`` for ``error``, naming ``log`` and ``what`` was being done."""
    cause = log.redact(f"{type(error).__name__}: {error}")
    return ActionLogError(f"action log {log.name}: {what} failed: {cause}")


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
        an ``async def`` action is on the executor's thread: the digest took the operator
        thread about a tenth of a parked run's time at 256 calls in flight
        (``bench/RESULTS.md``).
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


class _CallWriter:
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
    that took plain calls at 256 in flight about 1-2 points closer to the ideal rate, with
    less CPU (``bench/RESULTS.md``).

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
            now = time.monotonic()
            self._arrivals.append(now)
            self._queue.append(_PendingCalls(calls, done, now))
            if wait:
                self._waiters += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="action-log-calls", daemon=True
                )
                self._thread.start()  # its first step waits for the lock held here
            elif self._idle or wait:
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
    """Calls queued together for ``_CallWriter``, with the callback their transaction's
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


class _CompletionWriter:
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
                self._thread = threading.Thread(
                    target=self._run, name="action-log-writer", daemon=True
                )
                self._thread.start()  # its first step waits for the lock held here
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
            raise _log_error(self._log, "recording completed actions", error)
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
        raise _log_error(self._log, "recording completed actions", error)

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
                failure = _log_error(self._log, "recording completed actions", error)
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


_LIVE_WRITERS: weakref.WeakSet[_CompletionWriter] = weakref.WeakSet()


@atexit.register
def _write_all_at_exit() -> None:
    """Write what unclosed journals left queued when the interpreter exits (a local script
    that never closed its journal). A record lost here would only cost a re-run on replay,
    so failures are ignored and the wait is bounded."""
    for writer in list(_LIVE_WRITERS):
        with contextlib.suppress(Exception):
            writer.close(timeout=10)
