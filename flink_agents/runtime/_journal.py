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
restart stay until the replay that needs them is long past). See docs/consistency.md.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from flink_agents.api._events import Event
from flink_agents.memory import MemoryDelta
from flink_agents.runtime.action_log import (
    ActionIdentity,
    ActionLog,
    ActionLogError,
    ActionRecord,
    DurableCall,
    UnstorableValueError,
    digest_args,
)
from flink_agents.runtime.action_log._ids import NAMESPACE

Clock = Callable[[], int]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def canonical_key(key: Any) -> str:
    """The key as the log stores it: JSON where possible (``"a"`` and ``1`` stay apart),
    else its ``repr``; equal in every process."""
    try:
        return json.dumps(key, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return f"repr:{key!r}"


def input_event_id(job: str, key: Any, run_sequence: int) -> uuid.UUID:
    """The id of a run's ``InputEvent``: the same when the input is replayed."""
    name = json.dumps(["input", job, canonical_key(key), run_sequence])
    return uuid.uuid5(NAMESPACE, name)


def function_id(function: Callable[..., Any]) -> str:
    """Names a durable call's function: ``module:qualname`` (stable across processes)."""
    target = getattr(function, "func", function)  # functools.partial
    module = getattr(target, "__module__", None) or type(target).__module__
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}:{name}"


class ActionJournal:
    """One job's view of an action log, for one attempt of the job.

    Args:
        log: the storage.
        job: partitions the log; must stay the same across restarts of the job (and be new
            for a new job, or its fresh run sequences would hit old records).
        retention_ms: how long records are kept (see the module docstring).
        clock: milliseconds now; injectable for tests.

    Raises:
        ActionLogError: the run index cannot be loaded.

    Attributes:
        reads: records read from the log: completed lookups plus loads of recorded calls
            (the run index is counted in ``index_loads``, not here).
        index_loads: run index queries (one per journal).
        replayed_actions: completed actions found in the log.
        reused_calls: durable calls answered from the log.
        pruned: actions removed by ``maybe_prune``.
    """

    def __init__(
        self,
        log: ActionLog,
        job: str,
        *,
        retention_ms: int = 600_000,
        clock: Clock = now_ms,
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
        with self._operation("loading the run index"):
            self._index: dict[str, int] = dict(log.run_index(job))

    def identity(self, key: Any, run_sequence: int, step: int, action: str) -> ActionIdentity:
        return ActionIdentity(self.job, canonical_key(key), run_sequence, step, action)

    def may_have_records(self, identity: ActionIdentity) -> bool:
        """Whether the log may hold a record or calls of ``identity`` from an earlier
        attempt: its run is at or below its key's entry in the run index."""
        reached = self._index.get(identity.key)
        return reached is not None and identity.run_sequence <= reached

    def completed(self, identity: ActionIdentity) -> ActionRecord | None:
        """The completed record of ``identity`` if an earlier attempt wrote one.

        Raises:
            ActionLogError: the log failed.
        """
        if not self.may_have_records(identity):
            return None
        self.reads += 1
        with self._operation("looking up a completed action"):
            record = self.log.completed(identity)
        if record is not None:
            self.replayed_actions += 1
        return record

    def recorder(self, identity: ActionIdentity, look_up: bool) -> CallRecorder:
        """The durable-call recorder of one execution of an action. Its recorded calls are
        loaded when an earlier attempt may have written some (the run index) or when
        ``look_up`` says an earlier execution in this attempt failed after making calls.

        Raises:
            ActionLogError: the log failed.
        """
        recorded: list[DurableCall] = []
        if look_up or self.may_have_records(identity):
            self.reads += 1
            with self._operation("loading the recorded durable calls"):
                recorded = self.log.calls(identity)
        return CallRecorder(self, identity, recorded)

    def record_call(self, identity: ActionIdentity, call: DurableCall) -> None:
        """Store a durable call's outcome (on the thread that ran it).

        Raises:
            ActionLogError: the log failed.
            UnstorableValueError: the result cannot be serialized.
        """
        with self._operation("recording a durable call"):
            self.log.record_call(identity, call, self.clock())

    def complete(
        self,
        identity: ActionIdentity,
        sensory: MemoryDelta,
        short_term: MemoryDelta,
        events: Sequence[Event],
        calls: Sequence[DurableCall],
    ) -> None:
        """Store a completed action's record.

        Raises:
            ActionLogError: the log failed.
            UnstorableValueError: part of the record cannot be serialized.
        """
        record = ActionRecord(
            identity, sensory, short_term, tuple(events), tuple(calls), self.clock()
        )
        with self._operation("recording a completed action"):
            self.log.complete(record)

    def maybe_prune(self, oldest_in_flight: Callable[[], int | None] = lambda: None) -> int:
        """Prune expired records, at most every quarter of the retention period.

        ``oldest_in_flight`` tells when the oldest action still running in this process
        started: its partial calls must survive however long it takes.

        Raises:
            ActionLogError: the log failed.
        """
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
        with self._operation("pruning expired records"):
            removed = self.log.prune(self.job, cutoff)
        self.pruned += removed
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
            cause = self.log.redact(f"{type(error).__name__}: {error}")
            raise ActionLogError(f"action log {self.log.name}: {what} failed: {cause}") from error


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
        self._journal = journal
        self.identity = identity
        self._recorded = recorded
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
        return [self._finished[i] for i in sorted(self._finished)]

    def begin(self, function: Callable[..., Any], args: tuple, kwargs: dict) -> CallSlot:
        """The next call: with its recorded outcome if the log has a matching one."""
        index = self._next_index
        self._next_index += 1
        slot = CallSlot(self, index, function_id(function), digest_args(args, kwargs))
        if index < len(self._recorded):
            earlier = self._recorded[index]
            reusable = earlier.error is None or index + 1 < len(self._recorded)
            if (
                earlier.function == slot.function
                and earlier.args_digest == slot.digest
                and reusable
            ):
                slot.recorded = earlier
                self._finished[index] = earlier
                self._journal.reused_calls += 1
                return slot
            del self._recorded[index:]  # this call and everything after it is void
        return slot

    def finish(self, slot: CallSlot, result: Any, error: BaseException | None) -> None:
        """Record how a call ended, before the action sees it.

        Raises:
            ActionLogError: the log failed (also kept in ``infrastructure_error``).
            UnstorableValueError: the result cannot be serialized.
        """
        call = DurableCall(slot.index, slot.function, slot.digest, result, error)
        try:
            self._journal.record_call(self.identity, call)
        except ActionLogError as failure:
            if self.infrastructure_error is None:
                self.infrastructure_error = failure
            raise
        self._finished[slot.index] = call


class CallSlot:
    """One durable call in flight: its number, and the recorded outcome if replayed."""

    __slots__ = ("digest", "function", "index", "recorded", "recorder")

    def __init__(self, recorder: CallRecorder, index: int, function: str, digest: str) -> None:
        self.recorder = recorder
        self.index = index
        self.function = function
        self.digest = digest
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
        try:
            result = function(*args, **kwargs)
        except Exception as error:
            self.recorder.finish(self, None, error)
            raise
        self.recorder.finish(self, result, None)
        return result
