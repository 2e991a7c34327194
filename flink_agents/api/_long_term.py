"""Long-term memory (seeds 001, 003, 004): named memory sets of one key, kept in a vector store.

The interfaces and record types only; ``flink_agents.memory.long_term`` implements them on a
``VectorStore``. A memory set belongs to the key whose action created it and is invisible to
every other key. Writes go straight to the store (they are not buffered like short-term
memory): a re-executed action overwrites the items it wrote before instead of duplicating
them, because the runner derives their ids from the action's identity.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from flink_agents.api._chat import ChatMessage
from flink_agents.api._errors import FlinkAgentsError


class MemorySetNotFoundError(FlinkAgentsError, KeyError):
    """No memory set (or knowledge set) of that name exists for this key."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class CapacityManageStrategy(StrEnum):
    """How a memory set over its capacity is brought back under it (in the background).

    ``TRIM`` drops the oldest items; ``SUMMARIZE`` asks the chat model to fold the oldest
    items into one compacted item whose ``created_time`` is the range they covered. A
    module-level callable (see ``CompactionFunction``) may be given instead.
    """

    TRIM = "trim"
    SUMMARIZE = "summarize"


CompactionFunction = Callable[[list["MemorySetItem"], int], Sequence[Any]]
"""A user strategy: ``f(items, target)`` gets every item of the set, oldest first, and returns
what the set should hold instead, at most ``target`` entries. A returned ``MemorySetItem``
keeps that item; any other value is stored as a new compacted item. Items not returned are
deleted (after the new ones are written, so a failure loses nothing). It must be a module-level
function: the set records it by ``module:qualname`` so that later runs find it."""

TimeRange = tuple[datetime, datetime]

Tags = Mapping[str, float] | Sequence[str]
"""Tags with weights (``{"tag": weight}``), or a list of tags each weighing 1."""


def normalize_tags(tags: Tags | str | None) -> dict[str, float]:
    """``tags`` as ``{tag: weight}``: a list (or one string) gives every tag the weight 1."""
    if tags is None:
        return {}
    if isinstance(tags, str):
        return {tags: 1.0}
    if isinstance(tags, Mapping):
        result = {}
        for tag, weight in tags.items():
            if not isinstance(tag, str) or isinstance(weight, bool):
                raise TypeError(f"tags map str to a number, got {tag!r}: {weight!r}")
            result[tag] = float(weight)
        return result
    result = {}
    for tag in tags:
        if not isinstance(tag, str):
            raise TypeError(f"tags are strings, got {tag!r}")
        result[tag] = 1.0
    return result


class MemorySetItem(BaseModel):
    """One item of a memory set, as read back.

    Attributes:
        id: the item's id (a UUID string), for ``get`` and ``delete``.
        memory_set_name: the set it belongs to.
        item: the value: a str, a ``ChatMessage`` or any JSON value, per the set's item type.
        compacted: whether it replaces other items (a summary, or a user strategy's output).
        created_time: when it was added (UTC); for a compacted item, the (start, end) range
            of what it covers.
        last_accessed_time: when it was last returned by a read (UTC).
        tags: the item's tags and their weights (1 unless given).
        source: who it came from (e.g. the agent that handed it over); None if not said.
    """

    id: str
    memory_set_name: str
    item: Any
    compacted: bool = False
    created_time: datetime | TimeRange
    last_accessed_time: datetime | None = None
    tags: dict[str, float] = Field(default_factory=dict)
    source: str | None = None

    @property
    def value(self) -> Any:
        """``item``, by Apache Flink Agents' name."""
        return self.item

    @property
    def created_range(self) -> TimeRange:
        """``created_time`` as a (start, end) range; both ends equal for a plain item."""
        if isinstance(self.created_time, tuple):
            return self.created_time
        return (self.created_time, self.created_time)


def utc_now() -> datetime:
    return datetime.now(UTC)


class MemorySet(ABC):
    """A named, capacity-managed set of items of one key.

    Implementer obligations: ``add`` never waits for compaction (it only schedules it); reads
    never return another key's items; items are returned as ``MemorySetItem``.
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """The set's name."""

    @property
    @abstractmethod
    def item_type(self) -> type:
        """``str``, ``ChatMessage`` or ``object`` (any JSON value)."""

    @property
    @abstractmethod
    def capacity(self) -> int | None:
        """The most items the set holds once compaction settles; None for no limit."""

    @property
    @abstractmethod
    def capacity_manage_strategy(self) -> CapacityManageStrategy | CompactionFunction:
        """How the set is brought back under its capacity."""

    @abstractmethod
    def add(
        self,
        item: Any | Sequence[Any] = None,
        *,
        items: Sequence[Any] | None = None,
        tags: Tags | str | None = None,
        source: str | None = None,
    ) -> list[str]:
        """Add one item (``item``) or several (``items``); returns their ids in order.

        A list given as ``item`` to a set of JSON values is one item; for other sets it is
        read as several items. ``tags`` and ``source`` apply to every item added.

        Raises:
            TypeError: an item does not fit the set's item type.
        """

    @abstractmethod
    def get(self, ids: str | Sequence[str] | None = None) -> list[MemorySetItem]:
        """The items with these ids (in that order, missing ones left out), or every item,
        oldest first, when ``ids`` is None."""

    @abstractmethod
    def get_recent(self, n: int) -> list[MemorySetItem]:
        """The ``n`` newest items, oldest first (the order a prompt wants them in)."""

    @abstractmethod
    def search(
        self, query: str, limit: int = 10, filters: Mapping[str, Any] | None = None
    ) -> list[MemorySetItem]:
        """The ``limit`` items closest in meaning to ``query``, best first.

        ``filters`` may hold ``tags`` (a tag or list: any of them), ``source`` (a label or
        list), ``compacted`` (bool), ``created_after`` / ``created_before`` (datetimes).
        """

    @abstractmethod
    def delete(self, ids: str | Sequence[str] | None = None) -> None:
        """Delete these items (unknown ids are ignored), or every item when ``ids`` is None."""

    @abstractmethod
    def retrieve(self, tags: Tags | str) -> MemorySetItem | None:
        """The item whose tags best match (seed 004): its score is the sum of the weights of
        the query tags it carries (times its own tag weights). The newest wins a tie; None
        when no item scores above zero."""

    @abstractmethod
    def retrieve_all(self, tags: Tags | str) -> list[MemorySetItem]:
        """Every item at the best score of ``retrieve``, newest first; empty if none scores
        above zero."""

    @abstractmethod
    def size(self) -> int:
        """How many items the set holds now (compaction may still be lowering it)."""

    def add_from(
        self, payload: Sequence[Mapping[str, Any]], source: str | None = None
    ) -> list[str]:
        """Add memories another agent handed over (``items_for_handoff``'s payload).

        Each lands with its tags and with ``source`` (default: the sender named in the
        payload) as its source.
        """
        ids: list[str] = []
        for entry in payload:
            value = decode_handoff_value(entry)
            label = source if source is not None else entry.get("source")
            ids += self.add(items=[value], tags=entry.get("tags") or None, source=label)
        return ids

    def __len__(self) -> int:
        return self.size()


class LongTermMemory(ABC):
    """The memory sets of one key (``ctx.long_term_memory``)."""

    @abstractmethod
    def create_memory_set(
        self,
        name: str,
        item_type: type = str,
        capacity: int | None = None,
        capacity_manage_strategy: CapacityManageStrategy | str | CompactionFunction = (
            CapacityManageStrategy.TRIM
        ),
    ) -> MemorySet:
        """Create the set, or return it if it exists with the same settings.

        The settings are stored with the set, so later runs (and other processes) see them.

        Args:
            name: letters, digits, ``_``, ``.``, ``-``.
            item_type: ``str``, ``ChatMessage``, or ``object`` / ``dict`` / ``list`` for any
                JSON value.
            capacity: the most items kept once compaction settles; None for no limit.
            capacity_manage_strategy: ``TRIM``, ``SUMMARIZE`` (needs a chat model) or a
                module-level ``CompactionFunction``.

        Raises:
            ValueError: the set exists with other settings.
        """

    def get_or_create_memory_set(
        self,
        name: str,
        item_type: type = str,
        capacity: int | None = None,
        compaction_config: Any = None,
    ) -> MemorySet:
        """Apache Flink Agents' ``create_memory_set``: with a ``compaction_config``, the set
        is summarized when over capacity (by the ``long-term-memory-chat-model``), else
        trimmed."""
        strategy = (
            CapacityManageStrategy.SUMMARIZE
            if compaction_config is not None
            else CapacityManageStrategy.TRIM
        )
        return self.create_memory_set(name, item_type, capacity, strategy)

    @abstractmethod
    def get_memory_set(self, name: str) -> MemorySet:
        """The existing set ``name``.

        Raises:
            MemorySetNotFoundError: this key has no such set.
        """

    @abstractmethod
    def delete_memory_set(self, name: str) -> bool:
        """Delete the set and its items; False if it did not exist."""


# -- handing memories to another agent (seed 003) --------------------------------------------


def encode_handoff_value(value: Any) -> dict[str, Any]:
    if isinstance(value, ChatMessage):
        return {"type": "chat_message", "value": value.model_dump(mode="json")}
    return {"type": "json", "value": value}


def decode_handoff_value(entry: Mapping[str, Any]) -> Any:
    if entry.get("type") == "chat_message":
        return ChatMessage.model_validate(entry["value"])
    return entry.get("value")


def items_for_handoff(items: Sequence[MemorySetItem], sender: str) -> list[dict[str, Any]]:
    """A JSON-serializable payload of ``items`` to put in an event (or an agent's input).

    The receiver passes it to ``MemorySet.add_from``; the memories land there with ``sender``
    as their source, keeping their tags.
    """
    payload = []
    for entry in items:
        record = encode_handoff_value(entry.item)
        start, end = entry.created_range
        record.update(
            tags=dict(entry.tags),
            source=sender,
            original_source=entry.source,
            created_time=[start.isoformat(), end.isoformat()],
        )
        payload.append(record)
    return payload
