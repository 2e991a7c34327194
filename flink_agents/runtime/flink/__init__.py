"""The Flink runner: the dispatcher operator and the execution environment around it."""

from flink_agents.runtime.flink._dispatcher import DRAIN_TIMESTAMP, ERROR_TAG, AgentDispatcher
from flink_agents.runtime.flink._environment import FlinkAgentBuilder, FlinkExecutionEnvironment

__all__ = [
    "DRAIN_TIMESTAMP",
    "ERROR_TAG",
    "AgentDispatcher",
    "FlinkAgentBuilder",
    "FlinkExecutionEnvironment",
]
