"""``MemoryRef`` under Apache Flink Agents' module path: ours (``docs/migrating.md``)."""

from flink_agents.api._memory import MemoryRef, MemoryType

__all__ = ["MemoryRef", "MemoryType"]
