"""The Flink runner: the dispatcher operator and the execution environment around it."""

from flink_agents.runtime.flink._dispatcher import (
    DRAIN_TIMESTAMP,
    ERROR_TAG,
    MEMORY_TAG,
    AgentDispatcher,
)
from flink_agents.runtime.flink._environment import FlinkAgentBuilder, FlinkExecutionEnvironment
from flink_agents.runtime.flink._job import JobPaths, build_agent_job, read_json_files

__all__ = [
    "DRAIN_TIMESTAMP",
    "ERROR_TAG",
    "MEMORY_TAG",
    "AgentDispatcher",
    "FlinkAgentBuilder",
    "FlinkExecutionEnvironment",
    "JobPaths",
    "build_agent_job",
    "read_json_files",
]
