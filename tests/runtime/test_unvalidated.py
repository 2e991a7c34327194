"""Events built without validation (``flink_agents/runtime/_unvalidated.py``) equal what
pydantic's public constructors make, slot for slot."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from flink_agents.api import ChatMessage, InputEvent
from flink_agents.runtime._unvalidated import constructed, input_event
from tests.runtime.event_slots import Noted, slots


@pytest.mark.parametrize("record", [None, {"text": "hi"}, ("k", 1), [1, 2]])
def test_an_input_event_equals_the_validated_one(record: Any) -> None:
    event_id = UUID(int=42)
    assert slots(input_event(record, event_id)) == slots(InputEvent(id=event_id, input=record))
    fresh = input_event(record)
    validated = InputEvent(input=record)
    assert type(fresh.id) is UUID and fresh.id != validated.id
    assert slots(fresh)[2:] == slots(validated)[2:]
    assert fresh.input == record and fresh.__pydantic_fields_set__ == {"input"}


@pytest.mark.parametrize(
    ("fields", "fields_set"),
    [
        ({"id": UUID(int=1), "notes": [], "message": None, "level": "info"}, {"notes"}),
        (
            {
                "id": UUID(int=2),
                "notes": [{"a": 1}],
                "message": ChatMessage(role="user", content="x"),
                "level": "debug",
            },
            {"id", "notes", "message", "level"},
        ),
    ],
)
def test_constructed_equals_model_construct(fields: dict[str, Any], fields_set: set[str]) -> None:
    assert slots(constructed(Noted, dict(fields), set(fields_set))) == slots(
        Noted.model_construct(_fields_set=set(fields_set), **fields)
    )
