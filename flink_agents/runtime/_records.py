"""Turning a line of JSON-lines input into a record, with one wording for bad lines."""

from __future__ import annotations

import json
from typing import Any


class BadRecord(ValueError):
    """A line that is not one JSON object; the message is the reason for the error output."""


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object on ``text`` (already stripped).

    Raises:
        BadRecord: invalid JSON, or JSON that is not an object.
    """
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        raise BadRecord(f"invalid JSON ({error.msg}, column {error.colno})") from None
    if not isinstance(record, dict):
        raise BadRecord(f"expected a JSON object, got {type(record).__name__}")
    return record
