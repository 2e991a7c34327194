"""Long-term memory under Apache Flink Agents' module path (``docs/migrating.md``).

Ours is configured by options (``long-term-memory-store``, ...), not by a backend class:
``BaseLongTermMemory`` is our ``LongTermMemory`` (``ctx.long_term_memory``), whose
``get_or_create_memory_set`` creates a set as theirs does.
"""

from flink_agents.api._long_term import (
    CapacityManageStrategy,
    LongTermMemory,
    MemorySet,
    MemorySetItem,
    MemorySetNotFoundError,
)

BaseLongTermMemory = LongTermMemory

__all__ = [
    "BaseLongTermMemory",
    "CapacityManageStrategy",
    "LongTermMemory",
    "MemorySet",
    "MemorySetItem",
    "MemorySetNotFoundError",
]
