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

from typing import Any
from uuid import UUID

from flink_agents.api import Event
from flink_agents.runtime._unvalidated import constructed

PackedEvent = tuple[type[Event], dict[str, Any], tuple[str, ...]]
"""``(class, field values with the id as an int, names of the fields set)``."""


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
    return constructed(cls, fields, set(fields_set))
