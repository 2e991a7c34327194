"""Records in and out, the same way in every runner: a JSON line to a record, a record to its
key, an output to a JSON line, and the error records that bad input and failed runs become.

Error records are plain dicts (JSON-ready) of two kinds, with the same fields everywhere:

- ``rejected``: input that never reached the agent (a line that is not a JSON object, a
  record whose key cannot be taken): ``reason`` and ``input`` (the record), or for file input
  ``raw`` (the line's text), ``file`` and ``line`` (1-based);
- ``failed_run``: a run abandoned under the ``error-output`` or ``retry`` policy: ``key``,
  ``input``, ``run_sequence``, ``action``, ``error`` (``"Type: message"``) and ``attempts``,
  whatever the runner and wherever the input came from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

from flink_agents.api import Event, FlinkAgentsError


class BadRecord(ValueError):
    """Input the agent cannot take (a line that is not one JSON object, a record without a
    usable key); the message is the reason in the error output."""


def take_key(key_of: Callable[[Any], Any], record: Any) -> Any:
    """``record``'s key, by the runner's key function.

    Raises:
        BadRecord: the key cannot be taken: a missing field, a key selector that raised, or
            a key that is not hashable (keys index state).
    """
    try:
        key = key_of(record)
    except BadRecord:
        raise
    except Exception as error:
        raise BadRecord(f"the key selector raised {type(error).__name__}: {error}") from None
    try:
        hash(key)
    except TypeError:
        raise BadRecord(f"key {key!r:.100} is not hashable ({type(key).__name__})") from None
    return key


def signal_type(event_type: Any) -> type[Event] | None:
    """``with_signals``' ``event_type``, checked: None or an ``Event`` class.

    Raises:
        FlinkAgentsError: it is something else.
    """
    if event_type is not None and not (
        isinstance(event_type, type) and issubclass(event_type, Event)
    ):
        raise FlinkAgentsError(f"event_type must be an Event class, got {event_type!r}")
    return event_type


def signal_event(record: Any, event_type: type[Event] | None) -> Event:
    """The signal a record of a signal stream is (``with_signals``): an ``Event`` as it is,
    or, with ``event_type``, one made of a mapping's values of the fields it declares (a
    table's row: other columns, such as the key's, are left out).

    Raises:
        BadRecord: the record is not an event, nor fields ``event_type`` accepts.
    """
    if isinstance(record, Event) and (event_type is None or isinstance(record, event_type)):
        return record
    if event_type is None:
        raise BadRecord(
            f"a signal must be an Event, got {type(record).__name__}: send events, or pass "
            "event_type= to with_signals to make one of each record's fields"
        )
    if not isinstance(record, Mapping):
        raise BadRecord(
            f"a signal record must be a {event_type.__name__} or a mapping of its fields, "
            f"got {type(record).__name__}"
        )
    fields = {name: record[name] for name in event_type.model_fields if name in record}
    try:
        return event_type.model_validate(fields)
    except ValidationError as error:
        raise BadRecord(f"not a {event_type.__name__} signal: {error}") from None


def rejected(
    reason: str,
    *,
    input: Any = None,
    raw: str | None = None,
    file: str | None = None,
    line: int | None = None,
) -> dict[str, Any]:
    """The error record of input that never reached the agent (see the module docstring)."""
    record: dict[str, Any] = {"kind": "rejected", "reason": reason}
    if raw is None:
        record["input"] = input
    else:
        record.update(file=file, line=line, raw=raw)
    return record


def failed_run(
    key: Any,
    input: Any,
    run_sequence: int,
    action: str,
    cause: BaseException,
    attempts: int,
) -> dict[str, Any]:
    """The error record of a run abandoned under the error policy."""
    return {
        "kind": "failed_run",
        "key": key,
        "input": input,
        "run_sequence": run_sequence,
        "action": action,
        "error": f"{type(cause).__name__}: {cause}",
        "attempts": attempts,
    }


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


class RejectedRecord(NamedTuple):
    """A ``rejected`` error record travelling in a job's main stream, from a step that
    rejected its input (the main job's parser) to the key-taking step, which passes it to
    the error output. Kept out of a side output of that step, which in PyFlink's thread mode
    would keep it from chaining to the next one (``bench/RESULTS.md``)."""

    error: dict[str, Any]
