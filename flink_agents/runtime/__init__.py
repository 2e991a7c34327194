"""The runtime: the run engine shared by all runners, and the local runner."""

from flink_agents.runtime._engine import PendingAction, RunEngine, RunState, StepResult
from flink_agents.runtime._local import LocalAgentBuilder, LocalExecutionEnvironment, LocalRunner

__all__ = [
    "LocalAgentBuilder",
    "LocalExecutionEnvironment",
    "LocalRunner",
    "PendingAction",
    "RunEngine",
    "RunState",
    "StepResult",
]
