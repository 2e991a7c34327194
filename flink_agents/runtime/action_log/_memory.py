"""The in-memory reference backend: the semantics every other backend must match.

It stores serialized bytes, like the durable backends, so that tests on it catch values the
serializer cannot handle and callers cannot change a record after writing it. It does not
survive the process, so it suits the local runner and tests, not recovery.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from flink_agents.runtime.action_log._base import (
    ActionIdentity,
    ActionLog,
    ActionRecord,
    DurableCall,
    EncodedCall,
    EncodedRecord,
    InterruptedAction,
    JobMarker,
    JobSummary,
    PickleSerializer,
    Serializer,
    Spent,
    decode_call,
    decode_record,
)


class _Partial:
    """The partial calls of one identity: one shared epoch and the payload of each index."""

    __slots__ = ("epoch", "payloads")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.payloads: dict[int, bytes] = {}


class InMemoryActionLog(ActionLog):
    """An ``ActionLog`` in a dict, guarded by one lock."""

    def __init__(self, serializer: Serializer | None = None) -> None:
        self.serializer = serializer or PickleSerializer()
        self._lock = threading.Lock()
        self._records: dict[ActionIdentity, tuple[int, bytes]] = {}
        self._partials: dict[ActionIdentity, _Partial] = {}
        self._markers: dict[str, JobMarker] = {}
        self._spend: dict[str, dict[int, Spent]] = {}
        self._paces: dict[str, float] = {}

    @property
    def name(self) -> str:
        return "memory://"

    def setup(self) -> None:
        """Nothing to create."""

    def completed(self, identity: ActionIdentity) -> ActionRecord | None:
        with self._lock:
            stored = self._records.get(identity)
        if stored is None:
            return None
        epoch, payload = stored
        return decode_record(self.serializer, identity, epoch, payload)

    def calls(self, identity: ActionIdentity) -> list[DurableCall]:
        with self._lock:
            partial = self._partials.get(identity)
            payloads = (
                [] if partial is None else [partial.payloads[i] for i in sorted(partial.payloads)]
            )
        return [decode_call(self.serializer, payload) for payload in payloads]

    def run_index(self, job: str) -> dict[str, int]:
        index: dict[str, int] = {}
        with self._lock:
            for identity in [*self._records, *self._partials]:
                if identity.job == job:
                    index[identity.key] = max(index.get(identity.key, 0), identity.run_sequence)
        return index

    def jobs(self) -> list[str]:
        with self._lock:
            return sorted({i.job for i in [*self._records, *self._partials]})

    def key_records(self, job: str, key: str) -> list[ActionRecord]:
        with self._lock:
            stored = [(i, *self._records[i]) for i in self._records if (i.job, i.key) == (job, key)]
        stored.sort(key=lambda item: _order(item[0]))
        return [decode_record(self.serializer, i, epoch, payload) for i, epoch, payload in stored]

    def key_interrupted(self, job: str, key: str) -> list[InterruptedAction]:
        with self._lock:
            stored = [
                (i, p.epoch, [p.payloads[n] for n in sorted(p.payloads)])
                for i, p in self._partials.items()
                if (i.job, i.key) == (job, key)
            ]
        stored.sort(key=lambda item: _order(item[0]))
        return [
            InterruptedAction(i, tuple(decode_call(self.serializer, b) for b in payloads), epoch)
            for i, epoch, payloads in stored
        ]

    def record_call(self, identity: ActionIdentity, call: DurableCall, epoch: int) -> None:
        self.record_calls((self.encode_call(identity, call, epoch),))

    def record_calls(self, calls: Sequence[EncodedCall]) -> None:
        with self._lock:  # one lock hold: another thread sees all of them or none
            for identity, call, epoch, payload, _fresh in calls:
                partial = self._partials.setdefault(identity, _Partial(epoch))
                for index in [i for i in partial.payloads if i >= call.index]:
                    del partial.payloads[index]
                partial.payloads[call.index] = payload
                partial.epoch = max(partial.epoch, epoch)

    def complete_many(self, records: Sequence[EncodedRecord]) -> None:
        with self._lock:  # one lock hold: another thread sees all of the batch or none
            for record in records:
                self._records[record.identity] = (record.epoch, record.payload)
                self._partials.pop(record.identity, None)

    def prune(self, job: str, before_epoch: int) -> int:
        with self._lock:
            old = [
                i
                for i, (epoch, _) in self._records.items()
                if i.job == job and epoch < before_epoch
            ]
            for identity in old:
                del self._records[identity]
            stale = [
                i for i, p in self._partials.items() if i.job == job and p.epoch < before_epoch
            ]
            for identity in stale:
                del self._partials[identity]
        return len(old) + len(stale)

    def forget_key(self, key: str) -> int:
        with self._lock:
            records = [i for i in self._records if i.key == key]
            for identity in records:
                del self._records[identity]
            partials = [i for i in self._partials if i.key == key]
            for identity in partials:
                del self._partials[identity]
        return len(records) + len(partials)

    def add_spend(self, scope: str, window_start_ms: int, spent: Spent) -> Spent:
        with self._lock:
            windows = self._spend.setdefault(scope, {})
            total = windows.get(window_start_ms, Spent()) + spent
            self._spend[scope] = {window_start_ms: total} | {
                start: kept for start, kept in windows.items() if start > window_start_ms
            }
            return total

    def spend(self, scope: str, window_start_ms: int) -> Spent:
        with self._lock:
            return self._spend.get(scope, {}).get(window_start_ms, Spent())

    def pace(self, scope: str, advance_ms: float, now_ms: float) -> float:
        with self._lock:
            start = max(self._paces.get(scope, now_ms), now_ms)
            self._paces[scope] = start + advance_ms
            return start

    def mark_job(self, marker: JobMarker) -> None:
        with self._lock:
            stored = self._markers.get(marker.job)
            seen_ms = marker.seen_ms if stored is None else max(stored.seen_ms, marker.seen_ms)
            self._markers[marker.job] = JobMarker(
                marker.job, marker.generated, marker.retention_ms, seen_ms
            )

    def expire_jobs(self, now_ms: int) -> dict[str, int]:
        removed: dict[str, int] = {}
        with self._lock:  # one lock hold: mark_job comes before or after, as a transaction
            for job, marker in list(self._markers.items()):
                if marker.seen_ms >= now_ms - marker.retention_ms:
                    continue
                since = now_ms - marker.retention_ms if marker.generated else None
                records = [i for i in self._records if i.job == job]
                partials = [i for i in self._partials if i.job == job]
                epochs = [self._records[i][0] for i in records]
                epochs += [self._partials[i].epoch for i in partials]
                if any(since is None or epoch >= since for epoch in epochs):
                    continue  # a row within the window, or any row of a pinned job
                if marker.generated:
                    for identity in records:
                        del self._records[identity]
                    for identity in partials:
                        del self._partials[identity]
                    removed[job] = len(records) + len(partials)
                del self._markers[job]
        return removed

    def job_summaries(self) -> list[JobSummary]:
        with self._lock:
            found: dict[str, list[int | None]] = {}
            for identity, (epoch, payload) in self._records.items():
                _add(found.setdefault(identity.job, [0, 0, 0, None]), 0, epoch, len(payload))
            for identity, partial in self._partials.items():
                size = sum(map(len, partial.payloads.values()))
                _add(found.setdefault(identity.job, [0, 0, 0, None]), 1, partial.epoch, size)
            markers = dict(self._markers)
        return [
            JobSummary(job, *found.get(job, (0, 0, 0, None)), markers.get(job))  # type: ignore[arg-type]
            for job in sorted(found.keys() | markers.keys())
        ]

    def count(self, job: str) -> int:
        with self._lock:
            return sum(i.job == job for i in self._records) + sum(
                i.job == job for i in self._partials
            )

    def close(self) -> None:
        """Nothing to release; the records stay readable."""


def _add(entry: list[int | None], column: int, epoch: int, size: int) -> None:
    """Count one action in a job's ``[records, interrupted, bytes, newest]``."""
    entry[column] = (entry[column] or 0) + 1
    entry[2] = (entry[2] or 0) + size
    entry[3] = epoch if entry[3] is None else max(entry[3], epoch)


def _order(identity: ActionIdentity) -> tuple[int, int, str]:
    """How the SQL backends order one key's actions (their primary keys' order)."""
    return (identity.run_sequence, identity.step, identity.action)
