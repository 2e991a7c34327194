"""How memory items, set settings and times are laid out in a vector store's payloads.

One collection holds the memory sets of every key (the default payload indexes cover ``key``,
``set``, ``kind``, ``tags`` and ``created_time``); a set's settings are a point of kind
``set`` beside its items, so another process (or a later run) reads them from the store.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flink_agents.api import CapacityManageStrategy, ChatMessage, MemorySetItem
from flink_agents.api.internal import CompactionFunction, import_ref, ref_of

KIND_ITEM = "item"
KIND_COMPACTED = "compacted"
KIND_SET = "set"
ITEM_KINDS = (KIND_ITEM, KIND_COMPACTED)

TYPE_STR = "str"
TYPE_CHAT = "chat_message"
TYPE_JSON = "json"
_TYPES = {TYPE_STR: str, TYPE_CHAT: ChatMessage, TYPE_JSON: object}

FUNCTION_PREFIX = "function:"
EXTRA_INDEXES = {"source": "keyword"}


# -- keys, times ---------------------------------------------------------------------------


def key_text(key: Any) -> str:
    """The payload value of a run key: str keys as they are, others tagged with their type so
    that the int 1 and the str "1" stay apart."""
    return key if isinstance(key, str) else f"{type(key).__name__}:{key!r}"


class MonotonicClock:
    """Epoch seconds that strictly increase within the process, so items added in one call
    (or one microsecond) keep their order in ``created_time``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0.0

    def now(self) -> float:
        with self._lock:
            now = max(time.time(), self._last + 1e-6)
            self._last = now
            return now


CLOCK = MonotonicClock()


def to_datetime(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def to_seconds(value: datetime | float | int) -> float:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"give an aware datetime (e.g. in UTC), got naive {value}")
        return value.timestamp()
    if isinstance(value, bool) or not math.isfinite(float(value)):
        raise ValueError(f"not a time: {value!r}")
    return float(value)


# -- item types and values -------------------------------------------------------------------


def type_name(item_type: Any) -> str:
    """The stored name of a set's item type."""
    if item_type is str:
        return TYPE_STR
    if item_type is ChatMessage:
        return TYPE_CHAT
    if item_type in (object, dict, list, Any) or item_type is None:
        return TYPE_JSON
    raise TypeError(
        f"item_type must be str, ChatMessage or object (any JSON value), got {item_type!r}"
    )


def type_of(name: str) -> type:
    return _TYPES[name]


def encode_value(type_name: str, value: Any, set_name: str) -> Any:
    """``value`` as JSON for the payload, after checking it fits the set's item type."""
    if type_name == TYPE_STR:
        if not isinstance(value, str):
            raise TypeError(f"memory set {set_name!r} holds str items, got {type(value).__name__}")
        return value
    if type_name == TYPE_CHAT:
        if isinstance(value, Mapping):
            value = ChatMessage.model_validate(value)
        if not isinstance(value, ChatMessage):
            raise TypeError(
                f"memory set {set_name!r} holds ChatMessage items, got {type(value).__name__}"
            )
        return value.model_dump(mode="json", exclude_defaults=True)
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"memory set {set_name!r} holds JSON values; {value!r} is not one: {error}"
        ) from None


def decode_value(type_name: str, stored: Any) -> Any:
    if type_name == TYPE_CHAT:
        return ChatMessage.model_validate(stored)
    return stored


def text_of(value: Any) -> str:
    """The text embedded for an item: what a search should match it by."""
    if isinstance(value, str):
        return value
    if isinstance(value, ChatMessage):
        if value.text:
            return value.text
        if value.tool_calls:
            return json.dumps([c.model_dump(mode="json") for c in value.tool_calls])
        return " ".join(_part_label(part) for part in value.parts) or "[]"
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _part_label(part: Any) -> str:
    """A part without text as words a search can match: its kind, type and name."""
    name = getattr(part, "name", None)
    return " ".join(str(x) for x in (part.type, part.mime_type, name) if x)


# -- settings of a set ------------------------------------------------------------------------


def strategy_name(strategy: CapacityManageStrategy | str | CompactionFunction) -> str:
    if isinstance(strategy, str):
        return CapacityManageStrategy(strategy.lower()).value
    if callable(strategy):
        return FUNCTION_PREFIX + ref_of(strategy)
    raise TypeError(f"capacity_manage_strategy must be a strategy or a function, got {strategy!r}")


def strategy_of(name: str) -> CapacityManageStrategy | CompactionFunction:
    if name.startswith(FUNCTION_PREFIX):
        return import_ref(name.removeprefix(FUNCTION_PREFIX))
    return CapacityManageStrategy(name)


@dataclass(frozen=True)
class SetSettings:
    """A memory set's settings as stored in its ``set`` point."""

    name: str
    item_type: str
    capacity: int | None
    strategy: str

    def payload(self, key: str) -> dict[str, Any]:
        return {
            "kind": KIND_SET,
            "key": key,
            "set": self.name,
            "item_type": self.item_type,
            "capacity": self.capacity,
            "strategy": self.strategy,
            "created_time": CLOCK.now(),
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> SetSettings:
        return cls(
            payload["set"], payload["item_type"], payload.get("capacity"), payload["strategy"]
        )


# -- items ----------------------------------------------------------------------------------


def item_payload(
    key: str,
    settings: SetSettings,
    value: Any,
    tags: Mapping[str, float],
    source: str | None,
    *,
    created: tuple[float, float] | None = None,
    compacted: bool = False,
) -> dict[str, Any]:
    """An item's payload. Fields that would repeat another (``created_start``,
    ``last_accessed_time``: ``created_time``) or hold nothing (no tags, no source) are left
    out: a store converts every field of every point, and an added item's fields cost more
    than its vector (``item_from`` puts the values back)."""
    now = CLOCK.now()
    start, end = created if created is not None else (now, now)
    payload: dict[str, Any] = {
        "kind": KIND_COMPACTED if compacted else KIND_ITEM,
        "key": key,
        "set": settings.name,
        "item_type": settings.item_type,
        "value": value,
        "created_time": end,
    }
    if start != end:
        payload["created_start"] = start
    if now != end:
        payload["last_accessed_time"] = now
    if tags:
        payload["tags"] = sorted(tags)
        payload["tag_weights"] = dict(tags)
    if source is not None:
        payload["source"] = source
    return payload


def item_from(id: str, payload: Mapping[str, Any]) -> MemorySetItem:
    end = payload["created_time"]
    start = payload.get("created_start", end)
    compacted = payload["kind"] == KIND_COMPACTED
    created: Any = (to_datetime(start), to_datetime(end)) if compacted else to_datetime(end)
    accessed = payload.get("last_accessed_time", end)
    return MemorySetItem(
        id=id,
        memory_set_name=payload["set"],
        item=decode_value(payload["item_type"], payload["value"]),
        compacted=compacted,
        created_time=created,
        last_accessed_time=None if accessed is None else to_datetime(accessed),
        tags=dict(payload.get("tag_weights") or {}),
        source=payload.get("source"),
    )
