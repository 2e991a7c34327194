"""The runtime: the run engine shared by all runners, and the local runner."""

from flink_agents.runtime._engine import PendingAction, RunEngine, RunState, StepResult
from flink_agents.runtime._local import (
    LocalAgentBuilder,
    LocalExecutionEnvironment,
    LocalRunner,
    local_journal,
)
from flink_agents.runtime._options import AgentOptions, load_options

__all__ = [
    "AgentOptions",
    "LocalAgentBuilder",
    "LocalExecutionEnvironment",
    "LocalRunner",
    "PendingAction",
    "RunEngine",
    "RunState",
    "StepResult",
    "load_options",
    "local_journal",
]
