"""JSON lines in and out: a line to a record, with one wording for bad lines, and an output
to a line, the same way in the local batch runner and the Flink job."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel


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


def to_json_line(value: Any) -> str:
    """``value`` as one line of JSON (without the newline)."""
    return json.dumps(value, default=_json_default, ensure_ascii=False)


def _json_default(value: Any) -> Any:
    """Pydantic outputs (a ReAct agent's structured answer) as JSON objects, else ``str``."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)
