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
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flink_agents.api import Event, EventScheduled, ScheduleCancelled

if TYPE_CHECKING:
    from flink_agents.runtime._driver import KeyControl, Timers
    from flink_agents.runtime._metrics import AgentMetrics

SCHEDULING = (EventScheduled, ScheduleCancelled)
"""The events an action's ``schedule`` and ``cancel_scheduled`` send: never routed to
actions."""

DUE_TAG = "flink-agents/due"
DUE_VERSION = 1


def due_input(entry: EventScheduled) -> tuple[str, int, dict[str, Any]]:
    """A due event as it waits in a key's queue of inputs (Flink state holds it): plain data
    by field name, with its format and version."""
    return (DUE_TAG, DUE_VERSION, scheduled_fields(entry))


def due_event(record: Any) -> EventScheduled | None:
    """The due event a queued input is (``due_input``), or None for an input record."""
    if type(record) is not tuple or len(record) != 3 or record[0] != DUE_TAG:
        return None
    if type(record[1]) is not int or record[1] > DUE_VERSION:
        from flink_agents.runtime._persisted import StateFormatError  # (it imports the driver)

        raise StateFormatError(
            f"a queued due event in Flink state has format version {record[1]!r}; this "
            f"release of flink_agents reads up to {DUE_VERSION}: restore it with the release "
            "that wrote it or a later one"
        )
    return scheduled_entry(record[2])


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


def _due(entry: EventScheduled) -> int:
    return entry.due_ms


def take_due(control: KeyControl, until_ms: int) -> list[EventScheduled]:
    """Remove and return the key's scheduled events due by ``until_ms``, soonest first."""
    scheduled = control.scheduled
    count = bisect.bisect_right(scheduled, until_ms, key=_due)
    control.scheduled = scheduled[count:]
    return list(scheduled[:count])
