"""Scheduled events (``ctx.schedule``): the key's pending ones, and how a due one waits in
the key's queue of inputs.

A key's pending scheduled events are part of its control value (``KeyControl.scheduled``,
soonest first), which the driver owns. An action's ``schedule`` and ``cancel_scheduled``
leave an ``EventScheduled`` or ``ScheduleCancelled`` among the events it sent; the engine
takes them out when it applies the action's effects (``RunEngine._apply``, also when it
replays them from the action log) and hands them to the ``Schedules`` of the key the driver
is serving, which changes the control value and registers the timer. When the timer fires,
the driver starts a run with the due event (``KeyDriver.on_timer``), or queues it, as
``due_input``, behind the key's run in progress.

A run whose action sleeps (``ctx.sleep``) is set aside (``KeyDriver._set_aside``) as a
``WaitingRun`` in the key's control value (``KeyControl.waiting``, soonest first), with its
sensory memory: the key's later inputs run meanwhile. When its time comes, it resumes as a
due event starts a run, at once or queued (as ``wake_input``) behind the run in progress.

A run whose action waits for a signal (``ctx.wait_for``) is set aside the same way, its
``WaitingRun`` naming the signal's type and timing out at ``wake_ms`` (None: never). A
signal comes as a key's input, tagged (``signal_input``): when the driver starts it, the
key's oldest run waiting for its type, not yet woken by its timeout, takes it as its answer
and resumes (``answer_waiting``); with none, the signal starts a run of its own, as a due
event does.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from flink_agents.api import Event, EventScheduled, ScheduleCancelled
from flink_agents.memory import StateFormatError
from flink_agents.runtime._erasure import FORGET_TAG

if TYPE_CHECKING:
    from flink_agents.runtime._driver import KeyControl, Timers
    from flink_agents.runtime._metrics import AgentMetrics
    from flink_agents.runtime._run_state import RunState

SCHEDULING = (EventScheduled, ScheduleCancelled)
"""The events an action's ``schedule`` and ``cancel_scheduled`` send: never routed to
actions."""

DUE_TAG = "flink-agents/due"
DUE_VERSION = 1
WAKE_TAG = "flink-agents/wake"
WAKE_VERSION = 1
SIGNAL_TAG = "flink-agents/signal"
SIGNAL_VERSION = 1
NEVER_MS = 2**63 - 1
"""The due time of a wait without a timeout, where one is compared (it never comes)."""


@dataclass
class WaitingRun:
    """A run set aside while its action sleeps (``ctx.sleep``) until ``wake_ms``, or waits
    (``ctx.wait_for``) for a signal of type ``signal`` until ``wake_ms`` (None: no limit)."""

    wake_ms: int | None
    run: RunState
    sensory: tuple[tuple[str, Any], ...]
    """The run's sensory memory, as the key's sensory map held it: ``(key, stored)`` pairs,
    an object's ``ObjectMarker`` among them (``KeyDriver._set_aside``)."""
    queued: bool = False
    """Whether it is due and waits in the key's queue of inputs (``wake_input``)."""
    signal: type[Event] | None = None
    """The event type its action waits for (None: it sleeps)."""

    @property
    def due_ms(self) -> int:
        """When it resumes, unless a signal comes first (the name a due event's time has)."""
        return NEVER_MS if self.wake_ms is None else self.wake_ms


def wake_input(entry: WaitingRun) -> tuple[str, int, dict[str, Any]]:
    """A due waiting run's place in the key's queue of inputs (the run stays in the control
    value: this names it by its run sequence)."""
    return (WAKE_TAG, WAKE_VERSION, {"sequence": entry.run.sequence})


def is_queued_due(record: Any) -> bool:
    """Whether a queued input is a due event (``due_input``) or a due waiting run
    (``wake_input``), not an input record."""
    return type(record) is tuple and len(record) == 3 and record[0] in (DUE_TAG, WAKE_TAG)


def is_tagged_input(record: Any) -> bool:
    """Whether a tuple that came as a key's input is one of ours, not the user's record: a
    signal (``signal_input``) or a forget request (``runtime/_erasure.py``)."""
    return len(record) == 3 and record[0] in (SIGNAL_TAG, FORGET_TAG)


def woken_sequence(record: Any) -> int | None:
    """The run sequence of the waiting run a queued ``wake_input`` names; None for anything
    else."""
    if type(record) is not tuple or len(record) != 3 or record[0] != WAKE_TAG:
        return None
    _check_version(record[1], WAKE_VERSION, "queued waking run")
    return record[2]["sequence"]


def take_all_due(control: KeyControl, until_ms: int) -> list[EventScheduled | WaitingRun]:
    """The key's scheduled events and waiting runs due by ``until_ms``, in due order (a
    waiting run first on a tie: it began before the events its key's runs scheduled). The
    events are taken out of ``control``; the waiting runs stay, marked queued (the caller
    starts or queues them)."""
    woken: list[EventScheduled | WaitingRun] = (
        _take_woken(control, until_ms) if control.waiting else []
    )
    due = _take_scheduled(control, until_ms) if control.scheduled else []
    if not woken:
        return due
    return sorted([*woken, *due], key=_due) if due else woken


def _take_woken(control: KeyControl, until_ms: int) -> list[WaitingRun]:
    """The key's waiting runs due by ``until_ms`` and not yet queued, soonest first, now
    marked queued: new entries in a new tuple (a copy of the control value that shares the
    old ones keeps them as they were)."""
    woken: list[WaitingRun] = []
    waiting = []
    for entry in control.waiting:
        if not entry.queued and entry.due_ms <= until_ms:
            entry = replace(entry, queued=True)
            woken.append(entry)
        waiting.append(entry)
    if woken:
        control.waiting = tuple(waiting)
    return woken


def resume_waiting(control: KeyControl, sequence: int) -> WaitingRun:
    """Remove and return the key's waiting run of run sequence ``sequence``."""
    for index, entry in enumerate(control.waiting):
        if entry.run.sequence == sequence:
            control.waiting = control.waiting[:index] + control.waiting[index + 1 :]
            return entry
    raise LookupError(f"no waiting run of sequence {sequence}")


def _wake_times(control: KeyControl) -> list[int]:
    """When the key's waiting runs not yet queued wake (a wait without a timeout never)."""
    return [
        entry.wake_ms for entry in control.waiting if not entry.queued and entry.wake_ms is not None
    ]


def next_due_ms(control: KeyControl) -> int | None:
    """When the key's next scheduled event or waiting run not yet queued is due (a wait
    without a timeout is never due)."""
    times = _wake_times(control)
    if control.scheduled:
        times.append(control.scheduled[0].due_ms)
    return min(times, default=None)


def timer_times(control: KeyControl) -> set[int]:
    """The times of the key's timers for its scheduled events and its waiting runs not yet
    queued (one timer each)."""
    times = {entry.due_ms for entry in control.scheduled}
    times.update(_wake_times(control))
    return times


def signal_input(event: Event) -> tuple[str, int, dict[str, Any]]:
    """A signal (``with_signals``) as a key's input: tagged, so that the driver tells it
    from an input record (and Flink state holds it, queued, as plain data)."""
    return (SIGNAL_TAG, SIGNAL_VERSION, {"event": event})


def signal_of(record: Any) -> Event | None:
    """The signal an input is (``signal_input``), or None for anything else."""
    if type(record) is not tuple or len(record) != 3 or record[0] != SIGNAL_TAG:
        return None
    _check_version(record[1], SIGNAL_VERSION, "queued signal")
    return record[2]["event"]


def answer_waiting(control: KeyControl, signal: Event) -> WaitingRun | None:
    """Remove and return the key's oldest run (by run sequence) whose action waits for
    ``signal``'s type and is not yet woken by its timeout, its wait answered with
    ``signal``; None if no run waits for it."""
    waiting = [
        entry
        for entry in control.waiting
        if entry.signal is not None and not entry.queued and isinstance(signal, entry.signal)
    ]
    if not waiting:
        return None
    entry = min(waiting, key=lambda entry: entry.run.sequence)
    control.waiting = tuple(other for other in control.waiting if other is not entry)
    run = entry.run
    run.waits = (*run.waits[:-1], run.waits[-1]._replace(reply=signal))
    return entry


def due_input(entry: EventScheduled) -> tuple[str, int, dict[str, Any]]:
    """A due event as it waits in a key's queue of inputs (Flink state holds it): plain data
    by field name, with its format and version."""
    return (DUE_TAG, DUE_VERSION, scheduled_fields(entry))


def due_event(record: Any) -> EventScheduled | None:
    """The due event a queued input is (``due_input``), or None for an input record."""
    event = due_event_of(record)
    return None if event is None else scheduled_entry(record[2])


def due_event_of(record: Any) -> Event | None:
    """The event of the due event a queued input is (``due_input``), without making its
    ``EventScheduled`` (what a run of it needs); None for anything else."""
    if type(record) is not tuple or len(record) != 3 or record[0] != DUE_TAG:
        return None
    _check_version(record[1], DUE_VERSION, "queued due event")
    return record[2]["event"]


def _check_version(found: Any, known: int, what: str) -> None:
    if type(found) is not int or found > known:
        raise StateFormatError(
            f"a {what} in Flink state has format version {found!r}; this release of "
            f"flink_agents reads up to {known}: restore it with the release that wrote it "
            "or a later one"
        )


def scheduled_entry(fields: dict[str, Any]) -> EventScheduled:
    """An ``EventScheduled`` from its fields as stored (``handle``, ``due_ms``, ``event``).
    (Validated: ``model_construct`` inspects the id's default factory every time, and costs
    five times as much.)"""
    return EventScheduled(handle=fields["handle"], due_ms=fields["due_ms"], event=fields["event"])


def scheduled_fields(entry: EventScheduled) -> dict[str, Any]:
    """An ``EventScheduled`` as stored: by field name (its own id is not kept)."""
    return {"handle": entry.handle, "due_ms": entry.due_ms, "event": entry.event}


class Schedules:
    """The scheduled events of the key the driver serves now: the driver sets ``key``,
    ``control`` (the key's control value) and ``timers`` before it advances a run of the
    key, and the engine applies an action's scheduling events to it (``apply``).

    Args:
        listened: whether an action listens to an event type.
        wake_at_end: ``KeyDriver._scheduled_at_end``: a key with pending events is called at the
            end of input, where they fire (``KeyDriver.on_end_of_input``).
        metrics: where scheduled and cancelled events are counted.
    """

    __slots__ = ("_listened", "_metrics", "_wake_at_end", "clock_ms", "control", "key", "timers")

    def __init__(
        self,
        listened: Callable[[type], bool],
        wake_at_end: Callable[[Any, Timers], None],
        metrics: AgentMetrics,
    ) -> None:
        self._listened = listened
        self._wake_at_end = wake_at_end
        self._metrics = metrics
        self.key: Any = None
        self.control: KeyControl | None = None
        self.timers: Timers | None = None
        self.clock_ms: int | None = None
        """The time a due event's run takes as now, where that is not the runner's clock:
        at the end of input, where the key's clock moves to each due event's time
        (``KeyDriver._fire_at_end``). None: the runner's clock."""

    def now_ms(self) -> int:
        """Now, for an action scheduling an event after a delay."""
        if self.clock_ms is not None:
            return self.clock_ms
        return self.timers.now_ms()

    def pending(self) -> tuple[EventScheduled, ...]:
        """The served key's pending events, soonest first."""
        return self.control.scheduled

    def listened(self, event_type: type[Event]) -> bool:
        """Whether an action listens to events of ``event_type``."""
        return self._listened(event_type)

    def apply(self, change: Event) -> None:
        """Apply an action's ``EventScheduled`` (its timer registered; an event of the same
        handle, scheduled by an earlier attempt of the action, replaced) or
        ``ScheduleCancelled``."""
        control = self.control
        kept = [e for e in control.scheduled if e.handle != change.handle]
        if type(change) is EventScheduled:
            bisect.insort_right(kept, change, key=_due)  # after those due at the same time
            self.timers.wake_at(change.due_ms)
            self._wake_at_end(self.key, self.timers)
            self._metrics.event_scheduled()
        elif len(kept) < len(control.scheduled):
            self._metrics.scheduled_event_cancelled()
        control.scheduled = tuple(kept)


def _due(entry: EventScheduled | WaitingRun) -> int:
    return entry.due_ms


def _take_scheduled(control: KeyControl, until_ms: int) -> list[EventScheduled]:
    """Remove and return the key's scheduled events due by ``until_ms``, soonest first."""
    scheduled = control.scheduled
    count = bisect.bisect_right(scheduled, until_ms, key=_due)
    control.scheduled = scheduled[count:]
    return list(scheduled[:count])
