"""Events: the messages actions exchange within a run."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar
from uuid import UUID

from pydantic import ConfigDict, Field

from flink_agents._ids import new_event_id
from flink_agents.api._upgrade import Upgradable

E = TypeVar("E", bound="Event")


class Event(Upgradable):
    """Base class of every event. Subclass it, with pydantic fields, for your own events.

    Unknown fields are rejected so a typo fails where it is made. Events travel through
    Flink state and the action log, so subclasses must live at module level (picklable); a
    field added later (with a default) is filled in on events pickled before it.
    """

    model_config = ConfigDict(extra="forbid")

    EVENT_TYPE: ClassVar[str | None] = None
    """The type string that names this class's events where events are routed by string
    (Apache Flink Agents 0.3 and later: ``@action(InputEvent.EVENT_TYPE)``); None for a
    class routed by class only."""

    id: UUID = Field(default_factory=new_event_id)

    @classmethod
    def from_event(cls: type[E], event: Event) -> E:
        """``event`` as this class, for an action that listens by type string.

        Raises:
            TypeError: ``event`` is not one of this class's events.
        """
        if not isinstance(event, cls):
            raise TypeError(f"{type(event).__name__} is not a {cls.__name__}")
        return event


class InputEvent(Event):
    """Created by the framework for each input record; the entry point of a run."""

    EVENT_TYPE: ClassVar[str | None] = "_input_event"

    input: Any


class OutputEvent(Event):
    """Sent by an action to emit ``output`` as an output record of the run."""

    EVENT_TYPE: ClassVar[str | None] = "_output_event"

    output: Any
