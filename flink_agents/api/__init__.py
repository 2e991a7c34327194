"""The public API of flink_agents: everything an agent author imports.

Never imports pyflink or the runtime, so agents can be written, tested and compiled
without a JVM.
"""

from flink_agents._public import name_by_package
from flink_agents.api._agent import Agent, action, resource
from flink_agents.api._chat import (
    BaseChatModel,
    ChatMessage,
    ChatModelError,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    ContentPart,
    DocumentPart,
    ImagePart,
    LoopLimitExceededError,
    MaxStepsExceededError,
    MessageRole,
    StructuredOutputError,
    TextPart,
    TokenUsage,
    ToolCall,
)
from flink_agents.api._context import RunnerContext
from flink_agents.api._embedding import BaseEmbeddingModel, EmbeddingError
from flink_agents.api._environment import AgentBuilder, AgentsExecutionEnvironment
from flink_agents.api._erasure import ForgetKey
from flink_agents.api._errors import (
    ActionExecutionError,
    FlinkAgentsError,
    MemoryPathError,
    MemoryValueError,
    PlanError,
    WaitTimedOut,
)
from flink_agents.api._events import Event, InputEvent, OutputEvent
from flink_agents.api._knowledge import Knowledge, KnowledgeSet, KnowledgeSetItem
from flink_agents.api._long_term import (
    CapacityManageStrategy,
    LongTermMemory,
    MemorySet,
    MemorySetItem,
    MemorySetNotFoundError,
    items_for_handoff,
)
from flink_agents.api._memory import MemoryObject, MemoryRef, MemoryType
from flink_agents.api._metrics import (
    Counter,
    Gauge,
    Histogram,
    HistogramStatistics,
    Meter,
    MetricGroup,
)
from flink_agents.api._prompts import Prompt, PromptFormatError, PromptSet
from flink_agents.api._resources import (
    ResourceDescriptor,
    ResourceType,
    UnknownResourceError,
    env_ref,
)
from flink_agents.api._retrieval import ContextRetrievalRequestEvent, ContextRetrievalResponseEvent
from flink_agents.api._scheduling import EventScheduled, ScheduleCancelled
from flink_agents.api._skill_folder import Skill, SkillError
from flink_agents.api._skills import Skills
from flink_agents.api._spend import Budget, BudgetExceededError, ModelPrice, SizeRoute
from flink_agents.api._sub_agent import SubAgent
from flink_agents.api._tools import (
    FunctionTool,
    Tool,
    ToolArgumentsError,
    ToolRequestEvent,
    ToolResponseEvent,
    ToolResult,
    ToolSet,
    ToolSpec,
    ToolUnavailableError,
    tool,
)

__all__ = [
    "ActionExecutionError",
    "Agent",
    "AgentBuilder",
    "AgentsExecutionEnvironment",
    "BaseChatModel",
    "BaseEmbeddingModel",
    "Budget",
    "BudgetExceededError",
    "CapacityManageStrategy",
    "ChatMessage",
    "ChatModelError",
    "ChatRequestEvent",
    "ChatResponse",
    "ChatResponseEvent",
    "ContentPart",
    "ContextRetrievalRequestEvent",
    "ContextRetrievalResponseEvent",
    "Counter",
    "DocumentPart",
    "EmbeddingError",
    "Event",
    "EventScheduled",
    "FlinkAgentsError",
    "ForgetKey",
    "FunctionTool",
    "Gauge",
    "Histogram",
    "HistogramStatistics",
    "ImagePart",
    "InputEvent",
    "Knowledge",
    "KnowledgeSet",
    "KnowledgeSetItem",
    "LongTermMemory",
    "LoopLimitExceededError",
    "MaxStepsExceededError",
    "MemoryObject",
    "MemoryPathError",
    "MemoryRef",
    "MemorySet",
    "MemorySetItem",
    "MemorySetNotFoundError",
    "MemoryType",
    "MemoryValueError",
    "MessageRole",
    "Meter",
    "MetricGroup",
    "ModelPrice",
    "OutputEvent",
    "PlanError",
    "Prompt",
    "PromptFormatError",
    "PromptSet",
    "ResourceDescriptor",
    "ResourceType",
    "RunnerContext",
    "ScheduleCancelled",
    "SizeRoute",
    "Skill",
    "SkillError",
    "Skills",
    "StructuredOutputError",
    "SubAgent",
    "TextPart",
    "TokenUsage",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolRequestEvent",
    "ToolResponseEvent",
    "ToolResult",
    "ToolSet",
    "ToolSpec",
    "ToolUnavailableError",
    "UnknownResourceError",
    "WaitTimedOut",
    "action",
    "env_ref",
    "items_for_handoff",
    "resource",
    "tool",
]

name_by_package(__name__, globals(), __all__)
