"""Turning what users pass as ``key_selector`` into a function of the record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flink_agents._shipping import ShippedByName, ShippedFunction
from flink_agents.runtime._records import BadRecord


def key_function(selector: Callable[[Any], Any] | str | None) -> Callable[[Any], Any]:
    """A function from record to key: ``selector`` itself, a field getter for a field name,
    or a constant None key."""
    if selector is None:
        return ShippedFunction(_no_key)
    if isinstance(selector, str):
        return _FieldKey(selector)
    if callable(selector):
        return selector
    raise TypeError(f"key_selector must be a function, a field name or None, got {selector!r}")


def _no_key(record: Any) -> None:
    return None


class _FieldKey(ShippedByName):
    """Picklable field getter (Flink ships key selectors to its workers)."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __call__(self, record: Any) -> Any:
        try:
            if isinstance(record, dict):
                return record[self.field]
            return getattr(record, self.field)
        except (KeyError, AttributeError):
            raise BadRecord(f"record has no key field {self.field!r}") from None


class ConstantKey(ShippedByName):
    """A key selector giving every record the same key (e.g. the input file it came from)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, record: Any) -> Any:
        return self.value
