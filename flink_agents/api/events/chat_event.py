"""Chat events under Apache Flink Agents' module path: ours (``docs/migrating.md``)."""

from flink_agents.api._chat import ChatRequestEvent, ChatResponseEvent

__all__ = ["ChatRequestEvent", "ChatResponseEvent"]
