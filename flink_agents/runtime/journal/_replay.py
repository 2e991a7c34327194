"""The action journal's replay rules: what the run engine replays from the action log.

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

What is written when, and by which thread, is in ``_writers``; how one execution's
durable calls are numbered, answered and recorded, in ``_calls``.

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
  atomically and ``lookup`` reads in the order record, calls, then the record again when
  no calls were found: whichever side of the swap each read falls on, the action is either
  replayed from its record or re-executed with its recorded calls.
- The run index is unaffected by a lost record in the way that matters: an action with
  durable calls has its run indexed from its first recorded call on (written
  synchronously), so its calls are found; an action without calls whose record was lost
  just runs again, as a new run would.
- Records without calls (every plain action, with ``action-log-record: all``) need nothing
  of their own: ``complete`` queues them like any other, ``lookup`` finds them by
  identity (the run index lists their runs once written), and replay applies their deltas
  and events. One whose batch was lost is looked up three times (record, calls, record)
  and its action runs again, on the state the replayed records before it rebuilt: records
  are queued in the order the operator thread completed them and written in that order,
  so a key's records that reached the log are the first ones of its run (fan-out members
  aside, recorded as each finishes, and each replayed or run on its own).
"""

from __future__ import annotations

import functools
import logging
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from flink_agents._ids import key_text
from flink_agents.api import Event
from flink_agents.memory import MemoryDelta
from flink_agents.runtime.action_log import (
    ActionIdentity,
    ActionLog,
    ActionLogError,
    ActionRecord,
    DurableCall,
    EncodedCall,
    JobHeartbeat,
    JobMarker,
    UnstorableValueError,
)
from flink_agents.runtime.journal._calls import CallRecorder
from flink_agents.runtime.journal._errors import log_error
from flink_agents.runtime.journal._writers import (
    BATCH_DELAY_MS,
    BATCH_SIZE,
    CALL_LINGER_MS,
    MAX_QUEUED,
    MAX_QUEUED_BYTES,
    CallWriter,
    CompletionWriter,
)

logger = logging.getLogger(__name__)

Clock = Callable[[], int]


class Lookup(NamedTuple):
    """What the journal answers for one execution of an action (``ActionJournal.lookup``)."""

    identity: ActionIdentity
    """What the execution is recorded under."""
    record: ActionRecord | None
    """The completed record an earlier attempt wrote: the engine replays it, instead of
    running the action. None: the action runs."""
    calls: list[DurableCall] | None
    """The durable calls the log held for the execution when it was looked up (its run may
    have been reached by an earlier attempt), for its recorder; None: not looked for."""


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
            transaction while calls are ending faster than ``CallWriter.MIN_RATE`` a
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
        self._calls = CallWriter(log, weakref.ref(self), call_linger_ms / 1000)
        self._writer = CompletionWriter(
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
        an earlier attempt (``may_have_records`` without building an identity): the fast
        lane's one question per run.

        Raises:
            ActionLogError: the writer failed to write completed records (``check``).
        """
        self.check()
        return bool(self._index) and self._reached(key_text(key), run_sequence)

    def may_have_records(self, identity: ActionIdentity) -> bool:
        """Whether the log may hold a record or calls of ``identity`` from an earlier
        attempt: its run is at or below its key's entry in the run index."""
        return self._reached(identity.key, identity.run_sequence)

    def _reached(self, canonical: str, run_sequence: int) -> bool:
        reached = self._index.get(canonical)
        return reached is not None and run_sequence <= reached

    def lookup(self, key: Any, run_sequence: int, step: int, action: str) -> Lookup:
        """The one question the engine asks of each execution of an action: its identity
        (the key spelled once), the completed record an earlier attempt wrote, if any, and
        the recorded calls its recorder starts from (``recorder``).

        The log is read only for a run at or below its key's entry in the run index.

        Raises:
            ActionLogError: the log failed, now or when the writer wrote earlier records.
        """
        self.check()
        identity = ActionIdentity(self.job, key_text(key), run_sequence, step, action)
        if not self._index or not self._reached(identity.key, run_sequence):
            return Lookup(identity, None, None)
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
                return Lookup(identity, None, calls)
        self.replayed_actions += 1
        logger.info(
            "replaying action %r of key %s (run %d, step %d) from the action log",
            identity.action,
            identity.key,
            identity.run_sequence,
            identity.step,
        )
        return Lookup(identity, record, None)

    def _look_up(self, identity: ActionIdentity) -> ActionRecord | None:
        self.reads += 1
        with self._operation("looking up a completed action"):
            return self.log.completed(identity)

    def recorder(self, lookup: Lookup, look_up: bool) -> CallRecorder:
        """The durable-call recorder of the execution ``lookup`` answered for. It starts
        from the calls ``lookup`` loaded (an earlier attempt may have written some: the run
        index); else, when ``look_up`` says an earlier execution in this attempt failed
        after making calls, from those the log holds now.

        Raises:
            ActionLogError: the log failed.
        """
        self.check()
        identity = lookup.identity
        recorded: list[DurableCall] = []
        if lookup.calls is not None:
            recorded = list(lookup.calls)  # the recorder's own: it drops the calls that differ
        elif look_up:
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
        error = log_error(self.log, "recording a durable call", failure)
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
            raise log_error(self.log, "recording completed actions", error) from error
        self._writer.submit(encoded)

    def forget_key(self, key: Any) -> int:
        """Delete every record and call of ``key`` in the log (``ActionLog.forget_key``, in
        every job), once the records queued so far are written; its later runs look
        nothing up in this attempt. (Its durable calls are written before the actions that
        made them go on, so none is queued once the key has no run in progress.)

        Returns:
            The number of actions removed.

        Raises:
            ActionLogError: the log failed (now or in the writer).
        """
        self.flush()
        text = key_text(key)
        with self._operation("erasing a key"):
            removed = self.log.forget_key(text)
        self._index.pop(text, None)
        return removed

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
        if cutoff > self.started_ms:
            # The run index lists only what earlier attempts wrote, all before this one
            # started, and this prune removed all of that: it has nothing left to answer
            # for. Dropped, rather than kept for as long as the attempt runs (an entry per
            # key of the job the log held when it was restored: a million of them, at scale).
            self._index = {}
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
            raise log_error(self.log, what, error) from error
