"""Built-in agents (``ReActAgent``) and the built-in chat and tool actions every plan gets."""

from flink_agents.agents._builtin import chat_model_action, tool_call_action
from flink_agents.agents._react import ReActAgent

__all__ = ["ReActAgent", "chat_model_action", "tool_call_action"]
