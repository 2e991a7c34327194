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


# A pydantic model's four slots, set through their descriptors: what ``model_construct``
# does, without its per-field defaults and ``model_post_init`` (``InputEvent`` has neither to
# run). The action log's packed event format has its own copy, with its invariant and a test
# (``flink_agents/runtime/action_log/_packed.py``).
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


class OutputEvent(Event):
    """Sent by an action to emit ``output`` as an output record of the run."""

    output: Any
