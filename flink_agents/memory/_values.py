"""Checking and copying memory values, so stored values never alias caller objects.

Copying on the way in and on the way out gives the dict-backed local runner the same
semantics as Flink state, where every value is serialized.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from flink_agents.api._errors import MemoryValueError

_IMMUTABLE = (type(None), bool, int, float, str, bytes)
_ALLOWED = (
    "memory values must be None, bool, int, float, str, bytes, lists and str-keyed dicts "
    "of those, or pydantic models"
)


def checked_copy(value: Any, path: str) -> Any:
    """A private copy of ``value`` fit for storage.

    Raises:
        MemoryValueError: naming ``path`` and the offending element when a value is not storable.
    """
    try:
        return _checked_copy(value, path)
    except RecursionError:
        raise MemoryValueError(
            f"cannot store the value at '{path}': it contains itself or is nested too deeply"
        ) from None


def _checked_copy(value: Any, path: str) -> Any:
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if isinstance(value, list):
        return [_checked_copy(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        copied = {}
        for k, item in value.items():
            if not isinstance(k, str):
                raise MemoryValueError(
                    f"cannot store a dict with key {k!r} ({type(k).__name__}) at '{path}': "
                    "dict keys in memory must be str"
                )
            copied[k] = _checked_copy(item, f"{path}.{k}")
        return copied
    if isinstance(value, BaseModel):
        return value.model_copy(deep=True)
    if isinstance(value, _IMMUTABLE):  # subclasses such as str enums
        return value
    raise MemoryValueError(f"cannot store {kind.__name__} at '{path}': {_ALLOWED}")


def copy_out(value: Any) -> Any:
    """A copy of a stored value, so callers cannot change memory behind its back."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is list:
        return [copy_out(item) for item in value]
    if kind is dict:
        return {k: copy_out(item) for k, item in value.items()}
    if isinstance(value, BaseModel):
        return value.model_copy(deep=True)
    return value
