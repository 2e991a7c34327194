"""A key's history: what the action log holds of one key's runs, put in a form people (and
scripts) can read.

The log is a write-ahead log for recovery, so by default the history has its gaps, and
says so: only actions that made a durable call or wrote outside Flink state have a record
(docs/consistency.md, "What is recorded"), unless the job ran with ``action-log-record:
all``, which records every completed action; records older than the retention window are
pruned, and a record holds each memory tier's *net change* (the new values and the removed
paths, with what they replaced). What it adds to a key's outputs is what they
cannot show: the memory each recorded action wrote, the events it sent, the durable calls it
made with their results and how long they took, and the calls of actions that were
interrupted (still running, failed, or cut off by a crash).
"""

from __future__ import annotations

import base64
import datetime
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from flink_agents._ids import key_text
from flink_agents.api import Event
from flink_agents.memory import MemoryDelta, ObjectMarker
from flink_agents.runtime.action_log._base import (
    ActionIdentity,
    ActionLog,
    ActionRecord,
    DurableCall,
    InterruptedAction,
    RecordedError,
)

RECORDED_NOTE = (
    "The action log records only actions that made a durable call or wrote outside Flink "
    "state (long-term memory, knowledge, external ids), unless the job ran with "
    "action-log-record: all; the others ran but left no record. "
    "Records older than the log's retention window have been pruned."
)
"""What every history says about its gaps (the command prints it too)."""

MEMORY_TIERS = ("short_term", "sensory")


@dataclass(frozen=True)
class MemoryChange:
    """One change an action made to a memory tier.

    ``op`` is ``clear`` (the whole tier, before the rest), ``delete`` (``path`` and
    everything under it), ``set`` (``path`` now holds ``value``) or ``object`` (``path`` is
    now an object with ``fields``: it was created, or a field was added to or deleted from
    it; the log keeps net changes, so it cannot tell which). ``path`` is dotted from the
    tier's root, which is ``""``.
    """

    tier: str
    op: str
    path: str
    value: Any = None
    fields: tuple[str, ...] | None = None
    old: Any = None
    """What ``path`` held before: a value, ``{"fields": [...]}`` for an object, None when
    it did not exist (or held None); only when ``old_known``."""
    old_known: bool = False
    """Whether the record kept what the action replaced (records written since the log
    keeps it do)."""


@dataclass(frozen=True)
class ActionEntry:
    """One recorded action of a run: a completed one with everything it did, or an
    interrupted one with only the durable calls it had made.

    ``recorded_at_ms`` is when the log last wrote it (wall clock, milliseconds): when it
    completed, or when its last call was recorded.
    """

    identity: ActionIdentity
    completed: bool
    recorded_at_ms: int
    memory: tuple[MemoryChange, ...]
    events: tuple[Event, ...]
    calls: tuple[DurableCall, ...]


@dataclass(frozen=True)
class RunHistory:
    """The recorded actions of one run of the key, by step."""

    run_sequence: int
    actions: tuple[ActionEntry, ...]


@dataclass(frozen=True)
class KeyHistory:
    """What one action log holds of one key of one job, run by run.

    ``key`` is the canonical form the log stores keys in (``"order-7"`` for the string
    ``order-7``, JSON for other keys), ``log`` the log's name (passwords redacted).
    """

    log: str
    job: str
    key: str
    runs: tuple[RunHistory, ...]

    def to_json(self) -> dict[str, Any]:
        """The history as JSON-ready data (the command's ``--json`` output)."""
        return {
            "log": self.log,
            "job": self.job,
            "key": self.key,
            "note": RECORDED_NOTE,
            "runs": [
                {
                    "run_sequence": run.run_sequence,
                    "actions": [_action_json(entry) for entry in run.actions],
                }
                for run in self.runs
            ],
        }


def key_history(log: ActionLog, job: str, key: Any) -> KeyHistory:
    """What ``log`` holds of the runs of ``key`` in ``job``.

    Args:
        log: an open action log.
        job: the job's name in the log (``action-log-job``, or the id a job was given).
        key: the key as the job's key selector returned it (a string, a number, a JSON-like
            value); it is put in the log's canonical form here.

    Raises:
        Exception: what the log raises when it cannot be read.
    """
    # Imported here: the journal, which owns the canonical form, imports this package.

    canonical = key_text(key)
    interrupted = log.key_interrupted(job, canonical)  # first: see ActionLog.key_interrupted
    records = log.key_records(job, canonical)
    done = {record.identity for record in records}
    entries = [_record_entry(record) for record in records] + [
        _interrupted_entry(action) for action in interrupted if action.identity not in done
    ]
    entries.sort(key=lambda e: (e.identity.run_sequence, e.identity.step, e.identity.action))
    runs = tuple(
        RunHistory(sequence, tuple(group))
        for sequence, group in itertools.groupby(entries, lambda e: e.identity.run_sequence)
    )
    return KeyHistory(log.name, job, canonical, runs)


def memory_changes(
    tier: str, delta: MemoryDelta, previous: dict[str, Any] | None = None
) -> Iterator[MemoryChange]:
    """``delta`` as the changes it applies, in the order it applies them: the clear, the
    removals (only the top of each removed subtree), then the writes, object markers shown
    as the object's field list; with ``previous`` (what the keys held before), each with
    the value it replaced."""
    known = previous is not None
    before = previous or {}

    def old(path: str) -> Any:
        value = before.get(path)
        return {"fields": list(value.fields)} if isinstance(value, ObjectMarker) else value

    if delta.cleared:
        yield MemoryChange(tier, "clear", "")
    removed = set(delta.removals)
    for path in sorted(removed):
        if not any(ancestor in removed for ancestor in _ancestors(path)):
            yield MemoryChange(tier, "delete", path, old=old(path), old_known=known)
    for path, value in delta.puts.items():
        if isinstance(value, ObjectMarker):
            yield MemoryChange(
                tier, "object", path, fields=tuple(value.fields), old=old(path), old_known=known
            )
        else:
            yield MemoryChange(tier, "set", path, value=value, old=old(path), old_known=known)


def plain(value: Any) -> Any:
    """``value`` as JSON data: pydantic models dumped, bytes in base64, exceptions as
    ``"type: message"``, anything else unknown as its ``repr``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {str(name): plain(item) for name, item in value.items()}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, BaseException):
        return error_text(value)
    return repr(value)


def error_text(error: BaseException) -> str:
    """A recorded call's error as ``module.Type: message`` (a ``RecordedError`` already
    reads so)."""
    if isinstance(error, RecordedError):
        return str(error)
    kind = type(error)
    return f"{kind.__module__}.{kind.__qualname__}: {error}"


def timestamp(epoch_ms: int) -> str:
    """Wall-clock milliseconds as ISO 8601 in UTC."""
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ancestors(path: str) -> Iterator[str]:
    while "." in path:
        path = path.rsplit(".", 1)[0]
        yield path


def _record_entry(record: ActionRecord) -> ActionEntry:
    sensory_before, short_term_before = record.previous or (None, None)
    changes = (
        *memory_changes("short_term", record.short_term, short_term_before),
        *memory_changes("sensory", record.sensory, sensory_before),
    )
    return ActionEntry(record.identity, True, record.epoch, changes, record.events, record.calls)


def _interrupted_entry(action: InterruptedAction) -> ActionEntry:
    return ActionEntry(action.identity, False, action.epoch, (), (), action.calls)


def _action_json(entry: ActionEntry) -> dict[str, Any]:
    return {
        "step": entry.identity.step,
        "action": entry.identity.action,
        "status": "completed" if entry.completed else "interrupted",
        "recorded_at": timestamp(entry.recorded_at_ms),
        "memory": {
            tier: [_change_json(c) for c in entry.memory if c.tier == tier] for tier in MEMORY_TIERS
        },
        "events": [_event_json(event) for event in entry.events],
        "calls": [_call_json(call) for call in entry.calls],
    }


def _change_json(change: MemoryChange) -> dict[str, Any]:
    data: dict[str, Any] = {"op": change.op, "path": change.path}
    if change.op == "set":
        data["value"] = plain(change.value)
    elif change.op == "object":
        data["fields"] = list(change.fields or ())
    if change.old_known:
        data["old"] = plain(change.old)
    return data


def _event_json(event: Event) -> dict[str, Any]:
    fields = event.model_dump(mode="json", exclude={"id"})
    return {"type": type(event).__qualname__, "id": str(event.id), "fields": fields}


def _call_json(call: DurableCall) -> dict[str, Any]:
    return {
        "index": call.index,
        "function": call.function,
        "args_digest": call.args_digest,
        "result": plain(call.result),
        "error": None if call.error is None else error_text(call.error),
        "latency_ms": call.duration_ms,
    }
