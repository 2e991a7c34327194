"""Long-term memory under Apache Flink Agents' module path (``docs/migrating.md``).

Ours is configured by options (``long-term-memory-store``, ``long-term-memory-embedding``,
``long-term-memory-chat-model``), not by a backend resource: ``BaseLongTermMemory`` is our
``LongTermMemory`` (``ctx.long_term_memory``), whose ``get_or_create_memory_set`` creates a
set as theirs does (a ``CompactionConfig`` makes it summarized when over capacity).
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum

from pydantic import BaseModel

from flink_agents.api._chat import ChatMessage
from flink_agents.api._long_term import (
    CapacityManageStrategy,
    LongTermMemory,
    MemorySet,
    MemorySetItem,
    MemorySetNotFoundError,
)
from flink_agents.api._prompts import Prompt
from flink_agents.api.configuration import ConfigOption

BaseLongTermMemory = LongTermMemory
ItemType = str | ChatMessage


class CompactionConfig(BaseModel):
    """How a set over capacity is summarized: here by the ``long-term-memory-chat-model``
    option's model (``model``, ``prompt`` and ``limit`` are kept for their code)."""

    model: str
    prompt: str | Prompt | None = None
    limit: int = 1


class LongTermMemoryBackend(Enum):
    """Their backends; ours is the ``long-term-memory-store`` option."""

    EXTERNAL_VECTOR_STORE = "external_vector_store"


class LongTermMemoryOptions:
    """Their option names (not read here: see ``docs/migrating.md``)."""

    BACKEND = ConfigOption(
        key="long-term-memory.backend", config_type=LongTermMemoryBackend, default=None
    )
    EXTERNAL_VECTOR_STORE_NAME = ConfigOption(
        key="long-term-memory.external-vector-store-name", config_type=str, default=None
    )
    ASYNC_COMPACTION = ConfigOption(
        key="long-term-memory.async-compaction", config_type=bool, default=True
    )


class DatetimeRange(BaseModel):
    """A span of time."""

    start: datetime
    end: datetime


__all__ = [
    "BaseLongTermMemory",
    "CapacityManageStrategy",
    "CompactionConfig",
    "DatetimeRange",
    "ItemType",
    "LongTermMemory",
    "LongTermMemoryBackend",
    "LongTermMemoryOptions",
    "MemorySet",
    "MemorySetItem",
    "MemorySetNotFoundError",
]
