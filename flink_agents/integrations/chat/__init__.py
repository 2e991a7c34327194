"""Chat model integrations (only the ``openai`` client is needed, a core dependency)."""

from flink_agents.integrations.chat._openai import OpenAIChatModel
from flink_agents.integrations.chat._retry import RetryPolicy

__all__ = ["OpenAIChatModel", "RetryPolicy"]
