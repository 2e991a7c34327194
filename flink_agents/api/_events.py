"""Events: the messages actions exchange within a run."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import ConfigDict, Field

from flink_agents._ids import new_event_id
from flink_agents.api._upgrade import Upgradable


class Event(Upgradable):
    """Base class of every event. Subclass it, with pydantic fields, for your own events.

    Unknown fields are rejected so a typo fails where it is made. Events travel through
    Flink state and the action log, so subclasses must live at module level (picklable); a
    field added later (with a default) is filled in on events pickled before it.
    """

    model_config = ConfigDict(extra="forbid")

    id: UUID = Field(default_factory=new_event_id)


class InputEvent(Event):
    """Created by the framework for each input record; the entry point of a run."""

    input: Any


class OutputEvent(Event):
    """Sent by an action to emit ``output`` as an output record of the run."""

    output: Any
