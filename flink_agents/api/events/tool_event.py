"""Tool events under Apache Flink Agents' module path: ours (``docs/migrating.md``)."""

from flink_agents.api._tools import ToolRequestEvent, ToolResponseEvent

__all__ = ["ToolRequestEvent", "ToolResponseEvent"]
