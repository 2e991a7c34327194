"""Events scheduled for later: what ``ctx.schedule`` records and ``ctx.scheduled`` lists."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import SerializeAsAny

from flink_agents.api._events import Event


class EventScheduled(Event):
    """An event scheduled for the key of the run that scheduled it: when ``due_ms`` comes,
    ``event`` starts a run of the key as an input would.

    ``ctx.scheduled()`` lists the key's pending ones; the run that schedules one records
    it among the events its action sent (the event log and the action log show it), but no
    action receives it: the framework keeps it until it is due or cancelled.
    """

    handle: str
    """What ``ctx.cancel_scheduled`` takes: the same when the action runs again after a
    failure (a retry, a replay after a restore), so it schedules the same event once."""
    due_ms: int
    """When the event is due: milliseconds since the epoch on the runner's clock (Flink's
    processing time; the local runner's simulated clock)."""
    event: SerializeAsAny[Event]
    """The event that starts the run."""

    @property
    def due(self) -> datetime:
        """``due_ms`` as a time zone aware UTC ``datetime``."""
        return datetime.fromtimestamp(self.due_ms / 1000, tz=UTC)


class ScheduleCancelled(Event):
    """Recorded, like ``EventScheduled``, when an action cancels a scheduled event."""

    handle: str
