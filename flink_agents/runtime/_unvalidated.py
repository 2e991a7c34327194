"""Events the framework builds without pydantic's validation, from values it made or read back
itself: a run's input event, and the events of an action-log record.

A pydantic model's state is its four slots: ``__dict__`` (the field values),
``__pydantic_fields_set__``, ``__pydantic_extra__`` and ``__pydantic_private__``.
``BaseModel.model_construct`` fills the same four and nothing else, but it also runs a model's
``model_post_init`` (unpickling a model does not, and neither may reading a record: the event
must come back as it was sent) and fills defaults field by field; validating costs more
still. ``constructed`` fills the four slots directly.

Invariant, held by ``tests/runtime/test_unvalidated.py`` and
``tests/runtime/action_log/test_packed.py``: for an event without ``model_post_init``,
``constructed(cls, fields, fields_set)`` equals ``cls.model_construct(_fields_set=fields_set,
**fields)`` slot for slot. It relies on pydantic v2's four model slots, on no interpreter
detail.
"""

from __future__ import annotations

from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel

from flink_agents._ids import new_event_id
from flink_agents.api import Event, InputEvent

_E = TypeVar("_E", bound=Event)

_set_fields = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_new_object = object.__new__


def constructed(cls: type[_E], fields: dict[str, Any], fields_set: set[str]) -> _E:
    """An event of ``cls`` holding ``fields`` (all of them, in field order), of which
    ``fields_set`` were given, and nothing else: no validation, no ``model_post_init``."""
    event = _new_object(cls)
    _set_fields(event, fields)
    _set_fields_set(event, fields_set)
    _set_extra(event, None)
    _set_private(event, None)
    return event


def input_event(record: Any, event_id: UUID | None = None) -> InputEvent:
    """The ``InputEvent`` of ``record``: what ``InputEvent(input=record)`` (or with ``id=
    event_id``) makes, without validation, which has nothing to check (``input`` takes
    anything, the id is a UUID already). The framework makes one per run."""
    if event_id is None:
        return constructed(InputEvent, {"id": new_event_id(), "input": record}, {"input"})
    return constructed(InputEvent, {"id": event_id, "input": record}, {"id", "input"})
