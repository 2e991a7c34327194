"""Deterministic identifiers: argument digests for replay matching, ids for external writes.

Both must come out the same in another process after a restart, so neither may depend on
``hash()`` (randomized per process for str and bytes), on object addresses or on dict or set
iteration order.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import hashlib
import pathlib
import pickle
import re
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from flink_agents.memory import NAMESPACE, external_id_of
from flink_agents.runtime.action_log._base import ActionIdentity

__all__ = ["NAMESPACE", "digest_args", "external_id"]


_REPR_STABLE = (
    float,
    complex,
    decimal.Decimal,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    datetime.timezone,
    uuid.UUID,
    pathlib.PurePath,
)
_BUILTIN_BASES = (dict, list, tuple, str, int, bytes)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def digest_args(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """A sha256 hex digest of a call's arguments, equal across calls and processes.

    Arguments are encoded canonically: None, bool, int, str and bytes by value; the
    ``_REPR_STABLE`` types (float, Decimal, datetime types, UUID, paths) by type and
    ``repr``; lists and tuples in order; dicts, sets and frozensets independent of their
    order; enums, dataclasses and pydantic models by qualified type name and fields. Keyword
    arguments are order-independent.

    Subclasses of the builtin containers (``OrderedDict``, named tuples) count as their
    builtin base plus their type name.

    Limits: any other object is digested by its pickle (so its class must be importable,
    a set inside it may digest differently in another process, and two objects sharing one
    sub-object digest differently from two equal copies), or,
    when it cannot be pickled, by its type and its ``repr`` without memory addresses, in
    which case a changed argument whose ``repr`` does not show the change goes unnoticed.
    Floats and ints of equal value differ (``1 != 1.0`` here). The digest is meant to tell
    a replayed call from a changed one, not to protect against collisions on purpose.
    """
    payload = _canon(("call", tuple(args), dict(kwargs)))
    return hashlib.sha256(payload).hexdigest()


def external_id(identity: ActionIdentity, index: int) -> str:
    """A UUID5 for the ``index``-th external write of an action, the same on every replay.

    Use it as the id of a point, row or message an action writes outside Flink (e.g. a
    Qdrant point): a replayed action then overwrites its earlier write instead of adding one.
    Inside an action, ``ctx.external_id()`` hands these out in order.
    """
    return external_id_of(
        (identity.job, identity.key, identity.run_sequence, identity.step, identity.action), index
    )


def _frame(tag: bytes, body: bytes) -> bytes:
    """Tag and length prefix, so that no two different values encode to the same bytes."""
    return tag + len(body).to_bytes(8, "big") + body


def _type_name(kind: type) -> bytes:
    return f"{kind.__module__}.{kind.__qualname__}".encode()


def _canon(value: Any) -> bytes:
    try:
        return _encode(value)
    except RecursionError:  # a self-referencing structure: pickle handles cycles
        return _fallback(value)


def _encode(value: Any) -> bytes:
    kind = type(value)
    if value is None:
        return b"N"
    if kind is bool:
        return b"T" if value else b"F"
    if kind is int:
        return _frame(b"i", str(value).encode())
    if kind is str:
        return _frame(b"s", value.encode("utf-8", "surrogatepass"))
    if kind is bytes:
        return _frame(b"b", value)
    if kind is list or kind is tuple:
        tag = b"l" if kind is list else b"t"
        return _frame(tag, b"".join(_encode(item) for item in value))
    if kind is dict:
        pairs = sorted(_encode(k) + _encode(v) for k, v in value.items())
        return _frame(b"d", b"".join(pairs))
    if kind is set or kind is frozenset:
        return _frame(b"S", b"".join(sorted(_encode(item) for item in value)))
    if isinstance(value, enum.Enum):
        return _frame(b"e", _type_name(kind) + b"\0" + _encode(value.value))
    for base in _BUILTIN_BASES:  # subclasses such as OrderedDict and named tuples
        if isinstance(value, base):
            return _frame(b"x", _type_name(kind) + b"\0" + _encode(base(value)))
    if isinstance(value, _REPR_STABLE):
        return _frame(b"r", _type_name(kind) + b"\0" + repr(value).encode())
    if isinstance(value, BaseModel):
        fields = {name: getattr(value, name) for name in type(value).model_fields}
        return _frame(b"m", _type_name(kind) + b"\0" + _encode(fields))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return _frame(b"c", _type_name(kind) + b"\0" + _encode(fields))
    return _fallback(value)


def _fallback(value: Any) -> bytes:
    try:
        return _frame(b"p", pickle.dumps(value, protocol=5))
    except Exception:
        shown = _ADDRESS.sub("", repr(value))
        return _frame(b"R", _type_name(type(value)) + b"\0" + shown.encode())
