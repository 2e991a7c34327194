"""Checking and copying memory values, so stored values never alias caller objects.

Copying on the way in and on the way out gives the dict-backed local runner the same
semantics as Flink state, where every value is serialized.
"""

from __future__ import annotations

import pickle
from typing import Any

from pydantic import BaseModel

from flink_agents.api import MemoryObject, MemoryValueError

_IMMUTABLE = (type(None), bool, int, float, str, bytes)
IMMUTABLE = dict.fromkeys(_IMMUTABLE, True)
"""The value types stored and read as they are (exactly these types, not subclasses). A
dict, for ``type(value) in IMMUTABLE``: the interpreter's dict lookup is in use all the
time, where a frozenset's has to come back into the CPU's caches first, on every record
of a Flink task (``bench/RESULTS.md``)."""
_ALLOWED = (
    "memory values must be None, bool, int, float, str, bytes, lists and str-keyed dicts "
    "of those, or objects that pickle (pydantic models, tuples, sets, module-level classes)"
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
    if isinstance(value, _IMMUTABLE):  # subclasses such as str enums
        return value
    if isinstance(value, MemoryObject):  # a handle on memory, not a value
        raise MemoryValueError(
            f"cannot store {kind.__name__} at '{path}': a MemoryObject goes in as a field "
            "value of its own (set(path, obj)), not inside another value"
        )
    if isinstance(value, BaseModel):
        return _serialized_copy(value, path)
    try:
        return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:
        raise MemoryValueError(
            f"cannot store {kind.__name__} at '{path}': it does not pickle; {_ALLOWED}"
        ) from None


def _serialized_copy(value: BaseModel, path: str) -> BaseModel:
    """A copy made the way Flink state and the action log store the value (pickle), so a
    value that cannot be stored there (a lambda, a socket, a class defined inside a
    function, a model with a field holding one) is refused here, at ``set``, in every
    runner alike."""
    try:
        return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception as error:
        raise MemoryValueError(
            f"cannot store {type(value).__name__} at '{path}': it cannot be serialized "
            f"({type(error).__name__}: {error})"
        ) from None


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
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
