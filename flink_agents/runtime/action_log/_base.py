"""The action log interface and its record types (design section 5).

Flink rolls state back to the last checkpoint and the source replays; the action log lives
outside Flink state so that replayed actions are not paid for twice. Per action identity it
holds either the **completed record** (memory deltas, events, durable-call results: enough
to re-apply the action without running it) or the **partial calls** of an action that was
interrupted (durable-call results to reuse when it runs again).

Backends store opaque payloads made by an injected ``Serializer``; the encoding helpers here
are shared by every backend so that all of them store exactly the same bytes.
"""

from __future__ import annotations

import pickle
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple, Protocol, Self

from flink_agents import _ids as ids
from flink_agents.api import Event, FlinkAgentsError
from flink_agents.memory import MemoryDelta
from flink_agents.runtime.action_log._packed import packed_event, unpacked_event

PAYLOAD_VERSION = 1
"""Version of the payload layout inside the serialized bytes (not of the SQL schema)."""


@dataclass(frozen=True)
class ActionIdentity:
    """What makes one execution of an action the same across a replay.

    ``key`` is the canonical string the runtime makes of the Flink key; ``run_sequence`` is
    restored with Flink state, so a replayed input gets the same identity.
    """

    job: str
    key: str
    run_sequence: int
    step: int
    action: str


def external_id(identity: ActionIdentity, index: int) -> str:
    """A UUID5 for the ``index``-th external write of an action, the same on every replay.

    Use it as the id of a point, row or message an action writes outside Flink (e.g. a
    Qdrant point): a replayed action then overwrites its earlier write instead of adding one.
    Inside an action, ``ctx.external_id()`` hands these out in order.
    """
    parts = (identity.job, identity.key, identity.run_sequence, identity.step, identity.action)
    return ids.external_id(parts, index)


@dataclass(frozen=True)
class DurableCall:
    """One ``ctx.durable_execute`` call of an action: what was called and how it ended.

    ``function`` and ``args_digest`` detect a call that no longer matches on replay.
    ``error`` is set when the call raised; ``result`` is then None. ``duration_ms`` is how
    long the call ran, when its recorder measured it (None in logs written before calls
    were timed); it plays no part in matching.
    """

    index: int
    function: str
    args_digest: str
    result: Any = None
    error: BaseException | None = None
    duration_ms: float | None = None


@dataclass(frozen=True)
class ActionRecord:
    """A completed action: everything needed to re-apply it without running it.

    ``epoch`` says which checkpoint interval wrote it; ``ActionLog.prune`` drops records by it.
    """

    identity: ActionIdentity
    sensory: MemoryDelta
    short_term: MemoryDelta
    events: tuple[Event, ...]
    calls: tuple[DurableCall, ...]
    epoch: int
    previous: tuple[dict[str, Any], dict[str, Any]] | None = None
    """What the keys each delta touches held before the action (sensory, short-term; a
    missing key as None), for ``flink-agents history``; None in records written before it
    was kept. Replay does not use it."""


@dataclass(frozen=True)
class InterruptedAction:
    """An action the log holds durable calls of but no completed record: it was running
    when its process stopped, it failed (and may be retried), or it is running now.

    ``epoch`` is the one all its calls share (see ``ActionLog.record_call``)."""

    identity: ActionIdentity
    calls: tuple[DurableCall, ...]
    epoch: int


@dataclass(frozen=True)
class JobMarker:
    """What a job tells the log about itself, so that other jobs can tell when none of its
    records can be needed any more (``ActionLog.expire_jobs``). Stored per job since schema
    version 2 (2026-11-28); a job written by an older version has none and is never expired.

    ``generated``: the job's name was made for one submission (``action-log-job`` unset), so
    only that submission's attempts can read its records; a pinned name may be read again by
    a later submission restored from a savepoint. ``retention_ms``: the job's
    ``action-log-retention-ms``. ``seen_ms``: when an attempt of the job last said it was
    alive (wall-clock milliseconds, like epochs).
    """

    job: str
    generated: bool
    retention_ms: int
    seen_ms: int


@dataclass(frozen=True)
class JobSummary:
    """One job's share of a log, for people looking at it (``flink-agents log stats``).

    ``records``: completed actions; ``interrupted``: actions with recorded calls and no
    record; ``payload_bytes``: the size of their payloads; ``newest_ms``: the largest epoch
    of any of them (None when the job holds nothing but its marker); ``marker``: None for a
    job written before markers were kept.
    """

    job: str
    records: int
    interrupted: int
    payload_bytes: int
    newest_ms: int | None
    marker: JobMarker | None


@dataclass(frozen=True)
class Spent:
    """What one budget's window has spent so far (``ActionLog.add_spend``): tokens, cost
    (in the unit of the price table) and model calls."""

    tokens: int = 0
    cost: float = 0.0
    calls: int = 0

    def __add__(self, other: Spent) -> Spent:
        return Spent(self.tokens + other.tokens, self.cost + other.cost, self.calls + other.calls)

    def __sub__(self, other: Spent) -> Spent:
        return Spent(self.tokens - other.tokens, self.cost - other.cost, self.calls - other.calls)


class EncodedRecord(NamedTuple):
    """A completed record ready to store: its identity, its epoch and its payload (the rest
    of the record, serialized). ``ActionLog.encode`` makes it, on the thread that completed
    the action, so that a value the serializer cannot store fails there and then;
    ``ActionLog.complete_many`` stores it, possibly later and on another thread. (A named
    tuple: one is made per completed action, on the hot path.)"""

    identity: ActionIdentity
    epoch: int
    payload: bytes


class EncodedCall(NamedTuple):
    """A durable call's outcome ready to store: the identity of the action that made it,
    the call, its epoch and its payload (the call serialized). ``ActionLog.encode_call``
    makes it on the thread that ran the call, so that a result the serializer cannot store
    fails that call alone; ``ActionLog.record_calls`` stores several in one transaction.

    ``fresh``: the log holds no call of this identity at or above this one's index (no
    earlier execution of the action left any there, as the journal knows from what it
    loaded), so storing it replaces nothing; a log may then skip deleting them. False
    claims nothing."""

    identity: ActionIdentity
    call: DurableCall
    epoch: int
    payload: bytes
    fresh: bool = False


class RecordedError(Exception):
    """Stands in for a durable call's exception that could not be stored as itself.

    Exceptions often do not survive pickling (keyword-only constructor arguments, attributes
    holding sockets or HTTP responses). Rather than writing a record that cannot be read back
    during recovery, the log keeps the original's type name and message in this error.
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(type_name, message)
        self.type_name = type_name
        self.message = message

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}"


class ActionLogError(FlinkAgentsError):
    """The action log itself failed: its storage cannot be reached, read or written.

    This is an infrastructure failure, never the fault of the action that was running: the
    runtime fails the job (Flink restarts it from its checkpoint) instead of charging it to
    the action's error policy. The message names the log and the operation; secrets in the
    log's URL are redacted.
    """


class UnstorableValueError(FlinkAgentsError):
    """A value an action produced (a durable call's result, an event, a memory value) cannot
    be serialized for the action log.

    Unlike ``ActionLogError`` this is the action's own fault and the same on every attempt:
    it fails the action, under its error policy, with nothing applied.
    """


class Serializer(Protocol):
    """Turns record payloads into bytes and back. Must round-trip pydantic events, memory
    values (``ObjectMarker`` included) and durable-call results."""

    def dumps(self, obj: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class PickleSerializer:
    """The default serializer: pickle, at a fixed protocol so every writer makes the same bytes.

    The log is read only by the job's own code, which is trusted; pickle is not safe for data
    from anyone else.
    """

    protocol = 5

    def dumps(self, obj: Any) -> bytes:
        return pickle.dumps(obj, protocol=self.protocol)

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data)


class ActionLog(ABC):
    """Durable record of what each action did, keyed by ``ActionIdentity``.

    Implementer obligations:

    - ``setup()`` creates or migrates the storage and is idempotent, also when several
      processes call it at once. Other methods may assume it was called.
    - Every method is safe to call from several threads of one process; backends shared by
      processes (SQLite file, PostgreSQL) are also safe across processes.
    - Writes are durable and atomic when the method returns: a reader never sees a completed
      record without its events, nor a call without the calls before it. ``complete_many``
      stores its whole batch in one transaction: all of it or none of it.
    - Values are stored through the serializer, never by reference: changing an object after
      recording it does not change the log.
    - ``job`` partitions everything: no method reads or removes another job's rows, but
      ``expire_jobs`` (the rule below), ``forget_key`` (an erasure) and the listings for
      people (``jobs``, ``job_summaries``).
    - ``expire_jobs`` removes a job only when no restore can need it: its marker says its
      name was generated, and neither its marker's ``seen_ms`` nor any of its rows' epochs
      is within its own retention window of ``now_ms``. The check and the removal are one
      transaction, so a ``mark_job`` of that job (an attempt starting) either comes first
      and keeps the job, or finds it gone whole. Jobs without a marker are never removed.
    - ``run_index(job)`` is one query served by an index (the SQL backends' primary keys
      start with job, key and run sequence), run once per attempt, and sees every write
      that returned before it was called, in any process.
    - Failures other than ``UnstorableValueError`` may be raised as they come (a driver's
      error, ``OSError``): the journal wraps them in ``ActionLogError`` with ``name`` and the
      operation. ``name`` and ``redact`` must keep passwords out of messages.
    """

    serializer: Serializer
    """How payloads become bytes; every backend sets it in its constructor."""

    @property
    def name(self) -> str:
        """The store, as error messages show it (a URL, passwords redacted)."""
        return type(self).__name__

    def redact(self, text: str) -> str:
        """``text`` (e.g. a driver's error message) with this log's secrets masked."""
        return redact_secrets(text)

    @abstractmethod
    def setup(self) -> None:
        """Create or migrate the storage; safe to call any number of times."""

    @abstractmethod
    def completed(self, identity: ActionIdentity) -> ActionRecord | None:
        """The completed record of ``identity``, or None if that action never completed."""

    @abstractmethod
    def calls(self, identity: ActionIdentity) -> list[DurableCall]:
        """The durable calls recorded for an action that has not completed, by index.

        Returns an empty list for an unknown identity and for a completed one (whose calls
        are in its record).
        """

    @abstractmethod
    def run_index(self, job: str) -> dict[str, int]:
        """Which runs of ``job`` the log holds anything for: for each key, the highest run
        sequence of a completed record or of a recorded durable call of an unfinished action.

        Keys with nothing stored are absent, so a job that never failed gets ``{}``. The
        journal loads it once per attempt and reads records only of runs at or below their
        key's entry: anything else cannot have been written before the attempt started.
        """

    @abstractmethod
    def jobs(self) -> list[str]:
        """Every job the log holds a completed record or a recorded call of, sorted.

        For people looking at a log (``flink-agents history``), not for the runtime: it may
        read every row's job.
        """

    @abstractmethod
    def key_records(self, job: str, key: str) -> list[ActionRecord]:
        """The completed records of one key of ``job``, ordered by run sequence, step and
        action: one statement served by the primary key (job, key, run sequence, ...)."""

    @abstractmethod
    def key_interrupted(self, job: str, key: str) -> list[InterruptedAction]:
        """The actions of one key of ``job`` that have recorded calls and no completed
        record, ordered like ``key_records``, each with its calls by index.

        Read it before ``key_records`` when both are wanted: an action that completes in
        between then shows up twice (its calls, then its record) rather than not at all.
        """

    @abstractmethod
    def record_call(self, identity: ActionIdentity, call: DurableCall, epoch: int) -> None:
        """Store ``call`` at ``call.index``, replacing any call there and dropping later ones.

        Overwriting is how a replay corrects a call that no longer matches: everything the
        action did after it is void. All partial calls of one identity then carry the
        largest epoch any of them was recorded at, so ``prune`` keeps or removes them
        together and never leaves a hole in the index sequence.

        Raises:
            UnstorableValueError: the result cannot be serialized (errors that cannot be
                are stored as ``RecordedError`` instead); nothing was written.
        """

    def encode_call(
        self, identity: ActionIdentity, call: DurableCall, epoch: int, fresh: bool = False
    ) -> EncodedCall:
        """``call`` serialized, ready for ``record_calls``; nothing is written (``fresh``:
        see ``EncodedCall``).

        Raises:
            UnstorableValueError: the result cannot be serialized.
        """
        return EncodedCall(identity, call, epoch, encode_call(self.serializer, call), fresh)

    def record_calls(self, calls: Sequence[EncodedCall]) -> None:
        """Store several encoded calls, each as ``record_call`` stores one, in order; all of
        them are durable when this returns. The journal hands the calls that finish while
        another is being written to one ``record_calls`` (a group commit), so the logs in
        this package write them in **one** transaction. This default stores them one
        ``record_call`` at a time, for a log that has nothing better.
        """
        for encoded in calls:
            self.record_call(encoded.identity, encoded.call, encoded.epoch)

    def encode(self, record: ActionRecord) -> EncodedRecord:
        """``record`` serialized, ready for ``complete_many``; nothing is written.

        Raises:
            UnstorableValueError: part of the record cannot be serialized.
        """
        return EncodedRecord(record.identity, record.epoch, encode_record(self.serializer, record))

    def complete(self, record: ActionRecord) -> None:
        """Store ``record`` and delete its identity's partial calls, in one transaction.

        Completing an identity again replaces the earlier record.

        Raises:
            UnstorableValueError: part of the record cannot be serialized; nothing was
                written.
        """
        self.complete_many((self.encode(record),))

    @abstractmethod
    def complete_many(self, records: Sequence[EncodedRecord]) -> None:
        """Store several encoded completed records in **one** transaction, as ``complete``
        stores one: each replaces any earlier record of its identity and deletes its
        identity's partial calls. They are applied in order, so when an identity appears
        twice the later record wins. An empty sequence writes nothing.

        This is how the journal writes completed actions, in batches, off the thread that
        ran them (see ``flink_agents.runtime.journal``).
        """

    @abstractmethod
    def prune(self, job: str, before_epoch: int) -> int:
        """Delete ``job``'s completed records and partial calls with epoch < ``before_epoch``.

        Epochs are the caller's: a record written while checkpoint N is pending (the last
        completed one being N - 1) should carry epoch N; once checkpoint N completes, no
        restore from it or later replays those actions, so ``prune(job, N + 1)`` is safe for
        completed records. Partial calls are different: an action still in flight at
        checkpoint N runs again after a restore from N and needs its calls, so the caller must
        not pass a ``before_epoch`` above the epoch of any action still in flight.

        Returns:
            The number of actions removed (completed ones plus interrupted ones), so that
            ``count`` drops by exactly this much.
        """

    @abstractmethod
    def forget_key(self, key: str) -> int:
        """Delete every completed record and partial call of ``key`` (its canonical
        string), in every job: an erasure (``ForgetKey``) is about the key, not one job.
        The one method besides ``expire_jobs`` that crosses jobs. Where the store keeps
        deleted bytes (free pages, a write-ahead file), it overwrites or drops them as far
        as it can.

        Returns:
            The number of actions removed (as ``prune`` counts them).
        """

    @abstractmethod
    def add_spend(self, scope: str, window_start_ms: int, spent: Spent) -> Spent:
        """Add ``spent`` to what budget ``scope`` spent in the window that starts at
        ``window_start_ms``, atomically (every subtask sharing the store adds to the same
        totals), and drop the scope's earlier windows.

        Spend is not a job's: a resubmitted job goes on with the window its predecessor
        began. It is never pruned with records.

        Returns:
            The window's totals with ``spent`` added.
        """

    @abstractmethod
    def spend(self, scope: str, window_start_ms: int) -> Spent:
        """What budget ``scope`` spent in the window that starts at ``window_start_ms``."""

    @abstractmethod
    def pace(self, scope: str, advance_ms: float, now_ms: float) -> float:
        """Take the next place of the pace ``scope`` (a rate limit shared by every subtask
        on the store), atomically: the place starts at the later of ``now_ms`` and where
        the last one ended, and ends ``advance_ms`` after its start (a negative advance
        gives time back).

        Returns:
            When the place starts (epoch milliseconds).
        """

    @abstractmethod
    def mark_job(self, marker: JobMarker) -> None:
        """Store ``marker`` as its job's, replacing the one stored: an attempt of the job
        calls it when it starts and then as it goes on, to say it is alive."""

    @abstractmethod
    def expire_jobs(self, now_ms: int) -> dict[str, int]:
        """Remove every job no restore can need any more (the rule is in the class
        docstring): its completed records, its partial calls and its marker. Also drop the
        marker of any job, pinned or not, that holds no rows and was not seen within its
        window (a later attempt marks it again).

        Returns:
            For each job whose rows were removed, how many actions went (completed plus
            interrupted, as ``prune`` counts them).
        """

    @abstractmethod
    def job_summaries(self) -> list[JobSummary]:
        """Every job the log holds rows or a marker of, sorted by name. For people (``flink-
        agents log stats``): it reads every row's job, epoch and payload size."""

    def storage_bytes(self) -> int | None:
        """What the log takes on disk (the file and its write-ahead log, or the tables
        with their indexes), None if unknown."""
        return None

    def reclaim_space(self, full: bool = False) -> None:
        """Give the space of removed rows back (to the file system, or for new rows), as far
        as the store can without stopping its writers for long; ``full``: also where that
        means rewriting the store once (a SQLite file made before auto-vacuum). Rows are
        unchanged. The default does nothing."""
        return None

    @abstractmethod
    def count(self, job: str) -> int:
        """The number of actions the log holds for ``job``: completed plus interrupted."""

    @abstractmethod
    def close(self) -> None:
        """Release connections; the log is unusable afterwards. Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# -- secrets in messages --------------------------------------------------------------------

_URL_PASSWORD = re.compile(r"(\w[\w+.-]*://[^:/@\s]*:)[^@\s]*@")
_PASSWORD_SETTING = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)


def redact_secrets(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with passwords masked: in URLs (``postgresql://user:***@host/db``), in
    ``password=...`` settings (libpq key-value strings, URL query parameters), and every
    occurrence of each of ``secrets``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _URL_PASSWORD.sub(r"\1***@", text)
    return _PASSWORD_SETTING.sub(r"\1***", text)


# -- payload encoding shared by every backend ----------------------------------------------
# Payloads hold plain tuples and dicts rather than the dataclasses above, so that renaming or
# moving these classes does not make existing logs unreadable.
#
# A call's duration came later than the layout, so it travels beside the five-part call
# tuple rather than in it: as the "call_ms" entry of a record's body (readers ignore keys
# they do not know) and as a third element of a partial call's payload. Payloads without
# them (older logs, calls nobody timed) read back with ``duration_ms=None``.


def _dumps(serializer: Serializer, obj: Any, what: str) -> bytes:
    try:
        return serializer.dumps(obj)
    except Exception as error:
        raise UnstorableValueError(
            f"cannot serialize {what} for the action log: {error}"
        ) from error


def storable_error(serializer: Serializer, error: BaseException | None) -> BaseException | None:
    """``error`` itself if it survives a serializer round trip, else a ``RecordedError``."""
    if error is None or isinstance(error, RecordedError):
        return error
    try:
        copy = serializer.loads(serializer.dumps(error))
        if type(copy) is type(error):
            return error
    except Exception:
        pass
    kind = type(error)
    return RecordedError(f"{kind.__module__}.{kind.__qualname__}", str(error))


def _call_tuple(serializer: Serializer, call: DurableCall) -> tuple[Any, ...]:
    error = storable_error(serializer, call.error)
    return (call.index, call.function, call.args_digest, call.result, error)


def _call_from(parts: tuple[Any, ...], duration_ms: float | None = None) -> DurableCall:
    index, function, args_digest, result, error = parts
    return DurableCall(index, function, args_digest, result, error, duration_ms)


def encode_call(serializer: Serializer, call: DurableCall) -> bytes:
    """The payload of a partial call."""
    what = f"the result of durable call {call.index} ({call.function})"
    parts = _call_tuple(serializer, call)
    if call.duration_ms is None:
        return _dumps(serializer, (PAYLOAD_VERSION, parts), what)
    return _dumps(serializer, (PAYLOAD_VERSION, parts, {"duration_ms": call.duration_ms}), what)


def decode_call(serializer: Serializer, payload: bytes) -> DurableCall:
    version, parts, *extra = serializer.loads(payload)
    _check_version(version)
    return _call_from(parts, extra[0].get("duration_ms") if extra else None)


def _check_version(version: Any) -> None:
    if type(version) is not int or version > PAYLOAD_VERSION:
        raise ActionLogError(
            f"an action log record has payload version {version!r}; this release reads up "
            f"to {PAYLOAD_VERSION}: it was written by a later release of flink_agents"
        )


def _delta_tuple(delta: MemoryDelta) -> tuple[Any, ...]:
    return (delta.cleared, dict(delta.puts), tuple(delta.removals))


def encode_record(serializer: Serializer, record: ActionRecord) -> bytes:
    """The payload of a completed record (its identity and epoch are stored beside it).

    On the hot path (once per completed action, on the thread that ran it): no work beyond
    the serializer's is done unless it fails, but for the pickle serializer's events, which
    go as ``packed_event`` tuples (a third of the time a pydantic model takes to pickle).
    """
    calls = record.calls
    events = record.events
    if events and type(serializer) is PickleSerializer:
        events = tuple([packed_event(event) or event for event in events])
    else:
        events = tuple(events)
    body = {
        "sensory": _delta_tuple(record.sensory),
        "short_term": _delta_tuple(record.short_term),
        "events": events,
        "calls": tuple([_call_tuple(serializer, call) for call in calls]) if calls else (),
    }
    if calls and any(call.duration_ms is not None for call in calls):
        body["call_ms"] = tuple(call.duration_ms for call in calls)
    if record.previous is not None:
        body["previous"] = record.previous
        try:
            return serializer.dumps((PAYLOAD_VERSION, body))
        except Exception:  # a value only the history wanted: the record goes without it
            del body["previous"]
    try:
        return serializer.dumps((PAYLOAD_VERSION, body))
    except Exception as error:
        what = f"the record of action '{record.identity.action}'"
        raise UnstorableValueError(
            f"cannot serialize {what} for the action log: {error}"
        ) from error


def _event_from(stored: Any) -> Event:
    """A stored event: the model itself, or (the pickle serializer's records since
    2026-11-28) the tuple ``packed_event`` made of it."""
    return unpacked_event(stored) if type(stored) is tuple else stored


def decode_record(
    serializer: Serializer, identity: ActionIdentity, epoch: int, payload: bytes
) -> ActionRecord:
    version, body = serializer.loads(payload)
    _check_version(version)
    calls = body["calls"]
    durations = body.get("call_ms") or (None,) * len(calls)
    return ActionRecord(
        identity=identity,
        sensory=MemoryDelta(*body["sensory"]),
        short_term=MemoryDelta(*body["short_term"]),
        events=tuple(_event_from(event) for event in body["events"]),
        calls=tuple(map(_call_from, calls, durations)),
        epoch=epoch,
        previous=body.get("previous"),
    )


def job_summaries(
    records: Sequence[tuple[Any, ...]],
    interrupted: Sequence[tuple[Any, ...]],
    markers: Sequence[tuple[Any, ...]],
) -> list[JobSummary]:
    """The SQL backends' per-job rows as ``JobSummary``s: ``records`` and ``interrupted``
    as ``(job, actions, payload bytes, largest epoch)``, ``markers`` as ``(job, generated,
    retention_ms, seen_ms)``."""
    found: dict[str, list[Any]] = {}
    for column, rows in ((0, records), (1, interrupted)):
        for job, actions, size, newest in rows:
            entry = found.setdefault(job, [0, 0, 0, None])
            entry[column] = int(actions)
            entry[2] += int(size or 0)
            if newest is not None:
                entry[3] = int(newest) if entry[3] is None else max(entry[3], int(newest))
    marked = {row[0]: JobMarker(row[0], bool(row[1]), int(row[2]), int(row[3])) for row in markers}
    return [
        JobSummary(job, *found.get(job, (0, 0, 0, None)), marked.get(job))
        for job in sorted(found.keys() | marked.keys())
    ]


def interrupted_actions(
    serializer: Serializer, job: str, key: str, rows: Sequence[tuple[Any, ...]]
) -> list[InterruptedAction]:
    """The SQL backends' partial-call rows of one key, ``(run_sequence, step, action, epoch,
    payload)`` ordered by identity and call index, grouped into ``InterruptedAction``s."""
    grouped: dict[ActionIdentity, tuple[int, list[DurableCall]]] = {}
    for run_sequence, step, action, epoch, payload in rows:
        identity = ActionIdentity(job, key, int(run_sequence), int(step), action)
        _, calls = grouped.setdefault(identity, (int(epoch), []))
        calls.append(decode_call(serializer, bytes(payload)))
    return [
        InterruptedAction(identity, tuple(calls), epoch)
        for identity, (epoch, calls) in grouped.items()
    ]
