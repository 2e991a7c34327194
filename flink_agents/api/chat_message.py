"""Chat messages under Apache Flink Agents' module path: ours (``docs/migrating.md``).

``extra_args`` fills the variables of the prompt of the chat model setup that answers.
"""

from flink_agents.api._chat import ChatMessage, MessageRole, ToolCall

__all__ = ["ChatMessage", "MessageRole", "ToolCall"]
