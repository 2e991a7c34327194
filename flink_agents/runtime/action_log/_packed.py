"""The action log's packed event format: an event as plain values, part of a record's payload.

The pickle serializer stores a completed record's events as ``packed_event`` tuples rather
than as the pydantic models (records written since 2026-11-28; older records hold the models
and still read back). A packed event is ``(cls, fields, fields_set)``: the event's class
(pickled by its module path, like the model itself), its field values in field order with the
id as its 128-bit integer, and the names of the fields that were set. A model and its UUID
each pickle through Python code (``__getstate__``, ``copyreg``); the tuple holds only values
pickle writes natively, which is why records are written this way (``bench/RESULTS.md``).

This layout is persisted: changing what ``packed_event`` returns changes the bytes of every
record written after the change, and ``unpacked_event`` must read every layout ever written
(``tests/runtime/golden/``).
"""

from __future__ import annotations

from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel

from flink_agents.api import Event

PackedEvent = tuple[type[Event], dict[str, Any], tuple[str, ...]]
"""``(class, field values with the id as an int, names of the fields set)``."""

_E = TypeVar("_E", bound=Event)

# A pydantic model's state is its four slots: ``__dict__`` (the field values),
# ``__pydantic_fields_set__``, ``__pydantic_extra__`` and ``__pydantic_private__``.
# ``BaseModel.model_construct`` fills the same four and nothing else, but it also runs a
# model's ``model_post_init`` (unpickling a model does not, and neither may reading a
# record: the event must come back as it was sent) and fills defaults field by field.
# Invariant, held by ``tests/runtime/action_log/test_packed.py``: for an event without
# ``model_post_init``, ``_constructed(cls, fields, fields_set)`` equals
# ``cls.model_construct(_fields_set=fields_set, **fields)`` slot for slot.
_set_fields = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_new_object = object.__new__


def _constructed(cls: type[_E], fields: dict[str, Any], fields_set: set[str]) -> _E:
    """An event of ``cls`` holding ``fields`` (all of them, in field order), of which
    ``fields_set`` were given, and nothing else: no validation, no ``model_post_init``."""
    event = _new_object(cls)
    _set_fields(event, fields)
    _set_fields_set(event, fields_set)
    _set_extra(event, None)
    _set_private(event, None)
    return event


def packed_event(event: Event) -> PackedEvent | None:
    """``event`` as plain values: its class, its field values (the id as its 128-bit
    integer) and the names of the fields set. None for an event that holds more than its
    fields (extra or private attributes) or whose id is not a plain ``UUID``: the record
    keeps the model itself then. ``unpacked_event`` makes it back."""
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


def unpacked_event(packed: PackedEvent) -> Event:
    """The event ``packed_event`` made ``packed`` of, equal to the original (as unpickling
    the model makes it: no validation)."""
    cls, fields, fields_set = packed
    fields = dict(fields)
    fields["id"] = UUID(int=fields["id"])
    return _constructed(cls, fields, set(fields_set))
