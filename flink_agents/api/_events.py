"""Events: the messages actions exchange within a run."""

from __future__ import annotations

from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from flink_agents._ids import new_event_id


class Event(BaseModel):
    """Base class of every event. Subclass it, with pydantic fields, for your own events.

    Unknown fields are rejected so a typo fails where it is made. Events travel through
    Flink state and the action log, so subclasses must live at module level (picklable).
    """

    model_config = ConfigDict(extra="forbid")

    id: UUID = Field(default_factory=new_event_id)


class InputEvent(Event):
    """Created by the framework for each input record; the entry point of a run."""

    input: Any


# A pydantic model's four slots, set through their descriptors (what ``model_construct``
# does, field by field and several times slower).
_set_fields = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_E = TypeVar("_E", bound=Event)
_new_object = object.__new__


def input_event(record: Any, event_id: UUID | None = None) -> InputEvent:
    """The ``InputEvent`` of ``record``: what ``InputEvent(input=record)`` (or with ``id=
    event_id``) makes, without validation, which has nothing to check (``input`` takes
    anything, the id is a UUID already). The framework makes one per run; validating it
    cost three times as much."""
    if event_id is None:
        return _constructed(InputEvent, {"id": new_event_id(), "input": record}, {"input"})
    return _constructed(InputEvent, {"id": event_id, "input": record}, {"id", "input"})


def _constructed(cls: type[_E], fields: dict[str, Any], fields_set: set[str]) -> _E:
    """An event of ``cls`` holding ``fields`` (all of them, in field order), of which
    ``fields_set`` were given, and nothing else: no validation."""
    event = _new_object(cls)
    _set_fields(event, fields)
    _set_fields_set(event, fields_set)
    _set_extra(event, None)
    _set_private(event, None)
    return event


def packed_event(event: Event) -> tuple[type[Event], dict[str, Any], tuple[str, ...]] | None:
    """``event`` as plain values: its class, its field values (the id as its 128-bit
    integer) and the names of the fields set. It pickles in about a third of the time the
    model does: a model and its UUID each pickle through Python code (``__getstate__``,
    ``copyreg``), about 8 us of a completed action's 13 in the action log. None for an
    event that holds more than its fields (extra or private attributes) or whose id is not
    a plain ``UUID``: keep the model itself then. ``unpacked_event`` makes it back."""
    fields = event.__dict__
    event_id = fields.get("id")
    if (
        type(event_id) is not UUID
        or event.__pydantic_extra__ is not None
        or event.__pydantic_private__ is not None
    ):
        return None
    packed = dict(fields)  # in field order, the id's place kept
    packed["id"] = event_id.int
    return type(event), packed, tuple(event.__pydantic_fields_set__)


def unpacked_event(packed: tuple[type[Event], dict[str, Any], tuple[str, ...]]) -> Event:
    """The event ``packed_event`` made ``packed`` of, equal to the original (as unpickling
    the model makes it: no validation)."""
    cls, fields, fields_set = packed
    fields = dict(fields)
    fields["id"] = UUID(int=fields["id"])
    return _constructed(cls, fields, set(fields_set))


class OutputEvent(Event):
    """Sent by an action to emit ``output`` as an output record of the run."""

    output: Any
