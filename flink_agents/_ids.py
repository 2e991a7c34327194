"""Every id flink_agents derives, and the one spelling of a key, each scheme versioned.

A replayed action must meet the ids its first execution made: its run's input event, the
points it wrote to long-term memory and knowledge sets, its external writes, the calls it
recorded. So every id here is derived from names and counters, never from ``hash()``
(randomized per process for str and bytes), object addresses, or dict and set order, and
every derivation lives in this module (nothing else in flink_agents calls ``uuid.uuid5``).

Ids are persisted: in Flink state, in the action log, as point ids in vector stores, and in
users' own systems (``ctx.external_id()``). So a scheme never changes what it computes under
its version (``SCHEMES``); ``tests/test_ids.py`` holds golden values of every scheme. A new
derivation is a new version, and a reader that meets ids of an older version must keep
computing those (``docs/upgrading.md``).

Keys: ``key_text`` is the one canonical spelling of a run's key (JSON where possible, so that
``"1"`` and ``1`` stay apart, else a tagged ``repr``). Two schemes older than it spell keys
their own way and keep doing so under their version: sub-run input ids (``repr``) and
long-term memory's ``key`` field (``memory_key_text``).

Random ids (events without a derived id, generated job names) are made here too, so that
"where does this id come from" has one answer.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import functools
import hashlib
import json
import pathlib
import pickle
import random
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from flink_agents._public import DEFINED_IN

SCHEMES: Mapping[str, int] = {
    "key": 1,
    "input-event": 2,
    "sub-run-input": 1,
    "derived-event": 1,
    "external": 1,
    "point": 1,
    "knowledge-document": 1,
    "memory-set": 1,
    "compacted-item": 1,
    "call-function": 1,
    "call-arguments": 1,
    "memory-key": 1,
    "scheduled-handle": 1,
}
"""The version of each id scheme this release computes. Version 1 of ``input-event`` digested
the job, key and run sequence together per run; its ids are not recognised any more (a run of
a job of that release replayed after an upgrade gets a new input event id)."""

ACTION_LOG_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://flink-agents/action-log")
"""The UUID5 namespace of input event and external ids; changing it changes every id."""
POINT_NAMESPACE = uuid.UUID("5d0b7c1e-6a43-4c55-9f2e-0c3a8d1f7b21")
"""The UUID5 namespace of vector store point ids."""

IdentityParts = Sequence[str | int]
"""An action execution's identity: job, key (``key_text``), run sequence, step, action."""


# -- keys ------------------------------------------------------------------------------------


def key_text(key: Any) -> str:
    """The key as ids and the action log spell it: JSON with sorted keys where possible
    (``"a"`` and ``1`` stay apart), else ``repr:`` and its ``repr``; equal in every process."""
    if type(key) is str:  # the common case: cached, as a key is spelled on every run
        return _key_text_of_str(key)
    return _key_text(key)


def _key_text(key: Any) -> str:
    try:
        return json.dumps(key, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return f"repr:{key!r}"


_key_text_of_str = functools.lru_cache(maxsize=8192)(_key_text)


def memory_key_text(key: Any) -> str:
    """A run key as long-term memory's ``key`` field stores it (scheme ``memory-key``): str
    keys as they are, others tagged with their type, so the int 1 and the str "1" differ."""
    return key if isinstance(key, str) else f"{type(key).__name__}:{key!r}"


# -- event ids -------------------------------------------------------------------------------

_UNKNOWN_SAFETY = uuid.SafeUUID.unknown
_VARIANT_AND_VERSION_BITS = (0xC000 << 48) | (0xF000 << 64)
_RFC_4122_VARIANT = 0x8000 << 48
_VERSION_4_BITS = _RFC_4122_VARIANT | (4 << 76)
# ``int`` and ``is_safe`` are a UUID's only fields (its ``__slots__``), so a UUID made with
# ``object.__new__`` and these two set equals, hashes and pickles like one from the
# constructor, which also validates its arguments: events are made on every step of every
# run, and the checks cost as much as the rest of an id (bench/RESULTS.md).
_set_int = uuid.UUID.__dict__["int"].__set__
_set_is_safe = uuid.UUID.__dict__["is_safe"].__set__
_new_object = object.__new__
_random_bits = random.getrandbits


def uuid_from_bits(bits: int, version: int) -> uuid.UUID:
    """``uuid.UUID(int=bits, version=version)``: the UUID of 128 ``bits`` with its variant and
    ``version`` set, without the constructor's argument checks."""
    value = _new_object(uuid.UUID)
    _set_int(value, (bits & ~_VARIANT_AND_VERSION_BITS) | _RFC_4122_VARIANT | (version << 76))
    _set_is_safe(value, _UNKNOWN_SAFETY)
    return value


def new_event_id() -> uuid.UUID:
    """A random version-4 UUID for an event that has no derived id.

    From the ``random`` module rather than ``os.urandom`` (which ``uuid4`` uses): a system
    call per event cost as much as the rest of the event. The ids are unique, not secret.
    ``random`` is seeded from the system when imported and reseeded in a forked child, so
    processes do not repeat each other.
    """
    value = _new_object(uuid.UUID)
    _set_int(value, (_random_bits(128) & ~_VARIANT_AND_VERSION_BITS) | _VERSION_4_BITS)
    _set_is_safe(value, _UNKNOWN_SAFETY)
    return value


@functools.lru_cache(maxsize=8192)
def _json_string(text: str) -> str:
    return json.dumps(text)


_RUN_BITS = (1 << 62) - 1
"""The low 62 bits of a UUID, below its variant bits: where a run sequence is folded in."""


@functools.lru_cache(maxsize=16384)
def _input_id_base(job: str, spelled_key: str) -> int:
    """128 bits of the name-based (version 5, SHA-1) UUID of ``["input", job, key]``."""
    name = f'["input", {_json_string(job)}, {_json_string(spelled_key)}]'
    digest = hashlib.sha1(ACTION_LOG_NAMESPACE.bytes + name.encode()).digest()
    return int.from_bytes(digest[:16], "big")


def input_event_id(job: str, key: Any, run_sequence: int) -> uuid.UUID:
    """The id of a run's ``InputEvent`` (scheme ``input-event`` 2): the same when the input
    is replayed.

    A version-5 UUID of the job and the key (digested once per key, not per run), with the
    run sequence XORed into its low 62 bits: the runs of a key get distinct ids (a sequence
    stays far below 2**62), and two keys' ids can meet only if their digests agree on every
    bit above those the sequences reach (about 2**-60 per pair of keys).
    """
    base = _input_id_base(job, key_text(key))
    return uuid_from_bits(base ^ (run_sequence & _RUN_BITS), 5)


def sub_run_input_id(job: str, key: Any, sequence: int, step: int, namespace: str) -> uuid.UUID:
    """The id of a sub-run's ``InputEvent`` (``ctx.run_agent``; scheme ``sub-run-input`` 1):
    from the job, the caller's key (its ``repr``), run sequence and step, and the sub-run's
    namespace within the run."""
    return uuid.uuid5(uuid.NAMESPACE_OID, f"{job}|{key!r}|{sequence}|{step}|{namespace}")


def derived_event_id(parent: uuid.UUID, purpose: str) -> uuid.UUID:
    """The id of an event an action makes for ``purpose`` from the event ``parent`` it
    handles (scheme ``derived-event`` 1): the same when the action is replayed."""
    return uuid.uuid5(parent, purpose)


def scheduled_handle(sequence: int, step: int, action: str, index: int) -> str:
    """The handle of the ``index``-th event an execution of ``action`` (run ``sequence`` of
    a key, step ``step``) schedules (``ctx.schedule``; scheme ``scheduled-handle`` 1):
    distinct among a key's scheduled events, and the same when the action runs again."""
    return str(
        uuid.uuid5(ACTION_LOG_NAMESPACE, json.dumps(["scheduled", sequence, step, action, index]))
    )


# -- ids of what actions write outside Flink -------------------------------------------------


def external_id(identity: IdentityParts, index: int) -> str:
    """The UUID5 of the ``index``-th external write of the action ``identity`` (job, key,
    run sequence, step, action; scheme ``external`` 1)."""
    return str(uuid.uuid5(ACTION_LOG_NAMESPACE, json.dumps([*identity, index])))


def point_id(*parts: str | int) -> str:
    """A vector store point id from ``parts`` (e.g. an action's identity, the set and the
    item's index; scheme ``point`` 1): writing the same item again overwrites it."""
    return str(uuid.uuid5(POINT_NAMESPACE, "\x1f".join(str(p) for p in parts)))


def knowledge_document_id(set_name: str, document_id: str) -> str:
    """The point id of document ``document_id`` in knowledge set ``set_name`` (scheme
    ``knowledge-document`` 1): from the set and the document, never from who loads it or
    when, so loading a document again overwrites its point."""
    return point_id("knowledge-document", set_name, document_id)


def memory_set_id(key: str, name: str) -> str:
    """The point id of the settings record of long-term memory set ``name`` of ``key``
    (its ``memory_key_text``; scheme ``memory-set`` 1)."""
    return point_id("memory-set", key, name)


def knowledge_set_id(name: str) -> str:
    """The point id of knowledge set ``name``'s settings record (scheme ``memory-set`` 1)."""
    return point_id("knowledge-set", name)


def compacted_item_ids(
    key: str, set_name: str, first_id: str, last_id: str, replaced: int, count: int
) -> list[str]:
    """The ids of the ``count`` items a compaction writes in place of ``replaced`` items
    from ``first_id`` to ``last_id`` (scheme ``compacted-item`` 1): a retried compaction
    of the same items overwrites its own output."""
    return [
        point_id("compacted", key, set_name, first_id, last_id, replaced, n) for n in range(count)
    ]


# -- recorded calls --------------------------------------------------------------------------


DURABLE_NAME_ATTR = "__flink_agents_durable_name__"
"""The attribute ``durable_name`` sets on a function: its frozen name in the action log."""

_F = TypeVar("_F", bound=Callable[..., Any])


def durable_name(name: str) -> Callable[[_F], _F]:
    """Freeze the name under which the action log records durable calls of a function of
    ours (scheme ``call-function`` 1), so that moving or renaming its module does not make
    every recorded call miss on replay (and be paid again).

    ``name`` is the ``module:qualname`` the function had when its calls were first recorded,
    and stays as it is when the function moves. Only for flink_agents' own functions that a
    durable call reaches (``tests/test_ids.py`` lists them); a user's function is named by
    its module path, which is the user's to keep."""

    def frozen(function: _F) -> _F:
        setattr(function, DURABLE_NAME_ATTR, name)
        return function

    return frozen


def function_id(function: Callable[..., Any]) -> str:
    """A durable call's function as the log names it (scheme ``call-function`` 1): its
    frozen ``durable_name`` if it has one, else ``module:qualname``; stable across
    processes; a ``functools.partial`` by its function, a bound method by its function."""
    target = getattr(function, "func", function)
    frozen = getattr(target, DURABLE_NAME_ATTR, None)  # a bound method reads its function's
    if type(frozen) is str:
        return frozen
    return module_path_name(target)


def module_path_name(function: Callable[..., Any]) -> str:
    """``function`` as ``module:qualname``: how ``function_id`` names a function without a
    frozen name (every function of a user's)."""
    module = getattr(function, "__module__", None) or type(function).__module__
    name = getattr(function, "__qualname__", None) or type(function).__qualname__
    return f"{module}:{name}"


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
    """A sha256 hex digest of a call's arguments (scheme ``call-arguments`` 1), equal across
    calls and processes.

    Arguments are encoded canonically: None, bool, int, str and bytes by value; the
    ``_REPR_STABLE`` types (float, Decimal, datetime types, UUID, paths) by type and
    ``repr``; lists and tuples in order; dicts, sets and frozensets independent of their
    order; enums, dataclasses and pydantic models by qualified type name and fields. Keyword
    arguments are order-independent. A model's fields named in its class attribute
    ``_digest_when_set`` (fields it gained after calls were recorded with it) count only
    when they differ from their default, so those calls still match.

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


def _frame(tag: bytes, body: bytes) -> bytes:
    """Tag and length prefix, so that no two different values encode to the same bytes."""
    return tag + len(body).to_bytes(8, "big") + body


def _type_name(kind: type) -> bytes:
    module = DEFINED_IN.get(kind) or kind.__module__
    return f"{module}.{kind.__qualname__}".encode()


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
        for name in getattr(kind, "_digest_when_set", ()):
            if fields[name] == type(value).model_fields[name].get_default(
                call_default_factory=True
            ):
                del fields[name]
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


# -- generated names -------------------------------------------------------------------------


def new_job_name() -> str:
    """A name for a job submitted without ``action-log-job``: random, new per submission."""
    return uuid.uuid4().hex
