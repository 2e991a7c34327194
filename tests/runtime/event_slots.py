"""What a pydantic event is made of, to compare events built different ways slot for slot."""

from __future__ import annotations

from typing import Any

from flink_agents.api import ChatMessage, Event


class Noted(Event):
    """Nested values, a default left unset, and a pydantic value among the fields."""

    notes: list[dict[str, int]]
    message: ChatMessage | None = None
    level: str = "info"


def slots(event: Event) -> tuple[Any, ...]:
    """The event's class and its four pydantic slots (the field values in field order)."""
    return (
        type(event),
        list(event.__dict__.items()),
        event.__pydantic_fields_set__,
        event.__pydantic_extra__,
        event.__pydantic_private__,
    )
