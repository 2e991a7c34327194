"""Events: the messages actions exchange within a run."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar
from uuid import UUID

from pydantic import ConfigDict, Field
from pydantic_core import PydanticSerializationError

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

    def get_type(self) -> str:
        """The type string this event is routed by where events are routed by string: its
        class's ``EVENT_TYPE``, else the class's ``module.qualname``."""
        kind = type(self)
        return kind.EVENT_TYPE or f"{kind.__module__}.{kind.__qualname__}"

    def model_dump_json(self, **kwargs: Any) -> str:
        """As pydantic's, with a pyflink ``Row`` written as ``{"type": "Row", "values":
        [...], "fields": [...]}`` (events are pickled where they are stored; this is for
        showing them)."""
        kwargs.setdefault("fallback", _shown)
        return super().model_dump_json(**kwargs)

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

    @property
    def type(self) -> str:
        """``get_type()``, by Apache Flink Agents 0.3's name."""
        return self.get_type()


class OutputEvent(Event):
    """Sent by an action to emit ``output`` as an output record of the run."""

    EVENT_TYPE: ClassVar[str | None] = "_output_event"

    output: Any

    @property
    def type(self) -> str:
        """``get_type()``, by Apache Flink Agents 0.3's name."""
        return self.get_type()


def _shown(value: Any) -> Any:
    """A value pydantic cannot write as JSON, written as JSON: a pyflink ``Row`` (known by
    its shape: this module does not import pyflink)."""
    if type(value).__name__ == "Row" and hasattr(value, "_values"):
        shown: dict[str, Any] = {"type": "Row", "values": list(value._values)}
        fields = getattr(value, "_fields", None)
        if fields:
            shown["fields"] = list(fields)
        return shown
    raise PydanticSerializationError(f"Unable to serialize unknown type: {type(value)}")
