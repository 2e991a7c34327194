"""The packed event format makes back the event pydantic's ``model_construct`` would make.

``unpacked_event`` sets a model's four slots itself (``runtime/action_log/_packed.py``); this
holds it to pydantic's public constructor, slot for slot, for the shapes events take.
"""

from __future__ import annotations

from uuid import UUID

import pytest

from flink_agents.api import ChatMessage, Event, InputEvent, OutputEvent
from flink_agents.runtime.action_log._packed import packed_event, unpacked_event
from tests.runtime.event_slots import Noted, slots

EVENTS = [
    InputEvent(input={"text": "hi"}),
    InputEvent(id=UUID(int=7), input=None),
    OutputEvent(output=("k", 1)),
    Noted(notes=[{"a": 1}]),
    Noted(notes=[], message=ChatMessage(role="user", content="x"), level="debug"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_an_unpacked_event_equals_model_construct_slot_for_slot(event: Event) -> None:
    packed = packed_event(event)
    assert packed is not None
    cls, fields, fields_set = packed
    constructed = cls.model_construct(
        _fields_set=set(fields_set), **{**fields, "id": UUID(int=fields["id"])}
    )
    unpacked = unpacked_event(packed)
    assert slots(unpacked) == slots(constructed) == slots(event)
    assert type(unpacked.id) is UUID


def test_an_event_with_more_than_its_fields_is_not_packed() -> None:
    class Loose(Event):
        model_config = {"extra": "allow"}

    assert packed_event(Loose(surprise=1)) is None
    assert packed_event(OutputEvent.model_construct(id="not a uuid", output=1)) is None
