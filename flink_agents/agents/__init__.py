"""Built-in agents (``ReActAgent``) and the built-in chat, tool and context-retrieval actions
every plan gets."""

from flink_agents.agents._builtin import chat_model_action, tool_call_action
from flink_agents.agents._react import ReActAgent
from flink_agents.agents._retrieval import context_retrieval_action

__all__ = ["ReActAgent", "chat_model_action", "context_retrieval_action", "tool_call_action"]
