"""The public API of flink_agents: everything an agent author imports.

Never imports pyflink or the runtime, so agents can be written, tested and compiled
without a JVM.
"""

from flink_agents.api._agent import Agent, action, resource
from flink_agents.api._context import RunnerContext
from flink_agents.api._environment import AgentBuilder, AgentsExecutionEnvironment
from flink_agents.api._errors import (
    ActionExecutionError,
    FlinkAgentsError,
    MemoryPathError,
    MemoryValueError,
    PlanError,
)
from flink_agents.api._events import Event, InputEvent, OutputEvent
from flink_agents.api._memory import MemoryObject
from flink_agents.api._resources import ResourceType

__all__ = [
    "ActionExecutionError",
    "Agent",
    "AgentBuilder",
    "AgentsExecutionEnvironment",
    "Event",
    "FlinkAgentsError",
    "InputEvent",
    "MemoryObject",
    "MemoryPathError",
    "MemoryValueError",
    "OutputEvent",
    "PlanError",
    "ResourceType",
    "RunnerContext",
    "action",
    "resource",
]
